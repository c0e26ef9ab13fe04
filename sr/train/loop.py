"""The training loop: the :class:`Trainer` that wires the training step (:mod:`sr.train.step`,
the loss of :mod:`sr.train.losses`), the optimizer and its learning-rate schedule
(:mod:`sr.train.optimizers`, :mod:`sr.train.schedule`), validation (:mod:`sr.train.validation`),
the checkpoint policy (:mod:`sr.train.saving`) and the reports (:mod:`sr.train.report`), and
runs the steps: per-step timing, the time budget, clean interruption, several workers."""

from __future__ import annotations

import logging
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import hydra
import keras
import tensorflow as tf
from omegaconf import DictConfig

from sr.data import pipeline
from sr.loading.checkpoints import BEST_DIR, make_checkpoint
from sr.train import distribute
from sr.train.checkpoint import make_data_state, make_guard_state, make_manager
from sr.train.guard import DivergenceGuard, GuardSettings
from sr.train.optimizers import ema_variables, make_optimizer, optimizer_choice
from sr.train.parts import training_part
from sr.train.report import Reporting
from sr.train.rollback import GuardPolicy
from sr.train.saving import CheckpointPolicy
from sr.train.schedule import train_schedule
from sr.train.step import StepArgs
from sr.train.timing import StepTimer
from sr.train.validation import Validator
from sr.train.window import LossWindow

log = logging.getLogger(__name__)


def gpu_available() -> bool:
    return bool(tf.config.list_physical_devices("GPU"))


