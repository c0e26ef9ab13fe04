"""Exact resume of runs on Real-ESRGAN's degradation (``degradation=realesrgan``), GAN or not.

Its stream identity holds the degradation's parameters, tuples in the config's dataclass and
lists once read back from the checkpoint's JSON; compared as they were, they never matched and
every resume started a new batch stream (issue 37). The identities are now compared in one
serialised form (``sr.train.data_state.stream_changes``). Checked on the identities, and in a
``train.py`` process of a GAN SIGKILLed mid-run and resumed: every variable of the model, its
EMA, both optimizers and the discriminator equals the uninterrupted run's (runs that are not a
GAN, in process: ``tests/test_pair_pool.py``)."""

from __future__ import annotations

import signal
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from sr.config import build_source
from sr.train.data_state import identity_json, make_data_state, read_data_state, stream_changes
from tests.conftest import ROOT, started, write_photos
from tests.test_resume import ENV, run_here

# what a resumed run's checkpoint holds differently by design: the object graph, the count of
# saves and the time spent
NOT_STATE = ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/", "elapsed/")


def checkpoint_state(prefix) -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint ``prefix`` but the tf.data iterator's (a variant) and
    those of :data:`NOT_STATE`."""
    reader = tf.train.load_checkpoint(str(prefix))
    kinds = reader.get_variable_to_dtype_map()
    return {
        k: reader.get_tensor(k)
        for k, kind in kinds.items()
        if kind != tf.variant and not k.startswith(NOT_STATE)
    }


# where each part's variables are in a checkpoint: a variable reachable twice is saved once,
# under one path (the model's weights under the optimizer's list of the variables it trains)
PARTS = {
    "model": ("model/", "optimizer/_trainable_variables/"),
    "EMA": ("ema/",),
    "optimizer": ("optimizer/_variables/",),
    "discriminator": ("discriminator/",),
    "discriminator's optimizer": ("d_optimizer/_variables/",),
}


def same_tensor(a, b) -> bool:
    """Equal bit for bit (NaN equal to NaN: the guard's memory holds NaN before any mean)."""
    a, b = np.asarray(a), np.asarray(b)
    return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def assert_same_checkpoints(a, b, parts: tuple[str, ...]) -> None:
    """The checkpoints ``a`` and ``b`` hold the same variables, bit for bit, and among them
    some of each of ``parts`` (keys of :data:`PARTS`)."""
    sa, sb = checkpoint_state(a), checkpoint_state(b)
    assert sa.keys() == sb.keys()
    for part in parts:
        assert any(k.startswith(PARTS[part]) for k in sa), f"no {part} variable in {a}"
    differ = [k for k in sa if not same_tensor(sa[k], sb[k])]
    assert not differ, f"{len(differ)} of {len(sa)} variables differ, e.g. {differ[:5]}"


def test_a_realesrgan_identity_read_back_from_a_checkpoint_is_the_same(folders, tmp_path, compose):
    """The identity as the config gives it (tuples) and as the checkpoint gives it back
    (lists) are the same stream; a changed parameter is named with both values."""
    cfg = compose(
        "data=generator", f"data.hr_dir={folders / 'train'}", "data.val_dir=null",
        "degradation=realesrgan", "data.channels=rgb",
    )  # fmt: skip
    now = build_source(cfg).stream_identity()
    assert isinstance(now["degradation"]["kernel_sizes"], tuple)  # the dataclass's
    state = make_data_state(7, now)
    tf.train.Checkpoint(data=state).write(str(tmp_path / "ckpt"))
    seed, saved = read_data_state(str(tmp_path / "ckpt"))
    assert seed == 7 and isinstance(saved["degradation"]["kernel_sizes"], list)
    assert saved != now  # what the old comparison saw
    assert stream_changes(saved, now) == {}
    assert identity_json(saved) == identity_json(now)

    changed = {**now, "degradation": {**now["degradation"], "blur_sigma": (0.2, 2.0)}}
    diff = stream_changes(saved, changed)
    assert list(diff) == ["degradation"]
    assert diff["degradation"][0]["blur_sigma"] == [0.2, 3.0]
    assert stream_changes({"batch_size": 4}, {"batch_size": 4, "lr_from": "rgb"}) == {
        "lr_from": (None, "rgb")
    }


@pytest.fixture(scope="module")
def rgb_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("realesrgan")
    write_photos(root / "train", size=96, names=("astronaut", "coffee", "rocket"))
    return root


def tiny_realesrgan(data, shards) -> list[str]:
    """A tiny RGB run on Real-ESRGAN's pairs from TFRecord shards (whose iterator state is
    checkpointed: a new stream there is a different batch order, not the same one rebuilt)."""
    return [
        "data=tfrecord", f"data.hr_dir={data / 'train'}", "data.val_dir=null",
        f"data.data_root={shards}", "data.num_shards=2", "data.deterministic=true",
        "degradation=realesrgan", "data.channels=rgb", "data.batch_size=2",
        "data.patch_size=32", "model.features=[8,4]", "train.log_every=1",
        "train.lr_schedule=constant", "train.ema=0.9",
    ]  # fmt: skip


GAN = ("loss=realesrgan", "discriminator=unet_sn", "discriminator.features=4",
       "~loss.terms.perceptual")  # fmt: skip


# A run with the degradation in the input pipeline (the default), stopped and resumed in process:
# tests/test_pair_pool.py::test_a_pooled_run_resumed_in_process_is_bit_identical[tfrecord-input]
# (Real-ESRGAN's pairs from TFRecord shards, every variable); the GAN's parts: the test below.


@pytest.mark.slow
def test_a_realesrgan_gan_run_sigkilled_mid_run_resumes_exactly(rgb_data, tmp_path):
    """The way it failed: ``train.py`` SIGKILLed just after its checkpoint of step 3 is
    recorded (``tests/pausing_train.py --after``), then ``resume=`` to step 6 (in this
    process: the kill is the process's part); its last checkpoint equals the uninterrupted
    run's in every variable of every part. A GAN run with the degradation made in the training
    step (``degradation.device=accelerator``); the degradation in the input pipeline (the
    default) resumes exactly in process: ``tests/test_pair_pool.py``'s
    ``test_a_pooled_run_resumed_in_process_is_bit_identical``."""
    args = (*tiny_realesrgan(rgb_data, tmp_path / "shards"), *GAN,
            "degradation.device=accelerator", "train.steps=6", "train.ckpt_every=3",
            "train.deterministic_ops=true")  # fmt: skip

    def command(run_dir, *extra):
        return [sys.executable, str(ROOT / "train.py"), *args, *extra, f"hydra.run.dir={run_dir}"]

    kill, marker = tmp_path / "kill", tmp_path / "paused"
    cmd = command(kill)
    cmd[1:2] = [str(ROOT / "tests" / "pausing_train.py"), "--after", str(marker)]
    # the run to be killed starts first (its output to a file: nobody reads it meanwhile), so
    # that its start-up overlaps the reference's, run in this process (it adds nothing)
    proc, log = started(cmd, ENV)
    reference = run_here(command(tmp_path / "ref"))
    deadline = time.time() + 600
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=60)
    log.seek(0)
    out = log.read()
    log.close()
    assert marker.exists() and proc.returncode == -signal.SIGKILL, out
    out = run_here(command(kill, f"resume={kill}"))
    assert f"resumed from {kill / 'checkpoints' / 'ckpt-3'} at step 3" in out, out
    assert "continuing the checkpoint's batch stream at batch 3" in out, out
    assert "not exact" not in out and "not exact" not in reference
    assert_same_checkpoints(
        tmp_path / "ref" / "checkpoints" / "ckpt-6", kill / "checkpoints" / "ckpt-6", tuple(PARTS)
    )
