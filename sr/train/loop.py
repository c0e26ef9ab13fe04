"""The training loop: the :class:`Trainer` that builds the training step (:mod:`sr.train.step`,
the loss terms of :mod:`sr.losses`), the optimizer and its learning-rate schedule
(:mod:`sr.train.optimizers`, :mod:`sr.train.schedule`) and its collaborators, each given what it
needs in its constructor: the run's state (:mod:`sr.train.state`), the batches
(:mod:`sr.train.feed`), the time budget (:mod:`sr.train.budget`), the checkpoints and the
non-finite check (:mod:`sr.train.saving`), ``checkpoints/best`` (:mod:`sr.train.best`), the
divergence guard's rollbacks (:mod:`sr.train.rollback`), validation
(:mod:`sr.train.validation`) and the reports (:mod:`sr.train.report`); and runs the steps:
per-step timing, the time budget, clean interruption, several workers."""

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

from sr.loading.checkpoints import BEST_DIR, make_checkpoint
from sr.train import distribute
from sr.train.best import BestCheckpoint
from sr.train.budget import TimeBudget
from sr.train.cluster import Cluster
from sr.train.feed import DataFeed
from sr.train.guard import DivergenceGuard, GuardSettings
from sr.train.optimizers import ema_variables, make_optimizer, optimizer_choice
from sr.train.parts import training_part
from sr.train.report import Reporter
from sr.train.rollback import Rollback
from sr.train.saving import Checkpoints, FiniteCheck
from sr.train.schedule import train_schedule
from sr.train.state import RunState
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