@contextmanager
def stop_signals():
    """Turn SIGINT (Ctrl-C) and SIGTERM into a flag the loop checks, so that it can save a
    checkpoint before exiting. Yields a dict whose ``"signal"`` is set on arrival."""
    state = {"signal": None}

    def handler(signum, frame):
        if state["signal"] is not None:  # second Ctrl-C: give up at once
            raise KeyboardInterrupt
        state["signal"] = signum
        log.warning("%s received: saving a checkpoint and stopping", signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield state
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class Profiler:
    """``train.profile_steps``: a profiler trace of steps ``[START, STOP]`` into ``tb/``."""

    def __init__(self, steps, folder: Path, start: int = 0):
        self.steps, self.folder = (list(steps) if steps else None), folder
        if self.steps and start >= self.steps[0]:  # a resume past the range: say so
            log.warning(
                "train.profile_steps=%s: this run starts at step %d, after the range's first "
                "step; no trace is taken (choose steps after %d)",
                self.steps, start, start,
            )  # fmt: skip
            self.steps = None

    def before(self, step: int) -> None:
        """Before step ``step + 1``: start the trace at its first step."""
        if self.steps and step == self.steps[0] - 1:
            tf.profiler.experimental.start(str(self.folder))
            log.info("profiling steps %d to %d into %s", *self.steps, self.folder)

    def after(self, step: int) -> None:
        """After step ``step``: stop the trace at its last step."""
        if self.steps and step == self.steps[1]:
            tf.profiler.experimental.stop()
            self.steps = None

    def close(self, step: int) -> None:
        """The loop ended at ``step``: stop a trace still going."""
        if self.steps and step >= self.steps[0]:  # stopped inside the profiled steps
            tf.profiler.experimental.stop()


class Trainer(CheckpointPolicy, GuardPolicy, Reporting):
    """Trains ``model`` on ``loader.dataset()`` and writes everything under ``run_dir``.

    Args:
        cfg: the composed config (``train``, ``data``, ``model``, ``loss``, ``optimizer``).
        loader: a prepared data source (:class:`sr.data.PatchSource`): its ``dataset()`` feeds
            the loop, its ``val_files`` are the validation images.
        model: Keras model ``[B, h, w, 1] -> [B, s h, s w, 1]``.
        run_dir: the run's output directory (checkpoints/, tb/).
        mixed: the optimizers scale the loss: ``train.precision=float16`` is in force
            (:func:`sr.train.precision.setup_precision`).

    Nothing non-finite is saved: a NaN or infinite loss is caught on the device by the step (see
    :class:`sr.train.step.TrainStep`), read by the host every ``train.log_every`` steps and
    before every validation and save, and every save first checks that all weights and
    optimizer slots are finite. With ``train.on_nonfinite=stop`` the loop then raises
    :class:`NonFiniteError` (the checkpoints on disk are the finite ones); with ``skip`` the
    step's update is skipped.

    The divergence guard (``train.guard``, :mod:`sr.train.guard`) judges the loss of each log
    window and each validation; on a spike or a collapse the run rolls back to the last good
    checkpoint with a lower learning rate (:class:`sr.train.rollback.GuardPolicy`), and
    ``checkpoints/best`` keeps the best validated weights outside the rotation.
    """

    def __init__(
        self,
        cfg: DictConfig,
        loader,
        model: keras.Model,
        run_dir,
        mixed: bool = False,
        strategy: tf.distribute.Strategy | None = None,
    ):
        self.cfg, self.loader, self.model = cfg, loader, model
        self.run_dir = Path(run_dir)
        self.strategy = strategy or tf.distribute.get_strategy()
        self.global_batch = int(cfg.data.batch_size)
        self.chief = distribute.is_chief()
        # the data position is plain (not mirrored) variables: a string cannot live on a GPU
        self.data_state = make_data_state(loader.stream_seed, loader.stream_identity())
        # the time budget (train.max_minutes): the elapsed fraction drives the LR schedule
        # (BudgetSchedule); the elapsed seconds are checkpointed, so a resumed run goes on with
        # the budget it had used (a plain variable: the host writes it)
        self.budget = 60.0 * cfg.train.max_minutes if cfg.train.max_minutes else None
        self.elapsed = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="elapsed")
        self._clock: tuple[float, float] | None = None  # (perf_counter at start, elapsed then)
        self.stream_checkpoint: str | None = None  # restore the data iterator from this one
        self.loss = hydra.utils.instantiate(cfg.loss)
        self.optimizer_choice = optimizer_choice(cfg)
        self.skip_nonfinite = cfg.train.get("on_nonfinite", "stop") == "skip"
        self.guard = DivergenceGuard(GuardSettings.from_config(cfg.train))
        self.best_score = float("-inf")  # of checkpoints/best (higher is better)
        self.saved_steps: list[int] = []  # steps saved in the rotation (rollback targets)
        with self.strategy.scope():
            self._build_optimizer(mixed)
        # the validation rule's reference: the best so far, or the stage's start (the part's)
        self.guard.reference_rule = self.part.psnr_reference
        self._build_managers()
        self.writer = (
            tf.summary.create_file_writer(str(self.run_dir / "tb"))
            if self.chief
            else tf.summary.create_noop_writer()
        )
        self.val_files = loader.val_files if self.chief else []
        self.validator = Validator(
            loader, model, self.optimizer, self.ema is not None, self.writer,
            cfg.train.val_images, with_niqe=self.part.best.monitor == "niqe",
        )  # fmt: skip
        self._skip_mark = (0, 0)  # (step, skipped) at the last log line
        counters = (self.step, self.first_bad, self.skipped)
        self.stepper = self.part.make_step(StepArgs(
            model=model, optimizer=self.optimizer, loss=self.loss, strategy=self.strategy,
            global_batch=self.global_batch, counters=counters,
            skip_nonfinite=self.skip_nonfinite, xla=bool(cfg.train.xla),
            clip_norm=cfg.train.clip_norm, window=self.window, prepare=loader.device_stage(),
        ))  # fmt: skip
        self.replica_step, self.train_step = self.stepper.replica_step, self.stepper.train_step
        # where the batch is taken (take_step); op determinism refuses the take's tf.timestamp
        single = self.strategy.num_replicas_in_sync == 1
        self.take_inside, self.host_wait = single and not cfg.train.deterministic_ops, 0.0
        self.final: dict = {}

    def _build_optimizer(self, mixed: bool) -> None:
        """The optimizer on its schedule, the step counters, the averages and the checkpoint
        (inside the strategy's scope)."""
        self.progress = tf.Variable(
            0.0,
            dtype=tf.float32,
            trainable=False,
            name="budget_progress",
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        )
        self.guard_state = make_guard_state()  # the learning-rate factor of the rollbacks
        self.schedule = train_schedule(
            self.cfg,
            self.progress if self.budget is not None else None,
            self.guard_state.lr_scale,
        )
        self.optimizer = make_optimizer(self.cfg, mixed, schedule=self.schedule)
        self.optimizer.build(self.model.trainable_variables)
        # what the chosen way of training adds (its models, its step, its rules): a part of
        # sr.train.parts, created here in the strategy's scope
        channels = int(self.model.outputs[0].shape[-1])
        self.part = training_part(self.cfg, self.loss, channels, mixed, self.guard_state.lr_scale)
        # the guard's loss and the part's terms between two log lines (sr.train.window)
        self.window = LossWindow(not self.skip_nonfinite, self.part.terms)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        # device-side non-finite record, not checkpointed: the first step whose loss was
        # NaN or inf (-1: none; policy stop) and the count of skipped steps (policy skip)
        self.first_bad = tf.Variable(-1, dtype=tf.int64, trainable=False, name="first_bad")
        self.skipped = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped")
        self.ema = ema_variables(self.optimizer)
        self.checkpoint = make_checkpoint(
            self.model,
            self.optimizer,
            self.step,
            self.data_state,
            self.elapsed,
            ema=self.ema,
            guard=self.guard_state,
            extra=self.part.checkpoint_parts(),
        )

    def _build_managers(self) -> None:
        """Where checkpoints go, and where ``resume=`` reads them."""
        keep = self.cfg.train.max_to_keep
        # a non-chief worker's model checkpoints are temporary; its own data position (its
        # iterator reads its own shards) is kept in <its dir>/data, saved at the same steps
        self.data_manager = (
            None
            if self.chief
            else tf.train.CheckpointManager(
                tf.train.Checkpoint(data=self.data_state),
                str(self.run_dir / "data"),
                max_to_keep=keep,
            )
        )
        self.checkpoint_dir = distribute.checkpoint_dir(self.run_dir)
        self.manager = make_manager(
            self.checkpoint, self.run_dir, keep, directory=self.checkpoint_dir
        )
        # checkpoints/best: one checkpoint, outside the rotation (sr.train.rollback)
        self.best_manager = tf.train.CheckpointManager(
            self.checkpoint, str(self.checkpoint_dir / BEST_DIR), max_to_keep=1
        )
        # what resume= reads: the chief's checkpoints (a worker's own are temporary)
        self.resume_dir = distribute.chief_run_dir(self.run_dir)  # what resume= names
        self.restore_dir = self.resume_dir / "checkpoints"

    def take_step(self) -> tf.Tensor:
        """One training step on the next batch of :attr:`iterator`; returns its loss (a float32
        scalar tensor, not read here: no host sync).

        With one replica the batch is taken inside the step's ``tf.function``
        (:meth:`sr.train.step.TrainStep.take_and_train`, as Keras's ``train_function(iterator)``),
        which times the take on the device side; with several, or with
        ``train.deterministic_ops`` (TensorFlow refuses ``tf.timestamp`` under op determinism),
        the host takes the batch (:meth:`next_batch`), timed here. :meth:`waited` sums both.

        Raises:
            tf.errors.DataLossError: a corrupt record (before the step's update).
        """
        if self.take_inside:
            return self.stepper.take_and_train(self.iterator)
        start = time.perf_counter()
        batch = self.next_batch()
        self.host_wait += time.perf_counter() - start
        return self.train_step(batch)

    def waited(self) -> float:
        """Seconds the steps of this process have waited for their batches (the timing
        lines' data-wait): read from the step's clock, a host sync (at log windows only)."""
        return float(self.stepper.data_wait.numpy()) + self.host_wait

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

    def data_iterator(self):
        """This worker's iterator of ``loader.dataset()`` at the current step: its input
        pipeline (one per worker, ``distribute.input_pipeline``) batches a replica's share of
        the global batch and reads its own share of the data; each step takes one batch per
        local replica (:meth:`next_batch`). A plain tf.data iterator, so that it can be
        checkpointed (``tf.distribute``'s distributed iterators cannot): for a source whose
        iterator is checkpointed it is attached to the checkpoint and restored from
        :attr:`stream_checkpoint` (the resumed one); otherwise the pipeline rebuilds its stream
        from its batch number at ``step``."""
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
        return iterator

    def validate(self) -> dict:
        """PSNR/SSIM of the current weights (and the averaged ones with ``train.ema``) on the
        validation data, logged (:class:`sr.train.validation.Validator`); {} without any."""
        if not self.val_files:
            return {}
        return self.validator(int(self.step.numpy()))

    def fit(self) -> dict:
        """Train until ``train.steps`` (or a stop signal); validate, checkpoint, log.

        Returns:
            ``{"step", "val/psnr", "val/psnr_bicubic", "val/ssim", "step_time_ms",
            "data_wait_ms", "data_wait_share", "interrupted"}`` (val keys only with a val_dir).

        Raises:
            NonFiniteError: the loss or the weights became NaN or inf (found within
                ``train.log_every`` steps, before any save); the checkpoints on disk are finite.
            ValidationError: a validation image failed; the step's checkpoint is saved first.
        """
        timer = StepTimer(self.cfg.data.batch_size, waited=self.waited)
        self.measure_stage_start()  # the stage's start PSNR, where the part judges by it
        self.iterator = self.data_iterator()
        log.info(
            "training %s for %d steps from step %d (data=%s, global batch %d, %s)",
            self.model.name,
            self.cfg.train.steps,
            int(self.step.numpy()),
            self.loader.mode,
            self.cfg.data.batch_size,
            distribute.describe(self.strategy),
        )
        try:
            with stop_signals() as stop:
                interrupted = self._run_steps(timer, stop)
        finally:
            # a generator-mode iterator must go before interpreter shutdown
            self.iterator = self.take_batch = None
        if interrupted is not None:
            log.warning(
                "stopped by %s at step %d; resume with resume=%s",
                signal.Signals(interrupted).name,
                int(self.step.numpy()),
                self.resume_dir,
            )
        res = {} if interrupted is not None else self.validate_safely(saved=True)
        # every worker judges (with several, a collective agrees on the chief's verdict)
        verdict = self.judge_validation(res, self.cluster) if interrupted is None else None
        if verdict is not None:  # the last steps collapsed: end on the last good checkpoint
            self.rollback(verdict, final=True)
            res = self.validate_safely(saved=True)
        return self.finish(timer, res, interrupted)

    def _run_steps(self, timer: StepTimer, stop: dict):
        """The steps of :meth:`fit` up to ``train.steps``, a stop signal or the end of the time
        budget, then the last log window and a save; returns the stop signal or None."""
        t = self.cfg.train
        timer.resume()
        self._start_clock()
        # A Python step counter: reading the step variable every step would block the host on
        # the device each step and stop dispatch from running ahead on a GPU.
        step, loss, first = int(self.step.numpy()), None, True
        # with several workers, stopping (a signal on any of them, the time budget) is agreed
        # every log_every steps, so that all stop, and save, at the same step
        cluster = self.cluster = distribute.input_pipelines(self.strategy) > 1
        profiler = Profiler(t.profile_steps if self.chief else None, self.run_dir / "tb", step)
        while step < t.steps:
            if (not cluster or step % t.log_every == 0) and self._should_stop(step, stop, cluster):
                break
            profiler.before(step)
            try:
                loss = self.take_step()
            except tf.errors.DataLossError as e:  # a corrupt shard: name it, mark it stale
                raise self.loader.explain_data_loss(e) from e
            timer.step_done()
            step += 1
            if first:
                first = False
                self._restart_clock_after_first_step()
                self.guard_begin(step, loss)  # guard_from counts from here (sr.train.guard)
            profiler.after(step)
            step = self._between_steps(step, timer, loss)
        profiler.close(step)
        if loss is not None and step % t.log_every:
            self.log_window(timer, float(loss))
            verdict = self.judge_window()
            if verdict is not None:  # the last steps diverged: end on the last good checkpoint
                self.rollback(verdict, final=True)
                return stop["signal"]
            self.check_finite(window=True)
        self.save()
        return stop["signal"]

    def _between_steps(self, step: int, timer: StepTimer, loss) -> int:
        """After step ``step``: the log window, then a checkpoint and a validation when due,
        each judged by the divergence guard; returns the step the loop goes on from (earlier
        after a rollback)."""
        t = self.cfg.train
        if step % t.log_every == 0:
            self.log_window(timer, float(loss))
            verdict = self.judge_window()  # reads scalars: the loss's sync
            if verdict is not None:
                return self._roll_back(verdict, timer)
            self.check_finite(window=True)
        ckpt_now = step % t.ckpt_every == 0 and step < t.steps
        val_now = step % t.val_every == 0 and step < t.steps
        if ckpt_now or val_now:
            if step % t.log_every:  # nothing saved or validated of steps the guard has not judged
                verdict = self.judge_window()
                if verdict is not None:
                    return self._roll_back(verdict, timer)
            timer.close_window()
            if ckpt_now:  # before validating: a failing validation loses nothing
                self.save()
            if val_now:
                res = self.validate_safely(saved=ckpt_now)
                verdict = self.judge_validation(res, self.cluster)
                if verdict is not None:
                    return self._roll_back(verdict, timer)
            timer.resume()
        return step

    def _roll_back(self, verdict: str, timer: StepTimer) -> int:
        """:meth:`rollback` outside the timed steps; returns the step restored."""
        timer.close_window()
        step = self.rollback(verdict)
        timer.resume()
        return step

    def _should_stop(self, step: int, stop: dict, cluster: bool) -> bool:
        """Whether the loop stops before step ``step + 1``: a stop signal (on any worker) or the
        time budget used up (on the slowest worker's clock); sets the budget's progress."""
        budget = self.budget if self.budget is not None else float("inf")
        elapsed = self.elapsed_seconds()
        if cluster and self.budget is not None:  # one clock: the slowest's
            elapsed = self._max_over_workers(elapsed)
        over = elapsed > budget
        if self.budget is not None:
            self.progress.assign(min(1.0, elapsed / budget))
        signalled = stop["signal"] is not None
        if cluster:
            signalled, over = self._any_worker(signalled), self._any_worker(over)
            if signalled and stop["signal"] is None:
                stop["signal"] = signal.SIGTERM  # another worker's
        if signalled:
            return True
        if over:
            log.info(
                "time budget of %s minutes reached at step %d", self.cfg.train.max_minutes, step
            )
            return True
        return False

    def _start_clock(self) -> None:
        self._clock = (time.perf_counter(), float(self.elapsed.numpy()))
        if self.budget is not None:
            log.info(
                "time budget %s minutes (%.2f used): the LR schedule runs over it, at "
                "max(elapsed / budget, step / train.steps)",
                self.cfg.train.max_minutes,
                self._clock[1] / 60,
            )

    def _restart_clock_after_first_step(self) -> None:
        """The first step of a process traces and compiles the step function and fills the input
        pipeline: start-up, not training. Charged to the budget, it ate the warm-up of a short
        one (docs/results.md: 0.5 dB lost at a 4.875-minute budget); the budget's clock starts
        after it."""
        if self.budget is not None:
            log.info(
                "first step (tracing, compiling, filling the input pipeline): "
                "%.1f s, not charged to the time budget",
                time.perf_counter() - self._clock[0],
            )
        self._clock = (time.perf_counter(), self._clock[1])

    def elapsed_seconds(self) -> float:
        """Seconds of the time budget used: wall time inside :meth:`fit`'s loop (steps, saves
        and validation in it), summed over the pieces of a resumed run (checkpointed in
        ``elapsed``); start-up (the first step of each process included: it traces and compiles
        the step function), and the time between a stop and its resume, do not count."""
        if self._clock is None:
            return float(self.elapsed.numpy())
        start, before = self._clock
        return before + time.perf_counter() - start

    def _max_over_workers(self, value: float) -> float:
        """The largest ``value`` over the cluster's workers (a collective, one scalar)."""
        per = self.strategy.experimental_distribute_values_from_function(
            lambda context: tf.constant(value, tf.float32)
        )
        return float(self.strategy.reduce(tf.distribute.ReduceOp.MAX, per, axis=None))

    def _any_worker(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any worker of the cluster (a collective sum, one scalar;
        every worker must call it at the same step)."""
        value = self.strategy.experimental_distribute_values_from_function(
            lambda context: tf.constant(float(flag))
        )
        return bool(self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) > 0)
