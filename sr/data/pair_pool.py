"""Real-ESRGAN's training-pair pool (``degradation.pool_size``): degraded pairs mixed across
batches, so that a batch holds pairs of several batches' degradation draws.

Source: ``_dequeue_and_enqueue`` of ``realesrgan/models/realesrnet_model.py`` (and
``realesrgan_model.py``) of github.com/xinntao/Real-ESRGAN, ``queue_size: 180`` in its option
files. The official degradation draws the resize factors and modes, the noise kinds and the final
order once per batch (``feed_data``), as ours does (``sr.degradations.realesrgan.batch_draws``);
the pool gives a batch pairs of many draws. With a pool of N pairs and batches of b:

- while the pool fills (its first ``ceil(N / b)`` batches), each batch is written into its next
  free slots and trained on as it is; the last of them fills the slots left (N need not be a
  multiple of b, as the official code asks);
- once full, each batch shuffles the pool, takes its first b pairs out (the batch trained on)
  and puts its own b pairs in their place.

The shuffle of batch t is a stateless permutation (:func:`pool_order`) keyed by the batch's first
degradation seed (``sr.degradations.realesrgan.image_seed(stream seed, t b, pipeline)``: the same
in the input pipeline and on the accelerator), so the pooled stream is a function of the seed.
Values on the 8-bit grid (RGB pairs, every HR) are held as uint8, exactly (k / 255 back); the
unrounded Y of an LR as float32.

Where it runs follows ``degradation.device``: in the tf.data graph after the pair stage
(:func:`pooled`, a ``scan`` whose state a checkpointed iterator saves; a source that rebuilds its
stream from a batch number rebuilds the pool from the batches still in it, :func:`rebuild_start`),
or in the training step's device stage on the accelerator (:class:`DevicePool`, variables saved in
every checkpoint with the data position).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import tensorflow as tf

from sr.degradations.realesrgan import image_seed

log = logging.getLogger(__name__)

POOL_SALT = 0x9001
"""Folded into a batch's first degradation seed: the key of the pool's shuffle at that batch."""


def pool_key(first_seed) -> tf.Tensor:
    """The key of the pool's shuffle at a batch: int64 ``[2]`` from the batch's first
    degradation seed (int64 ``[2]``)."""
    return tf.random.experimental.stateless_fold_in(tf.cast(first_seed, tf.int64), POOL_SALT)


def pool_order(key, size: int) -> tf.Tensor:
    """A uniform random permutation of ``range(size)`` (int32 ``[size]``), a function of
    ``key`` (int64 ``[2]``) alone: ``torch.randperm``'s role in ``_dequeue_and_enqueue``."""
    return tf.argsort(tf.random.stateless_uniform([size], key), stable=True)


def _encode(x: tf.Tensor, on_grid: bool) -> tf.Tensor:
    return tf.cast(tf.round(x * 255.0), tf.uint8) if on_grid else x


def _decode(x: tf.Tensor, on_grid: bool) -> tf.Tensor:
    return tf.cast(x, tf.float32) / 255.0 if on_grid else x


def empty_pool(size: int, shapes, on_grid) -> tuple[tf.Tensor, ...]:
    """Zeros for a pool of ``size`` pairs: one tensor ``[size, *shape]`` per element of a pair
    (uint8 where ``on_grid``, else float32), then the count of filled slots (int32 0)."""
    content = tuple(
        tf.zeros([size, *shape], tf.uint8 if grid else tf.float32)
        for shape, grid in zip(shapes, on_grid)
    )
    return (*content, tf.constant(0, tf.int32))


@tf.autograph.experimental.do_not_convert  # tf.cond where a tensor decides: the same graph
def pool_step(state: tuple, batch: tuple, key, on_grid) -> tuple[tuple, tuple]:
    """One batch through the pool: ``(state, batch) -> (new state, batch to train on)``.

    Args:
        state: the pool, as :func:`empty_pool` gives it: its contents ``[N, ...]`` per element
            of a pair, then the filled count (int32 scalar).
        batch: float32 ``[b, ...]`` per element, in [0, 1] (``sr.core.batch.Batch`` or
            ``SharpenedBatch``; its fields in order are the pool's elements); b <= N.
        key: int64 ``[2]``, :func:`pool_key` of the batch.
        on_grid: per element, whether its values are k / 255 (held as uint8, exactly).

    Returns:
        The new state, and the batch to train on, of ``batch``'s structure: ``batch`` itself
        while the pool fills, else b pairs of the shuffled pool (module docstring).
    """
    *content, filled = state
    size = content[0].shape[0]
    b = tf.shape(batch[0])[0]

    def fill():
        k = tf.minimum(b, size - filled)
        slots = (filled + tf.range(k))[:, tf.newaxis]
        new = [
            tf.tensor_scatter_nd_update(c, slots, _encode(x[:k], g))
            for c, x, g in zip(content, batch, on_grid)
        ]
        return (*new, filled + k), tuple(batch)

    def swap():
        order = pool_order(key, size)
        shuffled = [tf.gather(c, order) for c in content]
        out = tuple(_decode(s[:b], g) for s, g in zip(shuffled, on_grid))
        new = [
            tf.ensure_shape(tf.concat([_encode(x, g), s[b:]], 0), s.shape)
            for s, x, g in zip(shuffled, batch, on_grid)
        ]
        return (*new, filled), out

    new_state, out = tf.cond(filled < size, fill, swap)
    out = [tf.ensure_shape(o, x.shape) for o, x in zip(out, batch)]
    return new_state, tf.nest.pack_sequence_as(batch, out)  # the batch's own structure


