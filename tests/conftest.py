"""Shared fixtures: tiny real-photo folders in tmp_path and the real Hydra config."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import skimage.data  # noqa: E402
from PIL import Image  # noqa: E402

import sr.config  # noqa: E402

ROOT = sr.config.PROJECT_ROOT
SHARED = ROOT.parent / "shared" / "datasets"
PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "immunohistochemistry", "camera", "moon")


def photo(name: str) -> np.ndarray:
    return np.asarray(getattr(skimage.data, name)(), dtype=np.uint8)


def write_photos(folder: Path, size: int = 160, names=PHOTOS, per_photo: int = 1) -> list[Path]:
    """Write ``per_photo`` crops (``size`` x ``size + 8``) of each real photo as PNG; returns the
    paths in name order."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        im = photo(name)
        for k in range(per_photo):
            y = (k * 37) % max(1, im.shape[0] - size)
            x = (k * 53) % max(1, im.shape[1] - size - 8)
            path = folder / f"{name}_{k:02d}.png"
            Image.fromarray(im[y : y + size, x : x + size + 8]).save(path)
            paths.append(path)
    return sorted(paths)


def pytest_xdist_auto_num_workers(config) -> int:
    """Workers of ``-n auto`` (pyproject's addopts): one per core this process may use, at most
    4, since each imports TensorFlow (about 1 GB) and runs its ops on every core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, cores or 1))


@pytest.fixture
def photo_dir(tmp_path) -> Path:
    """Seven real photographs (RGB and gray), 160x168 crops."""
    write_photos(tmp_path / "hr")
    return tmp_path / "hr"


@pytest.fixture(scope="session")
def folders(tmp_path_factory) -> Path:
    """A tiny training run's data: ``train/`` (4 real photos, 150x158) and ``val/`` (2, 64x72)."""
    root = tmp_path_factory.mktemp("data")
    write_photos(root / "train", size=150, names=("astronaut", "coffee", "rocket", "moon"))
    write_photos(root / "val", size=64, names=("chelsea", "camera"))
    return root


@pytest.fixture(autouse=True)
def op_determinism_off_after():
    """``train.deterministic_ops=true`` in a test's own process turns TensorFlow's op
    determinism on for the whole process (``sr.train.app.run``), and random ops without a seed
    then fail: off again after every test, so that no test depends on which ran before it on
    its worker."""
    yield
    if "tensorflow" in sys.modules:
        # TensorFlow has no public way back (tf.config.experimental.enable_op_determinism only):
        # its own config module's switch; if TensorFlow renames it, every test fails here
        from tensorflow.python.framework import config

        if config.is_op_determinism_enabled():
            config.disable_op_determinism()


@pytest.fixture
def compose():
    """``compose(*overrides)`` -> the project's real composed config (``sr.config.compose``)."""
    return sr.config.compose


def shared_folder(name: str) -> Path:
    """``../shared/datasets/<name>`` beside the repository (the golden-figure test sets).

    Skips the test when the folder is absent locally; fails it in CI (``CI`` set), where a skip
    would let the golden tests pass without running.
    """
    path = SHARED / name
    if not path.is_dir():
        why = f"{path} is absent (the ../shared datasets are not checked out beside the repo)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must provide them to run the golden tests", pytrace=False)
        pytest.skip(why)
    return path


def started(cmd: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, IO[str]]:
    """``cmd`` running in the background, for independent runs started together (on two cores
    their TensorFlow start-ups overlap); its stdout and stderr go to a file, so that a full pipe
    never stalls it while nobody reads. End it with :func:`finished`."""
    log = tempfile.TemporaryFile("w+")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env), log


def finished(run: tuple[subprocess.Popen, IO[str]], timeout: float = 300) -> str:
    """The output of a run from :func:`started` once it has ended, which must be with exit code
    0; a run still going after ``timeout`` seconds is killed and fails the test."""
    proc, log = run
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.seek(0)
    out = log.read()
    log.close()
    assert proc.returncode == 0, out
    return out


def stopped_at(run_dir: Path, step: int, dest: Path) -> Path:
    """``dest``: a copy of the finished run ``run_dir`` as if it had been killed just after its
    checkpoint of ``step`` (what ``resume=`` then reads): the checkpoints after ``step``
    deleted, the rotation's record (``tf.compat.v1.train.update_checkpoint_state``) naming
    ``ckpt-<step>`` as the newest. One run then stands for both the uninterrupted run and the
    interrupted one, where a test compares checkpoints (logs and TensorBoard files are copied
    as they are). Not for a run with a best checkpoint (``checkpoints/best``: it could be from
    after ``step``)."""
    import shutil

    import tensorflow as tf

    from sr.loading.checkpoints import checkpoint_step

    shutil.copytree(run_dir, dest, ignore=shutil.ignore_patterns(".lock"))
    folder = dest / "checkpoints"
    assert not (folder / "best").exists(), f"{run_dir} has a best checkpoint"
    paths = tf.train.get_checkpoint_state(str(folder)).all_model_checkpoint_paths
    keep = [Path(p).name for p in paths if checkpoint_step(p) <= step]
    assert keep and checkpoint_step(keep[-1]) == step, (step, list(paths))
    for path in paths:
        if checkpoint_step(path) > step:
            for file in folder.glob(Path(path).name + ".*"):
                file.unlink()
    tf.compat.v1.train.update_checkpoint_state(
        str(folder), keep[-1], all_model_checkpoint_paths=keep
    )
    return dest
