"""What users type: train.py in a subprocess, in both modes, with resume and interruption."""

import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.conftest import ROOT

SCALARS = {
    "train/loss",
    "train/step_time_ms",
    "train/data_wait_ms",
    "train/patches_per_sec",
    "train/lr",
    "val/psnr",
    "val/ssim",
    "val/psnr_bicubic",
}
TIMING = re.compile(
    r"\[\d+:\d\d:\d\d\.\d+\] step (\d+)/\d+  loss [\d.]+  step [\d.]+ ms  "
    r"data-wait [\d.]+ ms \([\d.]+%\)  \d+ patches/s"
)


def train(folders, run_dir, *overrides, timeout=300, wait=True):
    tfrecord = (f"data.data_root={folders / 'root'}", "data.num_shards=2")
    shards = () if "data=generator" in overrides else tfrecord
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        *shards,
        "data.batch_size=8",
        *overrides,
    ]
    if run_dir is not None:
        cmd.append(f"hydra.run.dir={run_dir}")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if not wait:
        return subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def scalars(run_dir: Path) -> dict[str, list]:
    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"tensors": 0, "images": 0})
    acc.Reload()
    tags = acc.Tags()
    out = {t: [e.step for e in acc.Tensors(t)] for t in tags["tensors"]}
    out.update({t: [e.step for e in acc.Images(t)] for t in tags["images"]})
    return out


SHORT_RUN = ("train.steps=6", "train.log_every=2", "train.val_every=4", "train.ckpt_every=4")


def assert_short_run(run: Path, log: str) -> None:
    """What a :data:`SHORT_RUN` leaves: timing lines at steps 2, 4, 6 in ``log``, checkpoints of
    steps 4 and 6, and the TensorBoard scalars, images and hparams."""
    assert [int(m) for m in TIMING.findall(log)] == [2, 4, 6]
    assert "final step 6: val PSNR" in log and "vs bicubic" in log
    assert (run / "checkpoints" / "ckpt-6.index").is_file()
    assert (run / "checkpoints" / "ckpt-4.index").is_file()
    logged = scalars(run)
    assert SCALARS <= set(logged), sorted(logged)
    assert logged["train/loss"] == [2, 4, 6] and logged["val/psnr"] == [4, 6]
    assert any("bicubic | SR | HR" in t for t in logged)
    assert "_hparams_/session_start_info" in logged  # the HParams dashboard's record of the run


@pytest.mark.slow
def test_short_run_logs_timing_checkpoints_and_tensorboard(folders, tmp_path, compose, caplog):
    """data=generator in process (sr.train.app.run, what train.py calls): the records of a
    :data:`SHORT_RUN`. Through train.py with data=tfrecord (its output and Hydra's train.log):
    test_the_default_command_trains_on_the_demo_photos, the same records."""
    from sr.train.app import run as train_in_process

    run = tmp_path / "generator"
    cfg = compose(
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        "data=generator",
        "data.batch_size=8",
        *SHORT_RUN,
    )
    with caplog.at_level(logging.INFO):
        train_in_process(cfg, run)
    assert_short_run(run, caplog.text)


