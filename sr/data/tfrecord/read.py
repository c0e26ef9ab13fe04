"""The read path: an endless tf.data pipeline of parsed batches from a shard set
(:func:`read_patches`), and for sub-image sets one random crop per sub-image
(:func:`random_crops`), stateless and seeded so that a resumed run crops as an uninterrupted one
would."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from sr.data.tfrecord.params import PatchParams, ShardError, shard_files
from sr.data.tfrecord.records import parse_batch


def random_crops(batch: dict[str, tf.Tensor], params: PatchParams, seed=None) -> dict:
    """One crop per sub-image at a uniformly random position, vectorised over the batch.

    Args:
        batch: :func:`parse_batch` of sub-image records: ``hr`` uint8 ``[B, S, S, C]`` (and
            ``lr`` uint8 ``[B, S/s, S/s, 1]``).
        params: the set's parameters (crop side, scale, alignment).
        seed: None for TensorFlow's stateful generator, or an int ``[2]`` stateless seed: the
            positions are then a function of the seed alone.

    Returns:
        The batch with ``hr`` uint8 ``[B, crop, crop, C]`` (``lr`` ``[B, P/s, P/s, 1]``), the
        crop's top-left corner uniform over the multiples of ``params.align`` in
        ``[0, S - crop]`` on each axis, independently per sample.
    """
    hr, crop, a = batch["hr"], params.crop, params.align
    n = tf.shape(hr)[0]
    count = (params.record - crop) // a + 1  # positions per axis
    if seed is None:
        offsets = tf.random.uniform([2, n], 0, count, dtype=tf.int32)
    else:
        offsets = tf.random.stateless_uniform([2, n], seed, 0, count, dtype=tf.int32)

    def cut(image, offsets, side):
        rows = offsets[0][:, tf.newaxis] + tf.range(side)  # [B, side]
        cols = offsets[1][:, tf.newaxis] + tf.range(side)
        image = tf.gather(image, rows, axis=1, batch_dims=1)  # [B, side, S, C]
        return tf.gather(image, cols, axis=2, batch_dims=1)  # [B, side, side, C]

    out = dict(batch, hr=cut(hr, offsets * a, crop))
    if "lr" in batch:
        out["lr"] = cut(
            batch["lr"], offsets * (a // params.scale), params.patch_size // params.scale
        )
    return out


def read_patches(
    out_dir,
    manifest: dict,
    batch_size: int,
    shuffle_buffer: int,
    seed: int | None = None,
    deterministic: bool = False,
    pipeline: tuple[int, int] = (0, 1),
) -> tf.data.Dataset:
    """Endless dataset of parsed patch batches (see :func:`parse_batch`) from a shard folder.

    ``pipeline=(i, n)``: this input pipeline reads shard files ``i, i + n, ...`` only (sharding
    at the file level, before the interleave: every worker reads its own files), with its own
    shuffle seeds.

    Sub-image sets (``params.subimage``): each batch is then cut to crops by
    :func:`random_crops`, seeded by (``seed``, the batch's number in this iterator) when ``seed``
    is given; the number is part of the iterator's state, so a restored iterator crops on as the
    uninterrupted one would.

    Shard order is reshuffled every epoch, shards are read interleaved in parallel (one record
    from each in turn), records pass a shuffle buffer, are batched, and only then parsed, as one
    op per batch. No Python runs per record.

    Iterating raises ``tf.errors.DataLossError`` for a record that fails its CRC, without naming
    the file (the interleave does not say): :meth:`TFRecordSource.explain_data_loss` turns it
    into a :class:`ShardError` naming the corrupt shards.
    """
    params = PatchParams(**manifest["params"])
    index, count = pipeline
    files = list(shard_files(out_dir, manifest))[index::count]
    if not files:
        raise ShardError(
            f"{count} input pipelines (workers) but only {len(manifest['shards'])} shard "
            f"file(s) in {out_dir}: set data.num_shards to at least {count} (a multiple of it "
            "balances the workers)"
        )
    if seed is not None and index:
        seed = int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
    ds = tf.data.Dataset.from_tensor_slices(files)
    ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    # not converted by AutoGraph: Python branches only (as the data stage, sr.data.pipeline)
    plain = tf.autograph.experimental.do_not_convert
    ds = ds.interleave(
        plain(lambda f: tf.data.TFRecordDataset(f, buffer_size=1 << 20)),
        cycle_length=len(files),
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    if shuffle_buffer > 1:
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.map(plain(lambda s: parse_batch(s, params)), num_parallel_calls=tf.data.AUTOTUNE)
    if not params.subimage:
        return ds
    if seed is None:
        crops = plain(lambda b: random_crops(b, params))
        return ds.map(crops, num_parallel_calls=tf.data.AUTOTUNE)
    base = tf.constant([seed, 0x5EB1], tf.int64)  # crops' stream, apart from the flips' (seed, n)
    return ds.enumerate().map(
        plain(
            lambda i, b: random_crops(b, params, tf.random.experimental.stateless_fold_in(base, i))
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
