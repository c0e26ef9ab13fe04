"""``train.py``'s refusals as a user meets them (issue 37): each a process that exits with code 2
before any work, naming the key at fault and the fix. The four commands run at once (the
resume, which starts TensorFlow, overlaps the others); the in-process checks of each are beside
their modules' tests (test_config_schemas.py, test_resume_keys.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.fake_run import TINY, make_run
from tests.test_resume import ENV


@pytest.mark.slow
def test_train_py_refuses_before_any_work_naming_the_key(compose, tmp_path):
    run_dir = make_run(compose, tmp_path / "run", steps=(5,))
    never = f"data.hr_dir={tmp_path / 'never-read'}"
    cases = {
        "patch": (
            ["loss=realesrgan", "discriminator=unet_sn", "data.patch_size=100"],
            "data.patch_size=100: discriminator=unet_sn halves the HR patch three times",
        ),
        "resume": (
            [*TINY, never, f"resume={run_dir}", f"train.init_from={tmp_path / 'other'}"],
            f"resume={run_dir} with train.init_from={tmp_path / 'other'}: a resume continues "
            "the run from its own checkpoint",
        ),
        # a damaged best of train.init_from, refused by the same guard before any work:
        # test_resume_keys.py's test_a_damaged_best_is_refused_before_any_work_naming_the_init_
        # from_of_another (the message, nothing written, in process)
        "frames": (
            ["data=sequence", "model=espcn_mf", "data.frames=0"],
            "data.frames must be an integer >= 1, got 0 (model.frames follows it)",
        ),
        "quote": (
            ["data.hr_dir=/data/photos/café"],
            "quote it for Hydra, and that for the shell: \"data.hr_dir='/data/photos/café'\"",
        ),
    }
    procs = {}
    for name, (argv, _) in cases.items():
        out = tmp_path / "outs" / name
        cmd = [sys.executable, str(ROOT / "train.py"), *argv]
        if name != "resume":  # a resume's directory is the run's
            cmd.append(f"hydra.run.dir={out}")
        procs[name] = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=ENV,
        )  # fmt: skip
    for name, proc in procs.items():
        log, _ = proc.communicate(timeout=600)
        assert proc.returncode == 2, (name, log[-3000:])
        assert cases[name][1] in log, (name, log[-3000:])
        assert "Traceback" not in log, (name, log[-3000:])
        out = tmp_path / "outs" / name
        assert not (out / "checkpoints").exists() and not (tmp_path / "never-read").exists()
        if name in ("patch", "frames", "quote"):  # refused before Hydra made the run folder
            assert not out.exists(), name
    assert sorted(p.name for p in (run_dir / ".hydra").iterdir()) == ["config.yaml"]


# Configs that read every schema's checks: each model builder's, each data mode's, the GAN stage's
# and the Real-ESRGAN degradation's
CHECKED = [
    ["model=rrdbnet", "degradation=realesrgan", "data.channels=rgb", "loss=realesrgan",
     "discriminator=unet_sn"],
    ["model=span", "data=generator", "optimizer=adamw", "loss=charbonnier"],
    ["model=espcn_mf", "data=sequence"],
]  # fmt: skip
# Refusals of each kind: an unknown key, the degradation's range and key (its class's check), the
# discriminator's patch multiple, a name Keras has no activation for
REFUSED = [
    ["data.pach=64"],
    ["degradation=realesrgan", "degradation.sinc_prob=2"],
    ["degradation=realesrgan", "+degradation.sinc=0.1"],
    ["loss=realesrgan", "discriminator=unet_sn", "data.patch_size=100"],
    ["model.activation=relu7"],
]
NO_TF_CHECK = """
import json, runpy, sys
import sr.config
for argv in json.loads(sys.argv[1]):
    sr.config.load(*argv)
codes = []
for argv in json.loads(sys.argv[2]):
    sys.argv = ["train.py", *argv]
    try:
        runpy.run_path("train.py", run_name="__main__")
    except SystemExit as e:
        codes.append(e.code)
print(json.dumps([codes, sorted(m for m in ("tensorflow", "keras") if m in sys.modules)]))
"""


@pytest.mark.slow
def test_a_bad_command_line_is_refused_before_tensorflow_is_imported():
    """train.py composes and checks the command line with no TensorFlow (issue 36): the valid
    configs of every group and each refusal (exit code 2, the message of the in-process check,
    which test_config_schemas.py pins) leave ``tensorflow`` and ``keras`` out of
    ``sys.modules`` of a fresh interpreter."""
    import json

    from sr.config import ConfigError, load

    messages = []
    for argv in REFUSED:
        with pytest.raises(ConfigError) as info:
            load(*argv)
        messages.append(f"error: {info.value}")
    assert messages[0] == (
        "error: Could not override 'data.pach'.: Key 'pach' not in 'TFRecordConfig' "
        "(key data.pach of TFRecordConfig)"
    )
    run = subprocess.run(
        [sys.executable, "-c", NO_TF_CHECK, json.dumps(CHECKED), json.dumps(REFUSED)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    codes, imported = json.loads(run.stdout.splitlines()[-1])
    assert codes == [2] * len(REFUSED), run.stderr[-3000:]
    assert run.stderr.splitlines() == messages
    assert imported == [], f"{imported} imported by the check of a command line"


def test_the_schemas_without_tensorflow_are_those_of_the_classes_they_configure():
    """What the TF-free schema modules restate: the data sources' schemas, the degradations'
    classes, the Keras activations, the frame names."""
    import hydra
    import keras

    from sr.config import BICUBIC_TARGET
    from sr.core.frames import TARGETS
    from sr.data import SOURCES
    from sr.data.schemas import SCHEMAS, SequenceConfig
    from sr.degradations import Bicubic, RealESRGAN, realesrgan_params
    from sr.models.espcn import KERAS_ACTIVATIONS

    assert {source.mode: source.schema for source in SOURCES} == SCHEMAS
    assert hydra.utils.get_class(realesrgan_params.TARGET) is RealESRGAN
    assert hydra.utils.get_class(BICUBIC_TARGET) is Bicubic
    assert SequenceConfig().target_frame == TARGETS[0]
    public = {
        name
        for name in dir(keras.activations)
        if not name.startswith("_") and name not in ("get", "serialize", "deserialize")
    }
    assert set(KERAS_ACTIVATIONS) == public, "update sr.models.espcn.KERAS_ACTIVATIONS"
    assert all(callable(keras.activations.get(name)) for name in KERAS_ACTIVATIONS)


def test_the_exit_codes_of_train_py():
    """``train.exit_codes()``, imported after the check: each error class's code."""
    import importlib.util

    from sr.config import ConfigError
    from sr.core.errors import RunDirError
    from sr.core.images import ImageFolderError
    from sr.core.runfiles import RunFileError
    from sr.data.service import ServiceError
    from sr.train.distribute import ClusterTimeoutError
    from sr.train.guard import DivergenceError
    from sr.train.saving import NonFiniteError

    spec = importlib.util.spec_from_file_location("train_script", ROOT / "train.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    codes = {error: code for errors, code in script.exit_codes() for error in errors}
    bad_input = (ConfigError, RunDirError, ImageFolderError, ServiceError, RunFileError)
    assert codes == {
        **dict.fromkeys((*bad_input, FileNotFoundError), 2),
        NonFiniteError: 3,
        DivergenceError: 4,
        ClusterTimeoutError: 5,
    }