def fill_batches(size: int, batch: int) -> int:
    """Batches that fill a pool of ``size`` pairs: ``ceil(size / batch)``."""
    return math.ceil(size / batch)


def rebuild_start(size: int, batch: int, start: int, first_seed) -> int:
    """The batch from which a stream rebuilt at batch ``start`` replays the pool, so that its
    contents before batch ``start`` are those of the uninterrupted stream.

    Traces each slot back through the shuffles of batches ``start - 1``, ``start - 2``, ...
    (slot s >= b after batch t held slot ``order_t[s]`` before it; slot s < b holds batch t's
    pair): the earliest batch any slot's pair comes from. Replaying from there with any contents
    (a full pool of zeros) gives every slot its pair again. A slot that goes back to the filling
    batches: 0, the whole stream replayed (at most :func:`fill_batches` batches).

    Args:
        size, batch: N and b.
        start: the batch the stream restarts at.
        first_seed: ``t -> int64 [2]``, the first degradation seed of batch t.

    Returns:
        The batch to replay from (0 if the pool is to be rebuilt from empty).
    """
    fill = fill_batches(size, batch)
    if start <= fill:
        return 0
    slots, t = np.arange(size), start - 1
    while t >= fill:
        order = pool_order(pool_key(first_seed(t)), size).numpy()
        slots = order[slots[slots >= batch]]
        if not slots.size:
            return t
        t -= 1
    return 0


def pooled(pairs: tf.data.Dataset, size: int, on_grid, seed_of, full: bool = False):
    """The pool in the tf.data graph: a ``scan`` over ``(index, pair batch)`` elements, whose
    state a saved tf.data iterator holds.

    Args:
        pairs: ``(index, batch)`` elements, index int64, batch an ``sr.core.batch.Batch`` or
            ``SharpenedBatch``.
        size: N.
        on_grid: per element of a pair, whether it is on the 8-bit grid.
        seed_of: ``index tensor -> int64 [2]``, the batch's first degradation seed.
        full: start from a full pool (of zeros, which the batches replayed push out: a pool
            rebuilt from :func:`rebuild_start`); else an empty one.

    Returns:
        The pooled batches (of the same structure), one per element of ``pairs``.
    """
    spec = pairs.element_spec[1]
    state = empty_pool(size, [s.shape[1:] for s in spec], on_grid)
    if full:
        state = (*state[:-1], tf.constant(size, tf.int32))

    @tf.autograph.experimental.do_not_convert
    def step(state, element):
        index, batch = element
        return pool_step(state, batch, pool_key(seed_of(index)), on_grid)

    return pairs.scan(state, step)


class DevicePool:
    """The pool on the accelerator (``degradation.device=accelerator``): one pool per local
    replica, each in variables on its replica's device, applied by the device stage after the
    degradation (:meth:`apply`). Its variables are saved with the data position of every
    checkpoint (:attr:`state`), so that a resumed run continues it exactly.

    Args:
        size: N.
        shapes: the shape of one pair's elements (``[h, w, C]`` each).
        on_grid: per element, whether it is on the 8-bit grid.
        devices: the local replicas' devices (``strategy.extended.worker_devices``), or None for
            one replica on the default device.
    """

    def __init__(self, size: int, shapes, on_grid, devices=None):
        self.size, self.on_grid = size, tuple(on_grid)
        self.pools = []
        for device in devices or [None]:
            with tf.device(device):
                zeros = empty_pool(size, shapes, on_grid)
                self.pools.append(
                    [tf.Variable(z, trainable=False, name=f"pair_pool_{i}") for i, z in
                     enumerate(zeros)]
                )  # fmt: skip
        self.state = tf.train.Checkpoint(
            **{f"replica_{k}": tf.train.Checkpoint(slots=p) for k, p in enumerate(self.pools)}
        )

    def empty(self) -> None:
        """All pools empty (a new stream)."""
        for pool in self.pools:
            pool[-1].assign(0)

    def apply(self, batch: tuple, first_seed) -> tuple:
        """The batch to train on (:func:`pool_step`) through this replica's pool, updated in
        place; inside the training step's ``tf.function``, on the replica's device.

        Args:
            batch: this replica's ``sr.core.batch.Batch`` or ``SharpenedBatch``, float32
                ``[b, ...]`` each.
            first_seed: int64 ``[2]``, the batch's first degradation seed.
        """
        pool = self.pools[self._replica() % len(self.pools)]
        state, out = pool_step(
            tuple(v.read_value() for v in pool), batch, pool_key(first_seed), self.on_grid
        )
        for v, value in zip(pool, state):
            v.assign(value)
        return out

    @staticmethod
    def _replica() -> int:
        """This replica's number in its sync group (0 outside a strategy)."""
        context = tf.distribute.get_replica_context()
        if context is None:
            return 0
        rid = tf.get_static_value(context.replica_id_in_sync_group)
        return int(rid) if rid is not None else 0


