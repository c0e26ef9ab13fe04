"""Real-ESRGAN's training-pair pool (``degradation.pool_size``, ``sr.data.pair_pool``): the
official ``_dequeue_and_enqueue`` step for step against a NumPy model of it, exact storage, the
rebuild of a restarted stream, the pool on the accelerator saved and restored, and the pooled
streams of both devices and of a resumed run against the uninterrupted one."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf

from sr.config import ConfigError, build_source, compose
from sr.data.pair_pool import (
    DevicePool,
    empty_pool,
    fill_batches,
    pool_key,
    pool_order,
    pool_step,
    rebuild_start,
)


def official_queue(batches, size, orders):
    """A NumPy model of ``_dequeue_and_enqueue`` (``realesrgan/models/realesrnet_model.py``),
    with the last filling batch allowed to fill only the slots left: the batches trained on."""
    queue, filled, out = np.zeros((size, *batches[0].shape[1:])), 0, []
    for t, batch in enumerate(batches):
        b = len(batch)
        if filled < size:  # only enqueue: the batch is trained on as it is
            k = min(b, size - filled)
            queue[filled : filled + k] = batch[:k]
            filled += k
            out.append(batch)
        else:  # shuffle, take the first b out, put the batch in their place
            queue = queue[orders[t]]
            out.append(queue[:b].copy())
            queue[:b] = batch
    return out


def labelled(t: int, b: int) -> np.ndarray:
    """Batch t of b pairs whose pixels name them: pair j of batch t holds (t * b + j) / 255."""
    return np.broadcast_to(((t * b + np.arange(b)) / 255.0)[:, None, None, None], (b, 2, 2, 1))


def key_of(t: int) -> tf.Tensor:
    return pool_key(tf.constant([7, t], tf.int64))


@pytest.mark.parametrize("size, b", [(12, 4), (10, 4), (4, 4)], ids=["multiple", "not", "one"])
def test_the_pool_is_the_official_queue_step_for_step(size, b):
    batches = [labelled(t, b).astype(np.float32) for t in range(12)]
    orders = [pool_order(key_of(t), size).numpy() for t in range(12)]
    want = official_queue(batches, size, orders)
    state = empty_pool(size, [[2, 2, 1], [2, 2, 1]], (True, False))
    for t, batch in enumerate(batches):
        pair = (tf.constant(batch), tf.constant(batch * 0.5))  # on the grid; float32 kept as is
        state, out = pool_step(state, pair, key_of(t), (True, False))
        np.testing.assert_array_equal(out[0].numpy(), want[t].astype(np.float32))
        np.testing.assert_array_equal(out[1].numpy(), (want[t] * 0.5).astype(np.float32))
    assert int(state[-1]) == size and fill_batches(size, b) == -(-size // b)
    assert state[0].dtype == tf.uint8 and state[1].dtype == tf.float32
    sources = {
        int(round(v * 255)) // b for o in want[fill_batches(size, b) :] for v in o[:, 0, 0, 0]
    }
    assert len(sources) > 2  # the batches after the fill mix pairs of several batches


def test_the_shuffle_is_a_permutation_of_the_key_alone():
    a, b = pool_order(key_of(3), 180).numpy(), pool_order(key_of(3), 180).numpy()
    assert np.array_equal(a, b) and sorted(a) == list(range(180))
    assert not np.array_equal(a, pool_order(key_of(4), 180).numpy())


@pytest.mark.parametrize("size, b, start", [(12, 4, 2), (12, 4, 3), (12, 4, 20), (10, 3, 17)])
def test_a_rebuilt_pool_gives_the_uninterrupted_stream(size, b, start):
    """Replaying from :func:`rebuild_start` with a full pool of zeros gives, from ``start`` on,
    the batches of the uninterrupted stream."""
    total = start + 6
    batches = [tf.constant(labelled(t, b), tf.float32) for t in range(total)]
    grid = (True,)

    def run(first, full):
        state = empty_pool(size, [[2, 2, 1]], grid)
        if full:
            state = (*state[:-1], tf.constant(size, tf.int32))
        outs = []
        for t in range(first, total):
            state, out = pool_step(state, (batches[t],), key_of(t), grid)
            outs.append(out[0].numpy())
        return outs[start - first :]

    first = rebuild_start(size, b, start, lambda t: tf.constant([7, t], tf.int64))
    assert first <= start and (first == 0 or first >= fill_batches(size, b))
    for got, want in zip(run(first, first > 0), run(0, False)):
        np.testing.assert_array_equal(got, want)


def test_the_device_pool_is_saved_and_restored(tmp_path):
    """:class:`DevicePool` through a checkpoint: the restored pool gives the batches the saved
    one would have; emptied, it fills again (the batch as it is)."""
    pool = DevicePool(6, [[2, 2, 1]], (True,))
    batches = [tf.constant(labelled(t, 2), tf.float32) for t in range(8)]
    for t in range(5):
        pool.apply((batches[t],), tf.constant([7, t], tf.int64))
    tf.train.Checkpoint(pool=pool.state).write(str(tmp_path / "ckpt"))
    want = [pool.apply((batches[t],), tf.constant([7, t], tf.int64))[0].numpy() for t in (5, 6, 7)]
    other = DevicePool(6, [[2, 2, 1]], (True,))
    tf.train.Checkpoint(pool=other.state).read(str(tmp_path / "ckpt")).assert_consumed()
    for t, w in zip((5, 6, 7), want):
        np.testing.assert_array_equal(
            other.apply((batches[t],), tf.constant([7, t], tf.int64))[0], w
        )
    other.empty()
    np.testing.assert_array_equal(other.apply((batches[0],), tf.constant([7, 0], tf.int64))[0],
                                  batches[0])  # fmt: skip


# ------------------------------------------------------------------------------------------------
# A source's pool
# ------------------------------------------------------------------------------------------------
def rgb_pool(folders, *extra) -> list[str]:
    return [
        "data=generator", f"data.hr_dir={folders / 'train'}", "data.val_dir=null",
        "degradation=realesrgan", "data.channels=rgb", "data.patch_size=32",
        "data.batch_size=2", "degradation.pool_size=4", "degradation.jpeg=libjpeg", *extra,
    ]  # fmt: skip


def test_a_pool_smaller_than_a_batch_is_refused_and_the_pool_is_in_the_identity(folders):
    with pytest.raises(ConfigError, match=r"pool_size=3 holds .* \(data.batch_size=4\): use 0"):
        build_source(compose(*rgb_pool(folders), "data.batch_size=4", "degradation.pool_size=3"))
    source = build_source(compose(*rgb_pool(folders)))
    assert source.degradation.identity()["pool_size"] == 4
    no_pool = build_source(compose(*rgb_pool(folders), "degradation.pool_size=0"))
    assert "pool_size" not in no_pool.degradation.identity()


@pytest.mark.slow
def test_a_pooled_stream_restarted_anywhere_and_on_the_accelerator_is_the_same(folders):
    """The pooled pairs of the input pipeline from batch k (the pool rebuilt) are those of the
    uninterrupted stream; the device stage's pool gives them too, in the same order (to the
    compiled graph's rounding: :func:`assert_same_pairs_in_order`); the first
    batches (the fill) are the pairs without a pool."""
    source = build_source(compose(*rgb_pool(folders)))
    source.prepare()
    stream = iter(source.dataset(0))
    full = [next(stream) for _ in range(5)]
    for start in (1, 4):  # in the fill (replayed from 0), after it (rebuilt from its slots)
        again = build_source(compose(*rgb_pool(folders)))
        again.prepare()
        tail = iter(again.dataset(start))
        for k in range(start, 5):
            for a, b in zip(next(tail), full[k]):
                np.testing.assert_array_equal(a.numpy(), b.numpy())
    plain = build_source(compose(*rgb_pool(folders), "degradation.pool_size=0"))
    plain.prepare()
    unpooled = iter(plain.dataset(0))
    for k in range(5):
        same = all(np.array_equal(a, b) for a, b in zip(next(unpooled), full[k]))
        assert same == (k < fill_batches(4, 2)), k
    device = build_source(compose(*rgb_pool(folders), "degradation.device=accelerator"))
    device.prepare()
    device.device_state(tf.distribute.get_strategy(), None)
    stage, crops = tf.function(device.device_stage()), iter(device.dataset(0))
    for k in range(5):
        for a, b in zip(stage(*next(crops)), full[k]):
            assert_same_pairs_in_order(a.numpy(), b.numpy())


def assert_same_pairs_in_order(a: np.ndarray, b: np.ndarray) -> None:
    """``a`` holds the images of ``b`` in the same order, to the compiled graph's rounding: a
    one-ulp difference can flip an 8-bit rounding (and a JPEG block with it), so a few values may
    differ by some levels of 255, on some CPUs; every image is still nearest to its own
    counterpart, and within 1/255 of it on average."""
    flat_a, flat_b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    distance = np.abs(flat_a[:, None] - flat_b[None]).mean(-1)  # [i, j]: image i of a vs j of b
    np.testing.assert_array_equal(distance.argmin(1), np.arange(len(a)))
    assert distance.diagonal().max() < 1 / 255, distance.diagonal()


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, device", [("generator", "input"), ("tfrecord", "input"), ("generator", "accelerator")]
)
def test_a_pooled_run_resumed_in_process_is_bit_identical(
    folders, tmp_path, mode, device, caplog, monkeypatch
):
    """6 steps stopped after step 3 and resumed equal 6, every variable: the pool rebuilt (the
    input pipeline of data=generator), restored with the tf.data iterator (data=tfrecord's
    ``scan`` state) or from the checkpoint (the accelerator's, ``data/pool``). Two replicas on
    the accelerator, each with its own pool: :func:`two_replica_pool`. A
    restored tf.data iterator has no slack in its last prefetch (``sr.data.pipeline``: TF
    restores its batches without the time the slack sleeps by; a resumed run here once stopped
    for good after its restored batches)."""
    import sr.data.source
    from sr.train.app import run
    from tests.conftest import stopped_at
    from tests.test_resume_realesrgan import assert_same_checkpoints

    make, slack = sr.data.source.pairs_dataset, []

    def pairs_dataset(*args):
        slack.append(args[3])
        return make(*args)

    monkeypatch.setattr(sr.data.source, "pairs_dataset", pairs_dataset)

    shards = (f"data.data_root={tmp_path / 'root'}", "data.num_shards=2")
    base = (*rgb_pool(folders, f"degradation.device={device}"), f"data={mode}",
            *(shards if mode == "tfrecord" else ()), "data.deterministic=true",
            "model.features=[8,4]", "train.log_every=1", "train.lr_schedule=constant",
            "train.ckpt_every=3", "train.ema=0.9")  # fmt: skip
    run(compose(*base, "train.steps=6"), tmp_path / "one")
    two = stopped_at(tmp_path / "one", 3, tmp_path / "two")  # killed after ckpt-3
    with caplog.at_level(logging.INFO):
        run(compose(*base, "train.steps=6", f"resume={two}"), two)
    assert "continuing the checkpoint's batch stream at batch 3" in caplog.text
    assert slack == [True, mode != "tfrecord"]  # the restored iterator: data=tfrecord's
    one, two = (tmp_path / d / "checkpoints" / "ckpt-6" for d in ("one", "two"))
    assert_same_checkpoints(one, two, ("model", "EMA", "optimizer"))
    pooled = [k for k, _ in tf.train.list_variables(str(one)) if k.startswith("data/pool/")]
    assert bool(pooled) == (device == "accelerator")


def two_replica_pool(folders) -> tuple[str, ...]:
    """Overrides of a 6-step run on 2 logical CPUs (``train.strategy=mirrored``) with the pool
    on the accelerator, checkpointed at step 3: tests/test_distribute.py's
    ``test_two_replicas_keep_a_pool_each_and_resume_it`` (one pool per replica, resumed
    exactly), in its one process on 2 logical CPUs."""
    return (*rgb_pool(folders, "degradation.device=accelerator", "data.batch_size=4",
                      "degradation.pool_size=8"),
            "data.deterministic=true", "model.features=[8,4]", "train.log_every=1",
            "train.lr_schedule=constant", "train.ckpt_every=3", "train.strategy=mirrored",
            "train.logical_cpus=2", "train.steps=6")  # fmt: skip
