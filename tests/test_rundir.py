"""sr.train.rundir: one owner per run directory, default directories that cannot collide, a
resume that is refused when it cannot restore the run, and the run's first config kept."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import hydra
import pytest
import tensorflow as tf
from hydra.core.utils import setup_globals
from omegaconf import OmegaConf

from sr.train.checkpoint import RunDirError, load_model_from_run, load_run_config
from sr.train.rundir import LOCK_FILE, RunDirBusy, RunDirLock, claim
from tests.conftest import ROOT

TINY = ("data=generator", "data.batch_size=4", "train.steps=2", "train.log_every=1")


def train(folders, *overrides, run_dir=None):
    """``python train.py`` on the tiny folders; returns (exit code, stdout + stderr)."""
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        *TINY,
        *overrides,
    ]
    if run_dir is not None:
        cmd.append(f"hydra.run.dir={run_dir}")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def trained(folders, tmp_path_factory) -> Path:
    """A finished 2-step ESPCN run."""
    run = tmp_path_factory.mktemp("trained") / "run"
    code, out = train(folders, run_dir=run)
    assert code == 0, out
    return run


def test_a_held_directory_is_refused_naming_the_holder_and_left_untouched(folders, tmp_path):
    run = tmp_path / "run"
    with RunDirLock(run):
        before = snapshot(run)
        code, out = train(folders, run_dir=run)
        assert code == 2, out
        holder = f"pid {os.getpid()} on host {socket.gethostname()} since "
        assert f"run directory {run} is in use by another run: {holder}" in out
        assert snapshot(run) == before == {LOCK_FILE: (run / LOCK_FILE).read_bytes()}
        with pytest.raises(RunDirBusy, match=f"in use by another run: {holder}"):
            RunDirLock(run).acquire()  # another open of the file: refused in-process too
    assert RunDirLock(run).holder() is None  # released on leaving the context


def test_a_lock_file_left_by_a_killed_process_does_not_block(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    hold_and_die = (
        "import fcntl, os, signal, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        'os.write(fd, b\'{"pid": %d, "host": "h", "since": "t"}\' % os.getpid())\n'
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", hold_and_die, str(run / LOCK_FILE)])
    assert proc.returncode == -9 and '"host": "h"' in (run / LOCK_FILE).read_text()
    lock = RunDirLock(run)
    assert lock.holder() is None
    with lock:
        assert json.loads((run / LOCK_FILE).read_text())["pid"] == os.getpid()


def test_a_new_run_in_a_directory_holding_checkpoints_is_refused(tmp_path, compose):
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("seed: 0\n")
    claim(compose("data=generator"), run).release()  # failed before a checkpoint: reusable
    step = tf.Variable(1)
    tf.train.CheckpointManager(tf.train.Checkpoint(step=step), run / "checkpoints", 1).save()
    lock_before = (run / LOCK_FILE).read_bytes()
    with pytest.raises(RunDirError, match=f"hydra.run.dir={run} already holds a run with"):
        claim(compose("data=generator"), run)
    assert (run / LOCK_FILE).read_bytes() == lock_before  # refused before taking the lock


def test_default_run_dirs_composed_in_the_same_second_differ():
    setup_globals()  # Hydra's ${now:} resolver
    with hydra.initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        first, second = (hydra.compose("config", return_hydra_config=True) for _ in range(2))
        resumed = hydra.compose("config", ["resume=/runs/a"], return_hydra_config=True)
    dirs = [cfg.hydra.run.dir for cfg in (first, second)]
    assert dirs[0] != dirs[1]
    for run_dir in dirs:
        assert re.fullmatch(r"outputs/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d-\d{6}", run_dir), run_dir
    assert first.hydra.output_subdir == ".hydra"
    assert resumed.hydra.run.dir == "/runs/a"
    subdir = resumed.hydra.output_subdir
    assert re.fullmatch(r"\.hydra/resume-\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d-\d{6}", subdir), subdir
    assert OmegaConf.select(first, "hydra.callbacks.run_dir._target_") == (
        "sr.train.rundir.RunDirCallback"
    )


@pytest.mark.slow
def test_a_resume_with_another_model_is_refused_and_the_run_still_loads(folders, trained):
    config = trained / ".hydra" / "config.yaml"
    before = snapshot(trained)
    code, out = train(folders, f"resume={trained}", "model=edsr_lite")
    assert code == 2, out
    assert f"resume={trained}: this config cannot restore the run's checkpoint" in out
    assert "model._target_: run 'sr.models.build_espcn', now 'sr.models.build_edsr'" in out
    assert "model.features" in out and "model.blocks" in out
    assert "parameters" not in out  # refused before any model was built
    assert snapshot(trained) == before  # nothing written: config, logs, lock all unchanged
    assert config.read_bytes() == before[".hydra/config.yaml"]
    model, cfg, step = load_model_from_run(trained)  # what scripts/evaluate.py loads
    assert step == 2 and cfg.model._target_ == "sr.models.build_espcn"


@pytest.mark.slow
def test_a_resume_keeps_the_first_config_and_writes_its_own_beside_it(folders, trained):
    original = (trained / ".hydra" / "config.yaml").read_bytes()
    code, out = train(folders, f"resume={trained}", "train.steps=3")
    assert code == 0, out
    assert f"resumed from {trained / 'checkpoints' / 'ckpt-2'} at step 2" in out
    assert (trained / ".hydra" / "config.yaml").read_bytes() == original
    assert load_run_config(trained).resume is None
    (resume_dir,) = (trained / ".hydra").glob("resume-*")
    assert load_run_config(trained).train.steps == 2
    assert OmegaConf.load(resume_dir / "config.yaml").train.steps == 3
    assert f"resume={trained}" in OmegaConf.load(resume_dir / "overrides.yaml")
    assert load_model_from_run(trained)[2] == 3