# ------------------------------------------------------------------------------------------------
# A source's pool: its size, its pairs' layout, where it runs
# ------------------------------------------------------------------------------------------------
def pool_size(source) -> int:
    """N of a source's degradation (``degradation.pool_size``); 0: no pool."""
    return int(source.degradation.pool_size)


def on_device(source) -> bool:
    """Whether the source's pairs are made in the training step (``degradation.device``)."""
    return source.degradation.device == "accelerator"


def pair_layout(source) -> tuple[list, tuple]:
    """``(shapes, on_grid)`` of one of the source's pairs: ``[h, w, C]`` per field of its
    ``sr.core.batch`` structure (``lq``, ``gt``; with ``plain_target`` ``lq``, ``gt_usm``,
    ``gt``) and whether each is on the 8-bit grid (all but the LQ's unrounded Y)."""
    c = 3 if source.channels == "rgb" else 1
    p, big = source.lr_patch_size, source.patch_size
    shapes, grid = [[p, p, c], [big, big, c]], [source.channels == "rgb", True]
    if source.plain_target:
        shapes, grid = [*shapes, [big, big, c]], [*grid, True]
    return shapes, tuple(grid)


def first_seed(source, batch: int, pipeline: int):
    """``t -> int64 [2]``: the first degradation seed of batch t of a pipeline's stream (that of
    ``source.element_seeds`` for its first patch)."""
    return lambda t: image_seed(source.stream_seed, tf.cast(t, tf.int64) * batch, pipeline)


def replay_from(source, start: int, batch: int, pipeline: int) -> tuple[int, bool]:
    """Where a source's input pipeline starts so that its pool at batch ``start`` is the
    uninterrupted stream's: ``(first batch, pool full)``. ``start`` itself without a pool in
    the input pipeline, for a source whose saved iterator holds the pool, and under the tf.data
    service (whose streams are not resumed); else :func:`rebuild_start`."""
    size = pool_size(source)
    if not size or on_device(source) or source.checkpoint_iterator or source.service:
        return start, False
    first = rebuild_start(size, batch, start, first_seed(source, batch, pipeline))
    if first < start:
        log.info("pair pool: batches %d to %d replayed to rebuild it", first, start - 1)
    return first, first > 0


def pooled_pairs(source, pairs, first: int, full: bool, start: int, batch: int, pipeline: int):
    """A source's pairs through its pool in the input pipeline (:func:`pooled`), the batches
    before ``start`` replayed and dropped; ``pairs`` as they are without one there."""
    size = pool_size(source)
    if not size or on_device(source):
        return pairs
    _, grid = pair_layout(source)
    seeds = first_seed(source, batch, pipeline)
    out = pooled(pairs.enumerate(first), size, grid, seeds, full)
    return out.skip(start - first) if start > first else out


def device_pool_state(source, strategy, checkpoint: str | None):
    """The pool of a source on the accelerator: created once (``source.device_pool``, one
    :class:`DevicePool` per local replica of ``strategy``), then restored from the data position
    of ``checkpoint`` (the stream a resumed run continues) or emptied (a new stream). Returns its
    :attr:`DevicePool.state`, or None without a pool on the accelerator."""
    if not pool_size(source) or not on_device(source):
        return None
    if source.device_pool is None:
        try:  # the local replicas' devices (one_device's too); the default strategy has none
            devices = list(strategy.extended.worker_devices)
        except RuntimeError:
            devices = None
        shapes, grid = pair_layout(source)
        source.device_pool = DevicePool(pool_size(source), shapes, grid, devices)
    pool = source.device_pool
    if checkpoint is None:
        pool.empty()
        return pool.state
    try:
        tf.train.Checkpoint(data=tf.train.Checkpoint(pool=pool.state)).read(
            checkpoint
        ).expect_partial().assert_existing_objects_matched()
    except AssertionError:  # another replica count: those pools are not this run's
        pool.empty()
    return pool.state
