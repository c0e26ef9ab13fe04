"""The one path from a data source to training batches (:func:`pairs_dataset`): the source's
uint8 patch batches -> its pair stage (``PatchSource.to_pairs``) in order -> the training-pair
pool of ``degradation.pool_size`` (``sr.data.pair_pool``) -> the tf.data service
(``data.service``) -> prefetch (with slack), on the pipeline's own threads
(:func:`pipeline_threads`).
``sr.data.source`` re-exports both. :func:`handoff`: how the training loop takes batches when
it takes them itself (several replicas, or ``train.deterministic_ops``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import tensorflow as tf

from sr.data import pair_pool


def pipeline_threads(threads: int | None) -> int:
    """The size of the input pipeline's own thread pool (``data.threads``; 0: TensorFlow's shared
    pools). ``None``: 0 where a GPU is visible, else one thread per four cores, at least one: on a
    CPU the step's kernels take every core, and pipeline threads waking beside them delay its next
    batch (``docs/performance.md``, "Data-wait in the training log"). Same batches either way."""
    if threads is None and not tf.config.list_physical_devices("GPU"):
        cores = getattr(os, "sched_getaffinity", lambda _: range(os.cpu_count() or 1))(0)
        return max(1, len(cores) // 4)
    return threads or 0


def pairs_dataset(
    source,
    start: int = 0,
    context: tf.distribute.InputContext | None = None,
    slack: bool = True,
) -> tf.data.Dataset:
    """The one path from a source to training batches: ``source.patch_dataset(start)`` ->
    ``source.to_pairs`` (LR, flips, [0, 1]) in parallel, flips seeded by the batch's number
    (``start``, ``start + 1``, ...) -> (the pair pool of ``degradation.pool_size``,
    ``sr.data.pair_pool``) -> (``data.service``: run on tf.data service workers) -> prefetch
    (with tf.data's ``experimental_slack`` unless ``slack`` is false), on
    :func:`pipeline_threads` threads.

    ``slack=False`` is for an iterator that will be restored from a checkpoint: TensorFlow
    (2.21, ``prefetch_dataset_op.cc``, ``RestoreBuffer``) restores the prefetched batches
    without their creation time, and the slack computes its next sleep from that time; the
    prefetch thread can then sleep for years once the restored batches are taken (seen here: a
    resumed run that stopped training after its restored batches). The batches are the same
    either way; only when the next one is made differs.

    Args:
        source: a prepared source (``sr.data.source.PatchSource``).
        start: the first batch's number.
        context: the ``tf.distribute.InputContext`` of this input pipeline (from
            ``strategy.distribute_datasets_from_function``): batches are then a replica's share
            of the global ``batch_size``, and the pipeline reads its own share of the data. None:
            one pipeline, global batches.
        slack: the last prefetch with tf.data's ``experimental_slack`` (above).

    Returns:
        Endless ``tf.data.Dataset`` of ``sr.core.batch.Batch(lq, gt)``: float32
        ``[B, P/s, P/s, 1]`` and ``[B, P, P, 1]`` in [0, 1] (or what ``source.to_pairs``
        gives: ``SharpenedBatch``, a device stage's crops).

    Raises:
        ImageFolderError: if the image folder is missing or holds no usable image.
    """
    if context is None:
        batch, pipeline = source.batch_size, (0, 1)
    else:
        batch = context.get_per_replica_batch_size(source.batch_size)
        pipeline = (context.input_pipeline_id, context.num_input_pipelines)

    def pairs() -> tf.data.Dataset:
        # degradation.pool_size in the input pipeline: batches replayed to rebuild the pool
        first, full = pair_pool.replay_from(source, start, batch, pipeline[0])
        ds = source.patch_dataset(first, batch, pipeline).enumerate(first)
        # in order whatever data.deterministic says: batch ``n`` is always the stream's n-th, so
        # a stream rebuilt from batch ``start`` (resume) neither repeats nor skips one (equal
        # work per batch: an ordered map costs no throughput)
        # not converted by AutoGraph: sources branch on Python values only (tf.cond where a
        # tensor decides), so the graph is the same, traced without rewriting every function it
        # reaches; a tensor-valued Python branch fails loudly at trace time
        to_pairs = tf.autograph.experimental.do_not_convert(
            lambda i, patches: source.to_pairs(patches, i, pipeline[0])
        )
        ds = ds.map(
            to_pairs,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return pair_pool.pooled_pairs(source, ds, first, full, start, batch, pipeline[0])

    if source.service:  # every worker draws its own read shuffles (service.unseeded)
        from sr.data import service

        ds = service.distribute(service.unseeded(pairs), source.service)
    else:
        ds = pairs()
    options = tf.data.Options()
    options.deterministic = source.deterministic
    # slack in the last prefetch (tf.data's option for host-side contention at a step's start):
    # the next batch is made a little after the step has started, not at its start, where it
    # competed with the step for the cores and delayed the handoff (docs/performance.md,
    # "Data-wait in the training log"); the same batches in the same order
    options.experimental_slack = slack
    if threads := pipeline_threads(source.threads):
        options.threading.private_threadpool_size = threads
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def handoff(iterator) -> Callable[[], object]:
    """``next(iterator)`` taken on the calling thread: a function of no argument that returns the
    iterator's next element (the same elements in the same order, the same errors:
    ``tf.errors.OutOfRangeError`` at the end, ``DataLossError`` of a corrupt shard). The training
    loop takes batches with it when it takes them itself: several replicas, or
    ``train.deterministic_ops`` (otherwise the step's ``tf.function`` takes its batch:
    ``sr.train.step.TrainStep.take_and_train``).

    ``next()`` on a tf.data iterator runs ``IteratorGetNext``, an asynchronous kernel: the
    element is taken on one of tf.data's threads and handed back: two thread wake-ups on the
    first call after a training step, a part of the training log's data-wait that no input
    pipeline can remove (``docs/performance.md``, "Data-wait in the training log"; measured by
    ``benchmarks/bench_handoff.py --trainer --sync``). ``IteratorGetNextSync`` takes it on the
    calling thread, for callers outside TensorFlow's thread pools (the training loop, in eager
    mode). No public method of ``tf.data.Iterator`` runs it, so the iterator's resource is
    taken through its public composite-tensor encoding (``tf.nest.flatten(...,
    expand_composites=True)``): ``tests/test_loader.py::test_the_handoff_takes_the_iterators_
    elements`` fails if TensorFlow changes that encoding. An element that is not only dense
    tensors (ragged, sparse, datasets) is taken by ``next()``.

    Args:
        iterator: an iterator of ``iter(tf.data.Dataset)`` (eager).

    Returns:
        A function returning the next element, structured as ``iterator.element_spec``.
    """
    spec = iterator.element_spec
    flat = tf.nest.flatten(spec)
    resource = tf.nest.flatten(iterator, expand_composites=True)
    if len(resource) != 1 or not all(type(s) is tf.TensorSpec for s in flat):
        return lambda: next(iterator)
    types, shapes = [s.dtype for s in flat], [s.shape for s in flat]

    def take():
        return tf.nest.pack_sequence_as(
            spec,
            tf.raw_ops.IteratorGetNextSync(
                iterator=resource[0], output_types=types, output_shapes=shapes
            ),
        )

    return take