@pytest.mark.slow
def test_resume_without_checkpoint_and_empty_folder_are_clear_errors(
    folders, tmp_path, compose, caplog
):
    """An empty image folder through train.py's run in this process (``train``: the exit code
    its ``main`` exits with, 2, and the message it logs; that such a code is the process's:
    test_faults.py's test_train_py_exits_3_on_nan_naming_the_last_good_checkpoint); a resume of
    a folder without checkpoints refused by the run-directory guard train.py's Hydra callback
    runs before any work (``claim``, here in this process: the callback's refusals reach the
    terminal with exit code 2 in test_rundir.py's train.py runs)."""
    from sr.core.errors import RunDirError
    from sr.train.rundir import claim
    from tests.fake_run import load_script

    (tmp_path / "empty").mkdir()
    cfg = compose(
        f"data.hr_dir={tmp_path / 'empty'}",
        f"data.val_dir={folders / 'val'}",
        f"data.data_root={folders / 'root'}",
        "data.num_shards=2",
        "data.batch_size=8",
    )
    with caplog.at_level(logging.INFO):
        code, final = load_script("train", ".").train(cfg, tmp_path / "run")
    out = caplog.text
    assert (code, final) == (2, {}), out
    assert f"image folder {tmp_path / 'empty'} holds no .png" in out
    assert "parameters" not in out  # failed before any model was built

    nothing = tmp_path / "nothing"
    cfg = compose(f"data.hr_dir={folders / 'train'}", f"resume={nothing}", "train.steps=2")
    with pytest.raises(RunDirError, match=f"resume={nothing}: no checkpoint in {nothing}/"):
        claim(cfg, nothing)
    assert not nothing.exists()  # refused before the lock: nothing written


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_before_exiting(folders, tmp_path):
    run = tmp_path / "run"
    proc = train(folders, run, "train.steps=100000", "train.log_every=2", wait=False)
    lines = []
    deadline = time.time() + 240
    for line in proc.stdout:
        lines.append(line)
        if TIMING.search(line) or time.time() > deadline:
            break
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
    out = "".join(lines) + rest
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "SIGTERM received: saving a checkpoint" in out
    saved = sorted((run / "checkpoints").glob("ckpt-*.index"))
    assert saved, out
    step = int(saved[-1].name.split("-")[1].split(".")[0])
    assert 2 <= step < 100000


@pytest.mark.slow
def test_in_process_run_with_xla_l2_and_step_schedule(folders, tmp_path, compose, caplog):
    import tensorflow as tf

    from sr.config import build_source
    from sr.core.batch import Batch
    from sr.evaluation import evaluate_folder
    from sr.loading.checkpoints import make_checkpoint
    from sr.loading.models import build_model
    from sr.train.app import run
    from sr.train.loop import Trainer, gpu_available

    cfg = compose(
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        "data=generator",
        "data.batch_size=4",
        "train.steps=3",
        "train.log_every=1",
        "train.xla=true",
        "loss=l2",
        "train.lr_schedule=step",
        "train.lr_decay_steps=2",
        "train.precision=float16",
    )
    with caplog.at_level(logging.INFO):
        final = run(cfg, tmp_path / "run")
    assert final["step"] == 3 and final["interrupted"] is None
    if gpu_available():
        assert "training in float32" not in caplog.text
    else:
        assert "train.precision=float16: float16 is fast on a GPU only" in caplog.text
    lrs = [
        float(line.rsplit("lr ", 1)[1]) for line in caplog.text.splitlines() if "] step " in line
    ]
    assert lrs == [pytest.approx(1e-3), pytest.approx(5e-4), pytest.approx(5e-4)]

    # the validation figure is the protocol's score of the saved final weights
    model = build_model(cfg)
    make_checkpoint(model).restore(
        str(tmp_path / "run" / "checkpoints" / "ckpt-3")
    ).expect_partial()
    assert final["val/psnr"] == pytest.approx(evaluate_folder(model, folders / "val", 4)["psnr"])

    # the step is XLA-compiled and its loss is the L2 loss (mean squared error) of the batch
    trainer = Trainer(cfg, build_source(cfg), model, tmp_path / "other")
    assert trainer.replica_step._jit_compile  # tf.function(jit_compile=True): XLA
    rng = np.random.default_rng(0)
    lr = tf.constant(rng.random((4, 24, 24, 1), dtype=np.float32))
    hr = tf.constant(rng.random((4, 96, 96, 1), dtype=np.float32))
    want = float(tf.reduce_mean(tf.square(hr - model(lr, training=True))))
    assert float(trainer.train_step(Batch(lq=lr, gt=hr))) == pytest.approx(want, rel=1e-4)
    hlo = trainer.replica_step.experimental_get_compiler_ir(Batch(lq=lr, gt=hr))(stage="hlo")
    assert "HloModule" in hlo


