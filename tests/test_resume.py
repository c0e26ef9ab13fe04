"""Exact resume: N steps then ``resume=`` to 2N gives the weights, optimizer state and logged
losses of one 2N-step run, bit for bit, in both data modes, after a clean stop and a SIGTERM;
and a run SIGKILLed at a random moment and again during a checkpoint write completes exactly,
with every remaining checkpoint loadable."""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from sr.core.images import scan_folder
from sr.data.generator import PatchPool
from tests.conftest import ROOT, started, write_photos

LOSS = re.compile(r"step (\d+)/\d+  loss ([\d.]+)")
STATE = ("model/", "optimizer/", "step/")


def final_state(run_dir: Path) -> dict[str, np.ndarray]:
    """Every model, optimizer and step tensor of the run's latest checkpoint."""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(run_dir / "checkpoints")))
    keys = [k for k in reader.get_variable_to_shape_map() if k.startswith(STATE)]
    return {k: reader.get_tensor(k) for k in keys}


def assert_same_state(a: Path, b: Path) -> None:
    sa, sb = final_state(a), final_state(b)
    assert sa.keys() == sb.keys() and len(sa) > 10
    for k in sa:
        assert np.array_equal(sa[k], sb[k]), f"{k} differs between {a} and {b}"


def tb_losses(run_dir: Path) -> dict[int, float]:
    """``train/loss`` per step from the run's TensorBoard events (float32, exact); a step written
    twice (a run killed after it and resumed before it) must hold the same value both times."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    out: dict[int, float] = {}
    for e in acc.Tensors("train/loss"):
        value = float(tf.make_ndarray(e.tensor_proto))
        assert out.setdefault(e.step, value) == value, f"step {e.step} logged twice, differently"
    return out


# ------------------------------------------------------------------------------------------------
# The generator's pool can start at any batch
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "pool_size, memory_mb, ppi",
    [(100, 1024.0, 4), (3, 1024.0, 2), (100, 0.05, 3)],
    ids=["whole-folder", "pool-of-3", "memory-bound"],
)
def test_pool_started_at_batch_k_is_the_tail_of_the_uninterrupted_stream(
    tmp_path, pool_size, memory_mb, ppi
):
    write_photos(tmp_path / "hr", size=96, per_photo=2)
    images = scan_folder(tmp_path / "hr", 40)
    pool = PatchPool(images, 40, 4, ppi, pool_size, memory_mb, seed=5)
    stream = pool()
    full = [next(stream)["hr"] for _ in range(30)]
    assert pool.decodes > (len(images.files) if pool_size < 100 else 0)  # images were replaced
    for start in (1, 9, 22):
        tail = pool(start)
        for k in range(start, 30):
            batch = next(tail)
            assert np.array_equal(batch["hr"], full[k]), (start, k)
    # a different seed gives another stream
    other = next(PatchPool(images, 40, 4, ppi, pool_size, memory_mb, seed=6)())["hr"]
    assert not np.array_equal(other, full[0])


def test_pool_names_an_image_that_changed_after_the_scan(tmp_path):
    from PIL import Image

    from sr.core.images import ImageFolderError

    write_photos(tmp_path / "hr", size=96)
    images = scan_folder(tmp_path / "hr", 40)
    Image.new("L", (80, 80)).save(images.files[0])  # replaced by a smaller image mid-run
    with pytest.raises(ImageFolderError, match=re.escape(images.files[0].name) + ".*changed"):
        next(PatchPool(images, 40, 4, 4, 100, 1024.0, seed=0)())


# ------------------------------------------------------------------------------------------------
# N + N = 2N, in process, both modes
# ------------------------------------------------------------------------------------------------
def common(folders, tmp_path, mode: str) -> list[str]:
    out = [
        f"data={mode}",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data.batch_size=4",
        "data.deterministic=true",
        "train.lr_schedule=step",  # the schedule must not depend on train.steps (see README)
        "train.log_every=1",
        "train.ckpt_every=100",
        "model.features=[16,8]",
    ]
    if mode == "tfrecord":
        out += [f"data.data_root={tmp_path / 'root'}", "data.num_shards=2"]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, deterministic",
    [("tfrecord", "true"), ("generator", "true"), ("generator", "false")],
)
def test_n_plus_n_steps_equal_2n_steps_bit_for_bit(
    folders, tmp_path, compose, mode, deterministic, caplog
):
    from sr.train.app import run
    from tests.conftest import stopped_at

    # generator mode is exact even with data.deterministic=false: its pool is serial and the
    # pairs map keeps batch order. The 3-step run: a copy of the 6-step one as if killed after
    # its ckpt-3 (its TensorBoard file kept: tb_losses fails on a step that the resumed run
    # logs again with another value)
    base = [*common(folders, tmp_path, mode), f"data.deterministic={deterministic}"]
    run(compose(*base, "train.steps=6", "train.ckpt_every=3"), tmp_path / "one")
    two = stopped_at(tmp_path / "one", 3, tmp_path / "two")
    with caplog.at_level(logging.INFO):
        final = run(compose(*base, "train.steps=6", f"resume={two}"), two)
    assert final["step"] == 6
    assert "continuing the checkpoint's batch stream at batch 3" in caplog.text
    assert_same_state(tmp_path / "one", tmp_path / "two")
    one, two = tb_losses(tmp_path / "one"), tb_losses(tmp_path / "two")
    assert sorted(one) == sorted(two) == [1, 2, 3, 4, 5, 6]
    assert one == two


@pytest.mark.slow
def test_unseeded_run_resumes_its_own_stream(folders, tmp_path, compose):
    import shutil

    from sr.train.app import run

    base = [*common(folders, tmp_path, "generator"), "seed=null"]
    run(compose(*base, "train.steps=2"), tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    for name in "ab":  # each resume draws no new seed: it adopts the one in the checkpoint
        run(compose(*base, "train.steps=4", f"resume={tmp_path / name}"), tmp_path / name)
    assert_same_state(tmp_path / "a", tmp_path / "b")
    a, b = tb_losses(tmp_path / "a"), tb_losses(tmp_path / "b")
    assert sorted(a) == [1, 2, 3, 4] and a == b


@pytest.mark.slow
def test_a_changed_stream_is_named_and_training_goes_on(folders, tmp_path, compose, caplog):
    from sr.train.app import run

    base = common(folders, tmp_path, "generator")
    run(compose(*base, "train.steps=2"), tmp_path / "a")
    with caplog.at_level(logging.WARNING):
        final = run(
            compose(*base, "train.steps=3", "data.batch_size=2", f"resume={tmp_path / 'a'}"),
            tmp_path / "a",
        )
    assert final["step"] == 3
    assert "differs from the checkpoint's (batch_size: 4 -> 2)" in caplog.text
    assert "not exact" in caplog.text


# ------------------------------------------------------------------------------------------------
# Preemption in real processes: SIGTERM, SIGKILL after a checkpoint, SIGKILL anywhere
# ------------------------------------------------------------------------------------------------
def command(folders, root: Path, mode: str, run_dir: Path, *extra: str) -> list[str]:
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        f"data={mode}",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data.batch_size=4",
        "data.deterministic=true",
        "train.deterministic_ops=true",
        "train.log_every=1",
        "model.features=[16,8]",
        *extra,
    ]
    if mode == "tfrecord":
        cmd += [f"data.data_root={root}", "data.num_shards=2"]
    return cmd + [f"hydra.run.dir={run_dir}"]


ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")


def run_here(cmd: list[str]) -> str:
    """The train.py command ``cmd`` run to its end in this process (``sr.train.app.run`` of its
    overrides, into its ``hydra.run.dir``): the log lines it prints. For the uninterrupted
    runs that the stopped processes are compared with: a process adds nothing to them."""
    import io

    from sr.config import compose
    from sr.train.app import run

    overrides = [a for a in cmd[2:] if not a.startswith("hydra.")]
    (run_dir,) = [a.split("=", 1)[1] for a in cmd if a.startswith("hydra.run.dir=")]
    logger, text = logging.getLogger("sr"), io.StringIO()
    handler, level = logging.StreamHandler(text), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        run(compose(*overrides), Path(run_dir))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return text.getvalue()


def losses(out: str) -> dict[int, str]:
    return {int(s): loss for s, loss in LOSS.findall(out)}


def loadable_checkpoints(run_dir: Path) -> list[int]:
    """The steps of the checkpoints the manager lists, each read in full (every tensor but the
    tf.data iterator's, a variant that only a restore reads: the last ``resume=`` does)."""
    state = tf.train.get_checkpoint_state(str(run_dir / "checkpoints"))
    steps = []
    for path in state.all_model_checkpoint_paths if state else []:
        if not Path(f"{path}.index").exists():
            # tf.train.CheckpointManager lists a new checkpoint, deletes the oldest beyond
            # max_to_keep, then lists again: a kill between the two leaves a deleted old one
            # listed (never the latest, which resume= reads)
            assert path != state.model_checkpoint_path, path
            continue
        reader = tf.train.load_checkpoint(path)
        for key, dtype in reader.get_variable_to_dtype_map().items():
            if dtype != tf.variant:
                reader.get_tensor(key)
        steps.append(int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")))
    return steps


@pytest.mark.slow
def test_sigterm_sigkill_at_random_and_mid_checkpoint_then_resume_completes_exactly(
    folders, tmp_path
):
    """Preemption and fault injection in ``train.py`` processes on TFRecord shards, one run
    checkpointing every step: SIGTERM after step 2 makes the loop save where it is and exit 143,
    its losses those of the uninterrupted run; resumed, it is SIGKILLed at a random moment after
    its first checkpoint (the seed is printed: rerun with ``SR_FAULT_SEED``), then, resumed
    again, while a checkpoint's files are written but not yet recorded; after every stop each
    listed checkpoint loads in full, and the last ``resume=`` (in this process: the kills are
    the processes' part) ends on the weights and logged losses of one uninterrupted run. (The
    generator's stream resumed: :func:`test_n_plus_n_steps_equal_2n_steps_bit_for_bit`.)"""
    seed = int(os.environ.get("SR_FAULT_SEED", random.randrange(10**6)))
    print(f"SR_FAULT_SEED={seed}")
    rng = random.Random(seed)
    root, run_dir = tmp_path / "root", tmp_path / "run"
    steps = ("train.steps=20", "train.ckpt_every=1", "train.max_to_keep=2")
    # the uninterrupted run saves its last step only: saving, which reads the state, changes
    # nothing of it (and 19 saves cost it seconds)
    ref_steps = ("train.steps=20", "train.ckpt_every=20", "train.max_to_keep=2")

    # SIGTERM once step 2 is logged
    cmd = command(folders, root, "tfrecord", run_dir, *steps)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV
    )
    lines, deadline = [], time.time() + 300
    for line in proc.stdout:
        lines.append(line)
        if re.search(r"step 2/", line) or time.time() > deadline:
            break
    proc.send_signal(signal.SIGTERM)
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    term, stopped = losses(out), re.search(r"stopped by SIGTERM at step (\d+)", out)
    if stopped:  # (a fast machine may have finished all 20 steps)
        assert "SIGTERM received: saving a checkpoint" in out and proc.returncode == 143, out
        assert loadable_checkpoints(run_dir)[-1] == int(stopped.group(1)) < 20, out
    else:
        assert proc.returncode == 0 and max(term) == 20, out

    # resumed, SIGKILLed at a random moment after its first checkpoint
    saved = re.compile(r"checkpoint .*ckpt-\d+")
    cmd = command(folders, root, "tfrecord", run_dir, *steps, f"resume={run_dir}")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV
    )
    out = []
    for line in proc.stdout:  # its first checkpoint, then a random moment
        out.append(line)
        if saved.search(line):
            break
    time.sleep(rng.uniform(0.0, 1.0))
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode in (-signal.SIGKILL, 0), "".join(out)
    assert loadable_checkpoints(run_dir), "".join(out)
    # killed between writing a checkpoint's files and recording it
    marker = tmp_path / "in-save"
    cmd[1] = str(ROOT / "tests" / "pausing_train.py")
    cmd.insert(2, str(marker))
    before = loadable_checkpoints(run_dir)
    proc, log = started(cmd, ENV)  # it pauses at the marker: the reference runs meanwhile
    reference = losses(run_here(command(folders, root, "tfrecord", tmp_path / "ref", *ref_steps)))
    deadline = time.time() + 300
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=60)
    log.seek(0)
    out = log.read()
    log.close()
    if before[-1] < 20:  # a run already at its last step saves nothing new
        assert marker.exists(), out
    after = loadable_checkpoints(run_dir)
    assert after[-1] == before[-1]  # the half-recorded checkpoint is not listed
    run_here(command(folders, root, "tfrecord", run_dir, *steps, f"resume={run_dir}"))
    assert loadable_checkpoints(run_dir)[-1] == 20
    assert_same_state(tmp_path / "ref", run_dir)
    assert tb_losses(run_dir) == tb_losses(tmp_path / "ref")
    # the SIGTERMed run's logged losses are the uninterrupted run's
    assert sorted(reference) == list(range(1, 21)) and term
    assert all(reference[s] == loss for s, loss in term.items()), (term, reference)