class Trainer:
    """Trains ``model`` on ``loader.dataset()`` and writes everything under ``run_dir``.

    Args:
        cfg: the composed config (``train``, ``data``, ``model``, ``loss``, ``optimizer``).
        loader: a prepared data source (:class:`sr.data.PatchSource`): its ``dataset()`` feeds
            the loop, its ``val_files`` are the validation images.
        model: Keras model ``[B, h, w, 1] -> [B, s h, s w, 1]``.
        run_dir: the run's output directory (checkpoints/, tb/).
        mixed: the optimizers scale the loss: ``train.precision=float16`` is in force
            (:func:`sr.train.precision.setup_precision`).

    The loop owns its collaborators, each built here with what it needs: :attr:`state` (the
    run's variables, :class:`sr.train.state.RunState`), :attr:`feed` (the batches,
    :class:`sr.train.feed.DataFeed`), :attr:`budget` (:class:`sr.train.budget.TimeBudget`),
    :attr:`finite` and :attr:`checkpoints` (:mod:`sr.train.saving`), :attr:`best`
    (:class:`sr.train.best.BestCheckpoint`), :attr:`rollback`
    (:class:`sr.train.rollback.Rollback`), :attr:`validator` and :attr:`reporter`
    (:class:`sr.train.report.Reporter`).

    Nothing non-finite is saved: a NaN or infinite loss is caught on the device by the step (see
    :class:`sr.train.step.TrainStep`), read by the host every ``train.log_every`` steps and
    before every validation and save, and every save first checks that all weights and
    optimizer slots are finite. With ``train.on_nonfinite=stop`` the loop then raises
    :class:`sr.train.saving.NonFiniteError` (the checkpoints on disk are the finite ones); with
    ``skip`` the step's update is skipped.

    The divergence guard (``train.guard``, :mod:`sr.train.guard`) judges the loss of each log
    window and each validation; on a spike or a collapse the run rolls back to the last good
    checkpoint with a lower learning rate (:class:`sr.train.rollback.Rollback`), and
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
        self.chief = distribute.is_chief()
        self.cluster = Cluster(self.strategy)
        self.state = RunState.create(self.strategy, loader.stream_seed, loader.stream_identity())
        # the time budget (train.max_minutes): the elapsed fraction drives the LR schedule
        # (BudgetSchedule); the elapsed seconds are checkpointed, so a resumed run goes on with
        # the budget it had used
        self.budget = TimeBudget(cfg.train.max_minutes, self.state.elapsed, self.state.progress)
        self.loss = hydra.utils.instantiate(cfg.loss)
        self.optimizer_choice = optimizer_choice(cfg)
        self.skip_nonfinite = cfg.train.get("on_nonfinite", "stop") == "skip"
        self.guard = DivergenceGuard(GuardSettings.from_config(cfg.train))
        with self.strategy.scope():
            self._build_optimizer(mixed)
        # the validation rule's reference: the best so far, or the stage's start (the part's)
        self.guard.reference_rule = self.part.psnr_reference
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
        self._build_collaborators()
        self._build_step()

    def _build_optimizer(self, mixed: bool) -> None:
        """The optimizer on its schedule, the way of training, the averages and the checkpoint
        (inside the strategy's scope)."""
        state = self.state
        self.schedule = train_schedule(
            self.cfg,
            state.progress if self.budget.seconds is not None else None,
            state.guard.lr_scale,  # the learning-rate factor of the rollbacks
        )
        self.optimizer = make_optimizer(self.cfg, mixed, schedule=self.schedule)
        self.optimizer.build(self.model.trainable_variables)
        # what the chosen way of training adds (its models, its step, its rules): a part of
        # sr.train.parts, created here in the strategy's scope
        channels = int(self.model.outputs[0].shape[-1])
        self.part = training_part(self.cfg, self.loss, channels, mixed, state.guard.lr_scale)
        # the guard's loss and the part's terms between two log lines (sr.train.window)
        self.window = LossWindow(not self.skip_nonfinite, self.part.terms)
        self.ema = ema_variables(self.optimizer)
        self.checkpoint = make_checkpoint(
            self.model,
            self.optimizer,
            state.step,
            state.data,
            state.elapsed,
            ema=self.ema,
            guard=state.guard,
            extra=self.part.checkpoint_parts(),
        )

    def checked_variables(self) -> list:
        """The variables checked finite before every save: the model's weights, the optimizer's
        slots and the part's."""
        return [*self.model.weights, *self.optimizer.variables, *self.part.variables()]

    def _build_collaborators(self) -> None:
        """The checkpoints (the rotation, ``checkpoints/best``), the non-finite check, the
        batches, the rollbacks and the reports, each given what it needs."""
        t, state, chief, averaged = self.cfg.train, self.state, self.chief, self.ema is not None
        self.finite = FiniteCheck(
            state, self.checked_variables, self.schedule, self.writer, skip=self.skip_nonfinite,
            lr=t.lr, resume_dir=distribute.chief_run_dir(self.run_dir),
        )  # fmt: skip
        self.checkpoints = Checkpoints(
            self.checkpoint, state, self.model, self.optimizer, self.part.checkpoint_parts(),
            self.finite, self.budget, self.guard, run_dir=self.run_dir, keep=t.max_to_keep,
            chief=chief, averaged=averaged, ema=t.get("ema"),
        )  # fmt: skip
        # checkpoints/best: one checkpoint, outside the rotation
        self.best = BestCheckpoint(
            self.checkpoint, self.checkpoints.directory / BEST_DIR, self.part.best, state.step,
            self.finite, self.cluster, averaged=averaged, chief=chief,
        )  # fmt: skip
        self.feed = DataFeed(
            self.loader, self.strategy, int(self.cfg.data.batch_size), state.step, state.data,
            self.run_dir, chief, self.cfg.data.seed,
        )  # fmt: skip
        self.rollback = Rollback(
            self.guard, state, self.checkpoints, self.best, self.window, self.part, self.writer,
            self.cluster, self.feed.reopen, t,
        )  # fmt: skip
        self.reporter = Reporter(
            self.cfg, self.writer, state, self.budget, model=self.model, optimizer=self.optimizer,
            optimizer_choice=self.optimizer_choice, loss=self.loss, part=self.part,
            data_mode=self.loader.mode, replicas=self.strategy.num_replicas_in_sync,
            run_name=self.run_dir.name,
        )  # fmt: skip

    def _build_step(self) -> None:
        """The way of training's step (:class:`sr.train.step.TrainStep`) and where it takes its
        batch."""
        t, state = self.cfg.train, self.state
        self.stepper = self.part.make_step(StepArgs(
            model=self.model, optimizer=self.optimizer, loss=self.loss, strategy=self.strategy,
            global_batch=int(self.cfg.data.batch_size),
            counters=(state.step, state.first_bad, state.skipped),
            skip_nonfinite=self.skip_nonfinite, xla=bool(t.xla), clip_norm=t.clip_norm,
            window=self.window, prepare=self.loader.device_stage(),
        ))  # fmt: skip
        self.replica_step, self.train_step = self.stepper.replica_step, self.stepper.train_step
        # where the batch is taken (take_step); op determinism refuses the take's tf.timestamp
        single = self.strategy.num_replicas_in_sync == 1
        self.take_inside, self.host_wait = single and not t.deterministic_ops, 0.0

    def restore(self) -> int:
        """``resume=``: restore the newest readable checkpoint of the run (weights, optimizer,
        step, time budget used: :meth:`sr.train.saving.Checkpoints.resume`), its batch stream
        (:meth:`sr.train.feed.DataFeed.resume`) and the guard's references and best record
        (:meth:`sr.train.rollback.Rollback.resume`); returns the step.

        Raises:
            FileNotFoundError: if the run has no checkpoint, or none is readable.
            ConfigError: if ``train.ema`` is set in one of the run and this resume only, or a
                whole checkpoint does not restore into this config's model or optimizer.
        """
        path = self.checkpoints.resume()
        self.feed.resume(path)
        self.rollback.resume()
        return self.state.at()

    def take_step(self) -> tf.Tensor:
        """One training step on the next batch of the feed; returns its loss (a float32 scalar
        tensor, not read here: no host sync).

        With one replica the batch is taken inside the step's ``tf.function``
        (:meth:`sr.train.step.TrainStep.take_and_train`, as Keras's ``train_function(iterator)``),
        which times the take on the device side; with several, or with
        ``train.deterministic_ops`` (TensorFlow refuses ``tf.timestamp`` under op determinism),
        the host takes the batch (:meth:`sr.train.feed.DataFeed.next_batch`), timed here.
        :meth:`waited` sums both.

        Raises:
            tf.errors.DataLossError: a corrupt record (before the step's update).
        """
        if self.take_inside:
            return self.stepper.take_and_train(self.feed.iterator)
        start = time.perf_counter()
        batch = self.feed.next_batch()
        self.host_wait += time.perf_counter() - start
        return self.train_step(batch)

    def waited(self) -> float:
        """Seconds the steps of this process have waited for their batches (the timing
        lines' data-wait): read from the step's clock, a host sync (at log windows only)."""
        return float(self.stepper.data_wait.numpy()) + self.host_wait

    def validate(self) -> dict:
        """PSNR/SSIM of the current weights (and the averaged ones with ``train.ema``) on the
        validation data, logged (:class:`sr.train.validation.Validator`); {} without any."""
        if not self.val_files:
            return {}
        return self.validator(self.state.at())

    def validate_safely(self, saved: bool) -> dict:
        """:meth:`validate`, with the trained steps safe whatever happens to it
        (:meth:`sr.train.saving.Checkpoints.validate_safely`)."""
        return self.checkpoints.validate_safely(self.validate, saved, self.loader.val_dir)

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
        # the stage's start PSNR, where the part judges by it
        self.rollback.measure_stage_start(
            self.validator if self.val_files else None, self.loader.val_dir
        )
        self.feed.open()
        log.info(
            "training %s for %d steps from step %d (data=%s, global batch %d, %s)",
            self.model.name,
            self.cfg.train.steps,
            self.state.at(),
            self.loader.mode,
            self.cfg.data.batch_size,
            distribute.describe(self.strategy),
        )
        try:
            with stop_signals() as stop:
                interrupted = self._run_steps(timer, stop)
        finally:
            self.feed.close()  # a generator-mode iterator must go before interpreter shutdown
        if interrupted is not None:
            log.warning(
                "stopped by %s at step %d; resume with resume=%s",
                signal.Signals(interrupted).name,
                self.state.at(),
                self.checkpoints.resume_dir,
            )
        res = {} if interrupted is not None else self.validate_safely(saved=True)
        # every worker judges (with several, a collective agrees on the chief's verdict)
        verdict = self.rollback.judge_validation(res) if interrupted is None else None
        if verdict is not None:  # the last steps collapsed: end on the last good checkpoint
            self.rollback.rollback(verdict, final=True)
            res = self.validate_safely(saved=True)
        return self.reporter.finish(timer, res, interrupted)

    def _run_steps(self, timer: StepTimer, stop: dict):
        """The steps of :meth:`fit` up to ``train.steps``, a stop signal or the end of the time
        budget, then the last log window and a save; returns the stop signal or None."""
        t = self.cfg.train
        timer.resume()
        self.budget.start()
        # A Python step counter: reading the step variable every step would block the host on
        # the device each step and stop dispatch from running ahead on a GPU.
        step, loss, first = self.state.at(), None, True
        # with several workers, stopping (a signal on any of them, the time budget) is agreed
        # every log_every steps, so that all stop, and save, at the same step
        cluster = self.cluster.several
        profiler = Profiler(t.profile_steps if self.chief else None, self.run_dir / "tb", step)
        while step < t.steps:
            if (not cluster or step % t.log_every == 0) and self._should_stop(step, stop):
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
                self.budget.restart_after_first_step()
                self.rollback.begin(step, loss)  # guard_from counts from here (sr.train.guard)
            profiler.after(step)
            step = self._between_steps(step, timer, loss)
        profiler.close(step)
        if loss is not None and step % t.log_every:
            self.reporter.log_window(timer, float(loss))
            verdict = self.rollback.judge_window()
            if verdict is not None:  # the last steps diverged: end on the last good checkpoint
                self.rollback.rollback(verdict, final=True)
                return stop["signal"]
            self.finite.check(window=True)
        self.checkpoints.save()
        return stop["signal"]

    def _between_steps(self, step: int, timer: StepTimer, loss) -> int:
        """After step ``step``: the log window, then a checkpoint and a validation when due,
        each judged by the divergence guard; returns the step the loop goes on from (earlier
        after a rollback)."""
        t = self.cfg.train
        if step % t.log_every == 0:
            self.reporter.log_window(timer, float(loss))
            verdict = self.rollback.judge_window()  # reads scalars: the loss's sync
            if verdict is not None:
                return self._roll_back(verdict, timer)
            self.finite.check(window=True)
        ckpt_now = step % t.ckpt_every == 0 and step < t.steps
        val_now = step % t.val_every == 0 and step < t.steps
        if ckpt_now or val_now:
            if step % t.log_every:  # nothing saved or validated of steps the guard has not judged
                verdict = self.rollback.judge_window()
                if verdict is not None:
                    return self._roll_back(verdict, timer)
            timer.close_window()
            if ckpt_now:  # before validating: a failing validation loses nothing
                self.checkpoints.save()
            if val_now:
                res = self.validate_safely(saved=ckpt_now)
                verdict = self.rollback.judge_validation(res)
                if verdict is not None:
                    return self._roll_back(verdict, timer)
            timer.resume()
        return step

    def _roll_back(self, verdict: str, timer: StepTimer) -> int:
        """:meth:`sr.train.rollback.Rollback.rollback` outside the timed steps; returns the
        step restored."""
        timer.close_window()
        step = self.rollback.rollback(verdict)
        timer.resume()
        return step

    def _should_stop(self, step: int, stop: dict) -> bool:
        """Whether the loop stops before step ``step + 1``: a stop signal (on any worker) or the
        time budget used up (on the slowest worker's clock); sets the budget's progress."""
        over = self.budget.used_up(self.cluster)
        signalled = stop["signal"] is not None
        if self.cluster.several:
            signalled, over = self.cluster.any(signalled), self.cluster.any(over)
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
