"""``train.py``'s refusals as a user meets them (issue 37): each a process that exits with code 2
before any work, naming the key at fault and the fix. The five commands run at once (their
TensorFlow start-ups overlap on two cores); the in-process checks of each are beside their
modules' tests (test_config_schemas.py, test_resume_keys.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import tensorflow as tf

from sr.train.checkpoint import best_dir, build_model, make_checkpoint
from tests.conftest import ROOT
from tests.fake_run import TINY, make_run
from tests.test_resume import ENV


def damaged_best(compose, run_dir):
    """A fake run (ckpt-5 in the rotation) whose ``checkpoints/best/ckpt-5`` is truncated."""
    make_run(compose, run_dir, steps=(5,))
    model, step = build_model(compose(*TINY)), tf.Variable(5, dtype=tf.int64)
    best = tf.train.CheckpointManager(
        make_checkpoint(model, step=step), str(best_dir(run_dir)), max_to_keep=1
    )
    best.save(checkpoint_number=5)
    data = next(best_dir(run_dir).glob("ckpt-5.data-*"))
    data.write_bytes(data.read_bytes()[:16])
    return run_dir


@pytest.mark.slow
def test_train_py_refuses_before_any_work_naming_the_key(compose, tmp_path):
    run_dir = make_run(compose, tmp_path / "run", steps=(5,))
    damaged = damaged_best(compose, tmp_path / "damaged")
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
        "damaged": (
            [*TINY, never, f"train.init_from={damaged}"],
            "the best checkpoint is damaged: start from another of its checkpoints with "
            f"train.init_from={damaged}/checkpoints/ckpt-5",
        ),
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