@pytest.mark.slow
def test_resuming_a_finished_run_saves_and_validates_without_training(folders, tmp_path, compose):
    from sr.train.app import run

    common = [
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        f"data.data_root={folders / 'root'}",
        "data.batch_size=4",
        "train.steps=4",
        "train.log_every=3",
    ]
    first = run(compose(*common), tmp_path / "run")
    assert first["step"] == 4
    again = run(compose(*common, f"resume={tmp_path / 'run'}"), tmp_path / "run")
    # the same weights, validated again: the same figures, and no step trained
    assert again["step"] == 4 and "step_time_ms" not in again
    assert again["val/psnr"] == pytest.approx(first["val/psnr"], abs=1e-9)


@pytest.mark.slow
def test_the_default_command_trains_on_the_demo_photos(tmp_path):
    """`python train.py` as the README's first command runs it (default data, model and paths:
    the demo photos written into data/demo, data=tfrecord with its shards under
    data/tfrecords), shortened to a :data:`SHORT_RUN`: its output and Hydra's train.log hold
    the timing lines, checkpoints and TensorBoard records of :func:`assert_short_run`."""
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        *SHORT_RUN,
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    demo = ROOT / "data" / "demo"
    assert sorted(p.name for p in (demo / "val").glob("*.png")) == [
        "camera.png",
        "chelsea.png",
        "coffee.png",
    ]
    assert len(list((demo / "train").glob("*.png"))) == 15
    run = tmp_path / "run"
    assert_short_run(run, out)
    assert len(TIMING.findall((run / "train.log").read_text())) == 3
    final = re.search(r"final step 6: val PSNR ([\d.]+) dB vs bicubic ([\d.]+) dB", out)
    assert final, out
    from sr.evaluation import evaluate_folder

    bicubic = evaluate_folder(None, demo / "val", 4)["psnr_bicubic"]
    assert float(final.group(2)) == pytest.approx(bicubic, abs=0.006)


def test_profile_steps_record_a_trace_in_the_runs_tensorboard_folder(folders, tmp_path, compose):
    from sr.train.app import run

    cfg = compose(
        "data=generator",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data.batch_size=4",
        "train.steps=4",
        "train.profile_steps=[2,3]",
    )
    run(cfg, tmp_path / "run")
    traces = list((tmp_path / "run" / "tb" / "plugins" / "profile").rglob("*.xplane.pb"))
    assert len(traces) == 1 and traces[0].stat().st_size > 0


@pytest.mark.parametrize("value", ["[3,3]", "[0,2]", "[1]", "[1,2,3]"])
def test_bad_profile_steps_are_refused_naming_the_key(compose, value):
    from sr.config import ConfigError, validate_train

    with pytest.raises(ConfigError, match=r"train.profile_steps must be \[START, STOP\]"):
        validate_train(compose(f"train.profile_steps={value}"))


@pytest.mark.slow
def test_a_profile_range_outside_the_run_is_refused_or_warned_about(
    folders, tmp_path, compose, caplog
):
    from sr.config import ConfigError, validate_train
    from sr.train.app import run

    with pytest.raises(
        ConfigError, match=r"train.profile_steps=\[4, 9\] ends after train.steps=8"
    ):
        validate_train(compose("train.steps=8", "train.profile_steps=[4,9]"))
    base = [
        "data=generator",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data.batch_size=4",
    ]
    run(compose(*base, "train.steps=3"), tmp_path / "run")
    with caplog.at_level(logging.WARNING):  # a resume past the range's start: no trace
        run(
            compose(
                *base, "train.steps=5", "train.profile_steps=[2,4]", f"resume={tmp_path / 'run'}"
            ),
            tmp_path / "run",
        )
    assert "train.profile_steps=[2, 4]: this run starts at step 3" in caplog.text
    assert not (tmp_path / "run" / "tb" / "plugins" / "profile").exists()
