"""The trainer's batches: this worker's iterator of the data source at the run's step, its data
position in the checkpoint, and reopening it at a restored step (a resume, a rollback)."""

from __future__ import annotations

import logging
from pathlib import Path

import tensorflow as tf

from sr.data import pipeline
from sr.train import distribute
from sr.train.data_state import identity_json, read_data_state, stream_changes

log = logging.getLogger("sr.train.loop")  # train.log names each line's logger: as before
resume_log = logging.getLogger("sr.train.saving")  # the resume's lines, as before


class DataFeed:
    """This worker's stream of training batches.

    Args:
        loader: a prepared data source (:class:`sr.data.PatchSource`): ``dataset()``,
            ``stream_seed``, ``stream_identity()``, ``checkpoint_iterator``, ``device_state()``.
        strategy: the run's strategy; the global batch must split over its replicas.
        global_batch: ``data.batch_size``, the batch of one step over all replicas.
        step: int64 variable, the run's step (:attr:`sr.train.state.RunState.step`): where the
            stream is opened.
        data_state: the data position of the checkpoint (:attr:`sr.train.state.RunState.data`);
            the iterator (and the device stage's pool) is attached to it.
        run_dir: the run's output directory (a worker's own data checkpoints: ``<run_dir>/data``).
        chief: this process is the chief (its data position is in its checkpoints).
        data_seed: ``data.seed``; None: a resumed run adopts the checkpoint's seed.

    Attributes:
        iterator: the open tf.data iterator (None before :meth:`open` and after :meth:`close`).
        take_batch: the host's take of the next batch of :attr:`iterator`
            (``sr.data.pipeline.handoff``).
        stream_checkpoint: the checkpoint whose iterator :meth:`open` restores (None: the
            pipeline rebuilds its stream from its batch number).
    """

    def __init__(self, loader, strategy, global_batch: int, step: tf.Variable, data_state,
                 run_dir, chief: bool, data_seed):  # fmt: skip
        self.loader, self.strategy, self.global_batch = loader, strategy, global_batch
        self.step, self.data_state, self.run_dir = step, data_state, Path(run_dir)
        self.chief, self.data_seed = chief, data_seed
        self.iterator = self.take_batch = None
        self.stream_checkpoint: str | None = None

    def open(self):
        """This worker's iterator of ``loader.dataset()`` at the current step: its input
        pipeline (one per worker, ``distribute.input_pipeline``) batches a replica's share of
        the global batch and reads its own share of the data; each step takes one batch per
        local replica (:meth:`next_batch`). A plain tf.data iterator, so that it can be
        checkpointed (``tf.distribute``'s distributed iterators cannot): for a source whose
        iterator is checkpointed it is attached to the checkpoint and restored from
        :attr:`stream_checkpoint`; otherwise the pipeline rebuilds its stream from its batch
        number at ``step``. Sets and returns :attr:`iterator`."""
        step = int(self.step.numpy())
        distribute.replica_batch(self.global_batch, self.strategy)  # raises if it does not split
        pipelines = distribute.input_pipelines(self.strategy)
        self.local_replicas = self.strategy.num_replicas_in_sync // pipelines
        self.pipeline = distribute.input_pipeline()
        context = tf.distribute.InputContext(
            pipelines, self.pipeline, self.strategy.num_replicas_in_sync
        )
        if pipelines > 1:
            log.info(
                "input pipeline %d of %d reads %s",
                self.pipeline,
                pipelines,
                self.loader.share((self.pipeline, pipelines)),
            )
        # an iterator restored from a checkpoint runs without the last prefetch's slack: TF
        # restores its buffered batches without the time the slack's sleep is computed from
        # (sr.data.pipeline.pairs_dataset)
        restoring = bool(self.loader.checkpoint_iterator and self.stream_checkpoint)
        iterator = iter(self.loader.dataset(
            start=step * self.local_replicas, context=context, slack=not restoring
        ))  # fmt: skip
        # the loop's own take (take_step: several replicas, or op determinism), on this thread
        self.take_batch = pipeline.handoff(iterator)
        # the device stage's state (degradation.pool_size on the accelerator), with the position
        pool = self.loader.device_state(self.strategy, self.stream_checkpoint)
        if pool is not None:
            self.data_state.pool = pool
        if self.loader.checkpoint_iterator:
            self.data_state.iterator = iterator
            if self.stream_checkpoint:
                tf.train.Checkpoint(data=tf.train.Checkpoint(iterator=iterator)).read(
                    self.stream_checkpoint
                ).expect_partial()
        self.iterator = iterator
        return iterator

    def close(self) -> None:
        """Drop the iterator (a generator-mode iterator must go before interpreter shutdown)."""
        self.iterator = self.take_batch = None

    def reopen(self, checkpoint: str) -> None:
        """Close the stream and open it again at the current (restored) step, from the data
        position of the checkpoint ``checkpoint`` (a path prefix): a rollback's replay."""
        self.stream_checkpoint = self.data_checkpoint(checkpoint)
        self.close()
        self.open()

    def next_batch(self):
        """The next step's batch from :attr:`iterator` (an ``sr.core.batch.Batch``, or what the
        source's device stage takes; taken by ``sr.data.pipeline.handoff``) with one replica;
        with several, one batch per local replica, each placed on its replica's device, as one
        distributed value of the same structure."""
        if self.strategy.num_replicas_in_sync == 1:
            return self.take_batch()
        batches = [self.take_batch() for _ in range(self.local_replicas)]
        first = self.pipeline * self.local_replicas

        def part(k):
            return self.strategy.experimental_distribute_values_from_function(
                lambda ctx: tf.identity(batches[ctx.replica_id_in_sync_group - first][k])
            )

        return tf.nest.pack_sequence_as(batches[0], [part(k) for k in range(len(batches[0]))])

    def data_checkpoint(self, path: str) -> str | None:
        """Where the data position of the checkpoint ``path`` is: the checkpoint itself on the
        chief; a worker's own data checkpoint of the same name (None if it has none)."""
        if self.chief:
            return path
        mine = self.run_dir / "data" / Path(path).name
        return str(mine) if Path(f"{mine}.index").is_file() else None

    def resume(self, checkpoint: str) -> None:
        """Continue the batch stream of the checkpoint ``checkpoint`` (a path prefix: its data
        position, :meth:`data_checkpoint`) if this run's data would make the same one: adopt
        its seed when ``data.seed`` is null, compare the stream identities, and (for a source
        whose iterator is checkpointed) restore the iterator from it in :meth:`open`. Otherwise
        log which keys differ and go on with a new stream (the resume is then not exact)."""
        path = self.data_checkpoint(checkpoint)
        saved = read_data_state(path) if path else None
        step = int(self.step.numpy())
        if saved is None:
            resume_log.warning(
                "%s holds no data position (an older checkpoint, or this worker's is missing): "
                "training continues on a new batch stream from step %d",
                path or f"{self.run_dir / 'data'} (this worker's data checkpoints)",
                step,
            )
        else:
            seed, identity = saved
            if self.data_seed is None:
                self.loader.stream_seed = seed
            diff = stream_changes(identity, self.loader.stream_identity())
            if diff:
                resume_log.warning(
                    "the batch stream of this config differs from the checkpoint's (%s): "
                    "training continues on a new stream from step %d, so this resume is not "
                    "exact",
                    ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in diff.items()),
                    step,
                )
            else:
                self.stream_checkpoint = path
                resume_log.info("data: continuing the checkpoint's batch stream at batch %d", step)
        self.data_state.seed.assign(self.loader.stream_seed)
        self.data_state.stream.assign(identity_json(self.loader.stream_identity()))
