"""The training loop: Adam on L1 (or L2), a learning-rate schedule, a ``tf.function`` step (XLA by
config), per-step timing, validation, TensorBoard, checkpoints, resume and clean interruption."""

from __future__ import annotations

import json
import logging
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from omegaconf import DictConfig

from sr.core.images import ImageFolderError
from sr.evaluation import METRICS
from sr.train import distribute
from sr.train.checkpoint import make_checkpoint, make_data_state, make_manager, read_data_state
from sr.train.timing import StepTimer
from sr.train.validation import evaluate_source

log = logging.getLogger(__name__)

# per-example losses ``[B]`` (mean over the pixels of each example); the step averages them over
# the global batch (``tf.nn.compute_average_loss``), so the loss is the batch mean at any
# replica count
LOSSES = {
    "l1": lambda hr, sr: tf.reduce_mean(tf.abs(hr - sr), axis=[1, 2, 3]),
    "l2": lambda hr, sr: tf.reduce_mean(tf.square(hr - sr), axis=[1, 2, 3]),
}


class NonFiniteError(RuntimeError):
    """The loss (or the weights) became NaN or infinite; nothing non-finite was saved.

    Attributes:
        step: the first step whose loss was non-finite (1-based, as in the timing line), or the
            step at which non-finite weights were found before a save.
        lr: the learning rate of that step.
        last_checkpoint: path prefix of the last (finite) checkpoint of the run, or None.
    """

    def __init__(self, message: str, step: int, lr: float, last_checkpoint: str | None):
        super().__init__(message)
        self.step, self.lr, self.last_checkpoint = step, lr, last_checkpoint


class ValidationError(ImageFolderError):
    """A validation image failed mid-run (after the step's checkpoint was saved)."""


def gpu_available() -> bool:
    return bool(tf.config.list_physical_devices("GPU"))


def setup_precision(mixed_precision: bool) -> bool:
    """Set Keras' global dtype policy before the model is built; returns True if mixed float16
    is on. Mixed precision is used only on a GPU (on CPU float16 is slower, so it is ignored)."""
    if mixed_precision and gpu_available():
        keras.mixed_precision.set_global_policy("mixed_float16")
        return True
    if mixed_precision:
        log.warning("train.mixed_precision=true ignored: no GPU visible to TensorFlow")
    keras.mixed_precision.set_global_policy("float32")
    return False


def make_schedule(cfg: DictConfig):
    """Learning rate per step: ``cosine`` (to 1 % of ``lr`` at ``steps``, optional linear warm-up),
    ``step`` (halved every ``lr_decay_steps``, as EDSR), or ``constant``."""
    t = cfg.train
    if t.lr_schedule == "cosine":
        warm = int(t.lr_warmup_steps)
        return keras.optimizers.schedules.CosineDecay(
            t.lr if not warm else 0.0,
            max(1, t.steps - warm),
            alpha=0.01,
            warmup_target=t.lr if warm else None,
            warmup_steps=warm,
        )
    if t.lr_schedule == "step":
        return keras.optimizers.schedules.ExponentialDecay(
            t.lr, t.lr_decay_steps, 0.5, staircase=True
        )
    if t.lr_schedule == "constant":
        return float(t.lr)
    raise ValueError(f"train.lr_schedule must be cosine, step or constant, got {t.lr_schedule!r}")


@keras.saving.register_keras_serializable(package="sr")
class BudgetSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A step schedule run over a time budget (``train.max_minutes``).

    The wrapped schedule (``make_schedule``: warm-up, cosine, step or constant, written in steps
    of ``train.steps``) is evaluated at the position ``max(step, progress x steps)``, where
    ``progress`` is the elapsed fraction of the budget (a variable the training loop sets, 0 to
    1). So the learning rate reaches its final value when the budget ends, on a machine of any
    speed, or at ``train.steps`` if those come first; the warm-up takes the same fraction of the
    budget as of the steps. With ``progress`` at 0 it is the wrapped schedule itself.

    Args:
        inner: the step schedule (callable on a step, float32) or a constant.
        steps: ``train.steps``, the horizon the step schedule was written for.
        progress: float32 scalar variable, the elapsed fraction of the budget in [0, 1].
    """

    def __init__(self, inner, steps: int, progress: tf.Variable):
        self.inner, self.steps, self.progress = inner, int(steps), progress

    def __call__(self, step):
        position = tf.maximum(tf.cast(step, tf.float32), self.progress * float(self.steps))
        if callable(self.inner):
            return self.inner(position)
        return tf.constant(float(self.inner), tf.float32)

    def get_config(self):
        return {"steps": self.steps}


@keras.saving.register_keras_serializable(package="sr")
class AveragingAdam(keras.optimizers.Adam):
    """Adam with Keras's moving average of the weights (``use_ema=True``) whose decay warms up:
    the update after n earlier ones uses ``min(ema_momentum, (1 + n) / (10 + n))``, the
    ``num_updates`` rule of ``tf.train.ExponentialMovingAverage``. With a fixed 0.999 the
    average of a run of 1,200 steps (the 20-minute recipe on a slow machine) still weighs the
    first steps' weights by e^-1.2 = 30 % and scores 1.9 dB under the trained weights on Set5;
    with the warm-up it averages over about the last (10 + n) / 9 steps until the decay reaches
    its value (n = 8,990 for 0.999), then over the last 1 / (1 - decay)."""

    @property
    def ema_momentum(self):
        iterations = getattr(self, "_iterations", None)
        if iterations is None:  # Keras's __init__
            return self._ema_decay
        n = keras.ops.cast(iterations, "float32")
        return keras.ops.minimum(self._ema_decay, (1.0 + n) / (10.0 + n))

    @ema_momentum.setter
    def ema_momentum(self, value):
        self._ema_decay = value

    def get_config(self):
        return {**super().get_config(), "ema_momentum": self._ema_decay}


def make_optimizer(
    cfg: DictConfig, mixed: bool, progress: tf.Variable | None = None
) -> keras.optimizers.Optimizer:
    """Adam on :func:`make_schedule`; with ``progress`` (a time budget is set) the schedule runs
    over the budget (:class:`BudgetSchedule`). With ``train.ema=D`` it is
    :class:`AveragingAdam`, which also keeps an exponential moving average of the weights: after
    each applied update, ``average = d average + (1 - d) weight`` (``average = weight`` after the
    first) with ``d = min(D, (1 + n) / (10 + n))``, n the updates before it; the weight averaging
    of BasicSR's recipes (``ema_decay``, 0.999) with TensorFlow's warm-up. A step skipped for
    non-finite gradients (``train.on_nonfinite=skip``, loss scaling) leaves the average as it is.
    :func:`ema_variables` gives the averages."""
    schedule = make_schedule(cfg)
    if progress is not None:
        schedule = BudgetSchedule(schedule, cfg.train.steps, progress)
    ema = cfg.train.get("ema")
    betas = {"beta_1": cfg.train.beta_1, "beta_2": cfg.train.beta_2}
    if ema is None:
        opt = keras.optimizers.Adam(schedule, **betas)
    else:
        opt = AveragingAdam(schedule, **betas, use_ema=True, ema_momentum=float(ema))
    return keras.optimizers.LossScaleOptimizer(opt) if mixed else opt


def ema_variables(optimizer) -> list | None:
    """The moving averages of a built optimizer of :func:`make_optimizer`, one per trainable
    variable of the model, in the order of ``model.trainable_variables``; None without
    ``train.ema``. (Keras keeps them in ``_model_variables_moving_average``, which it fills in
    ``build``; ``tests/test_ema.py`` checks them against the averaging formula.)"""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if not inner.use_ema:
        return None
    return list(inner._model_variables_moving_average)


def current_lr(optimizer, iteration: int | None = None) -> float:
    """The learning rate at the optimizer's ``iteration`` (default: its current one). Keras 3's
    ``optimizer.learning_rate`` is the current value, so a schedule is read from
    ``_learning_rate``."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    lr = getattr(inner, "_learning_rate", inner.learning_rate)
    if iteration is None:
        iteration = inner.iterations
    value = lr(iteration) if callable(lr) else getattr(lr, "value", lr)  # a Keras variable's
    return float(tf.convert_to_tensor(value).numpy())  # also a MirroredVariable's


def all_finite(variables) -> tf.Tensor:
    """bool scalar: every float value of ``variables`` is finite (one reduction per variable)."""
    checks = [
        tf.reduce_all(tf.math.is_finite(v)) for v in variables if tf.as_dtype(v.dtype).is_floating
    ]
    return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)


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


def side_by_side(*images: np.ndarray) -> np.ndarray:
    """``[1, H, k W, 1]`` float32 in [0, 1] from k ``[H, W]`` images on the [0, 255] scale."""
    row = np.concatenate([np.clip(im, 0, 255) / 255.0 for im in images], axis=1)
    return row[np.newaxis, :, :, np.newaxis].astype(np.float32)


def describe_model(model_cfg) -> str:
    """``build_edsr(blocks=8, features=32, ...)``: the builder and its configured arguments, which
    tell apart models of one builder (``edsr_baseline`` and ``edsr_lite``) in HParams."""
    args = ", ".join(f"{k}={v}" for k, v in model_cfg.items() if k != "_target_")
    return f"{str(model_cfg._target_).rsplit('.', 1)[-1]}({args})"


class Trainer:
    """Trains ``model`` on ``loader.dataset()`` and writes everything under ``run_dir``.

    Args:
        cfg: the composed config (``train``, ``data``, ``model`` groups).
        loader: a prepared data source (:class:`sr.data.PatchSource`): its ``dataset()`` feeds
            the loop, its ``val_files`` are the validation images.
        model: Keras model ``[B, h, w, 1] -> [B, s h, s w, 1]``.
        run_dir: the run's output directory (checkpoints/, tb/).
        mixed: mixed float16 is on (``setup_precision``).

    Nothing non-finite is saved: a NaN or infinite loss is caught on the device by the step (see
    :meth:`_train_step`), read by the host every ``train.log_every`` steps and before every
    validation and save, and every save first checks that all weights and optimizer slots are
    finite. With ``train.on_nonfinite=stop`` the loop then raises :class:`NonFiniteError` (the
    checkpoints on disk are the finite ones); with ``skip`` the step's update is skipped.
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
        if cfg.train.loss not in LOSSES:
            raise ValueError(f"train.loss must be one of {sorted(LOSSES)}, got {cfg.train.loss!r}")
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
        with self.strategy.scope():
            self.progress = tf.Variable(
                0.0,
                dtype=tf.float32,
                trainable=False,
                name="budget_progress",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
            self.optimizer = make_optimizer(
                cfg, mixed, self.progress if self.budget is not None else None
            )
            self.optimizer.build(model.trainable_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            # device-side non-finite record, not checkpointed: the first step whose loss was
            # NaN or inf (-1: none; policy stop) and the count of skipped steps (policy skip)
            self.first_bad = tf.Variable(-1, dtype=tf.int64, trainable=False, name="first_bad")
            self.skipped = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped")
            self.ema = ema_variables(self.optimizer)
            self.checkpoint = make_checkpoint(
                model, self.optimizer, self.step, self.data_state, self.elapsed, ema=self.ema
            )
        self._stream_checkpoint: str | None = None  # restore the data iterator from this one
        # a non-chief worker's model checkpoints are temporary; its own data position (its
        # iterator reads its own shards) is kept in <its dir>/data, saved at the same steps
        self.data_manager = (
            None
            if self.chief
            else tf.train.CheckpointManager(
                tf.train.Checkpoint(data=self.data_state),
                str(self.run_dir / "data"),
                max_to_keep=cfg.train.max_to_keep,
            )
        )
        self.checkpoint_dir = distribute.checkpoint_dir(self.run_dir)
        self.manager = make_manager(
            self.checkpoint, self.run_dir, cfg.train.max_to_keep, directory=self.checkpoint_dir
        )
        # what resume= reads: the chief's checkpoints (a worker's own are temporary)
        self.resume_dir = distribute.chief_run_dir(self.run_dir)  # what resume= names
        self.restore_dir = self.resume_dir / "checkpoints"
        self.writer = (
            tf.summary.create_file_writer(str(self.run_dir / "tb"))
            if self.chief
            else tf.summary.create_noop_writer()
        )
        self.val_files = loader.val_files if self.chief else []
        self.loss_fn = LOSSES[cfg.train.loss]
        self.skip_nonfinite = cfg.train.get("on_nonfinite", "stop") == "skip"
        self._skip_mark = (0, 0)  # (step, skipped) at the last log line
        # XLA compiles the replica step (as Keras does), the strategy runs it on every replica
        # XLA compiles the replica step (as Keras does); with several replicas only its forward
        # and backward pass: the optimizer's cross-replica update cannot be in an XLA cluster
        # (its variables live on every replica's device)
        xla, several = bool(cfg.train.xla), self.strategy.num_replicas_in_sync > 1
        self.gradients = (
            tf.function(self._gradients, jit_compile=True) if xla and several else self._gradients
        )
        self.replica_step = tf.function(self._replica_step, jit_compile=xla and not several)
        self.train_step = tf.function(self._train_step)
        self.final: dict = {}

    def _gradients(self, lr, hr):
        """Forward and backward pass of one replica: its share of the loss (per-example losses
        summed and divided by the global batch) and the gradients of the (scaled) loss."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            sr = self.model(lr, training=True)
            per_example = self.loss_fn(hr, tf.cast(sr, hr.dtype))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch)
            scaled = self.optimizer.scale_loss(loss)
        return loss, tape.gradient(scaled, variables)

    def _replica_step(self, lr, hr):
        """One replica's share of a step: forward, backward, and the optimizer update (Keras
        sums the gradients over the replicas); returns its share of the loss and whether the
        step is finite on every replica (float32 1 or 0; always 1 with ``on_nonfinite=stop``).
        """
        variables = self.model.trainable_variables
        loss, grads = self.gradients(lr, hr)
        if not self.skip_nonfinite:
            self.optimizer.apply(grads, variables)
            return loss, tf.constant(1.0)
        finite = tf.logical_and(
            tf.math.is_finite(loss), all_finite(g for g in grads if g is not None)
        )
        context = tf.distribute.get_replica_context()  # replicas with a non-finite step
        bad = context.all_reduce(tf.distribute.ReduceOp.SUM, 1.0 - tf.cast(finite, tf.float32))

        def update():
            self.optimizer.apply(grads, variables)
            return tf.constant(0.0)

        tf.cond(bad == 0, update, lambda: tf.constant(0.0))
        return loss, tf.cast(bad == 0, tf.float32)

    def _train_step(self, batch):
        """One optimizer step on a (distributed) batch ``(lr, hr)``: float32 ``[B, h, w, 1]``
        and ``[B, s h, s w, 1]`` in [0, 1], B the global batch split over the replicas; returns
        the loss (the mean over the global batch), a float32 scalar.

        The non-finite check runs inside this ``tf.function``, with no host sync:

        - ``train.on_nonfinite=stop``: ``tf.math.is_finite(loss)`` (one op on a scalar) and a
          scalar ``tf.where`` into ``first_bad``, the first step whose loss was NaN or inf. The
          host reads it with the loss every ``train.log_every`` steps and before each save, so a
          NaN stops the run within ``log_every`` steps. Cost: not measurable; ESPCN on a shared
          2-core CPU, 300 interleaved steps each, median step 36.8 ms with the check vs 37.6 ms
          without at batch 16, 12.2 vs 13.2 ms at batch 4 (differences within the noise, sd
          about 2 ms).
        - ``train.on_nonfinite=skip``: also ``tf.math.is_finite`` over every gradient (one pass
          over the parameters) and the update under ``tf.cond``: a step with a non-finite loss or
          gradient applies nothing and adds 1 to ``skipped`` (as loss scaling does). Cost also
          within the noise: 28.7 vs 30.8 ms (batch 16), 12.2 vs 12.5 ms (batch 4).
        """
        losses, finite = self.strategy.run(self.replica_step, args=batch)
        sum_ = tf.distribute.ReduceOp.SUM
        loss = self.strategy.reduce(sum_, losses, axis=None)
        self.step.assign_add(1)
        if self.skip_nonfinite:  # the same on every replica: all skip, or none
            ok = self.strategy.experimental_local_results(finite)[0]
            self.skipped.assign_add(tf.cast(ok <= 0, tf.int64))
        else:
            known = tf.logical_or(tf.math.is_finite(loss), self.first_bad >= 0)
            self.first_bad.assign(tf.where(known, self.first_bad, self.step))
        return loss

    def restore(self) -> int:
        """Restore the latest checkpoint of ``run_dir`` (for ``resume=``); returns its step.

        Raises:
            FileNotFoundError: if the run has no checkpoint.
            ConfigError: if ``train.ema`` is set in one of the run and this resume only.
        """
        path = tf.train.latest_checkpoint(str(self.restore_dir))
        if path is None:
            raise FileNotFoundError(
                f"resume={self.resume_dir}: no checkpoint in {self.restore_dir}; "
                "pass the output directory of an earlier train.py run"
            )
        from sr.config import ConfigError
        from sr.train.checkpoint import has_averages

        if has_averages(path) != (self.ema is not None):  # the optimizer's slots would not match
            saved = "with" if has_averages(path) else "without"
            raise ConfigError(
                f"resume={self.resume_dir}: {path} was trained {saved} train.ema and this run "
                f"has train.ema={self.cfg.train.get('ema')}; resume with the run's own train.ema"
            )
        make_checkpoint(self.model, self.optimizer, self.step, elapsed=self.elapsed).restore(
            path
        ).expect_partial().assert_existing_objects_matched()
        log.info("resumed from %s at step %d", path, int(self.step.numpy()))
        if self.budget is not None:
            log.info(
                "time budget: %.2f of train.max_minutes=%s minutes used before this resume",
                float(self.elapsed.numpy()) / 60,
                self.cfg.train.max_minutes,
            )
        if not self.chief:  # a worker's data position is in its own data checkpoints
            mine = self.run_dir / "data" / Path(path).name
            path = str(mine) if Path(f"{mine}.index").is_file() else None
        self._restore_stream(path)
        return int(self.step.numpy())

    def _restore_stream(self, path: str) -> None:
        """Continue the checkpoint's batch stream if this run's data would make the same one:
        adopt its seed when ``data.seed`` is null, compare the stream identities, and (for a
        source whose iterator is checkpointed) restore the iterator in :meth:`fit`. Otherwise
        log which keys differ and go on with a new stream (the resume is then not exact)."""
        saved = read_data_state(path) if path else None
        step = int(self.step.numpy())
        if saved is None:
            log.warning(
                "%s holds no data position (an older checkpoint, or this worker's is missing): "
                "training continues on a new batch stream from step %d",
                path or f"{self.run_dir / 'data'} (this worker's data checkpoints)",
                step,
            )
        else:
            seed, identity = saved
            if self.cfg.data.seed is None:
                self.loader.stream_seed = seed
            now = self.loader.stream_identity()
            diff = {
                k: (identity.get(k), now.get(k))
                for k in sorted(set(identity) | set(now))
                if identity.get(k) != now.get(k)
            }
            if diff:
                log.warning(
                    "the batch stream of this config differs from the checkpoint's (%s): "
                    "training continues on a new stream from step %d, so this resume is not "
                    "exact",
                    ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in diff.items()),
                    step,
                )
            else:
                self._stream_checkpoint = path
                log.info("data: continuing the checkpoint's batch stream at batch %d", step)
        self.data_state.seed.assign(self.loader.stream_seed)
        self.data_state.stream.assign(json.dumps(self.loader.stream_identity(), sort_keys=True))

    def _next_batch(self, iterator):
        """The next step's batch: ``(lr, hr)`` with one replica's share, or, with several
        replicas, one batch per local replica, each placed on its replica's device."""
        if self.strategy.num_replicas_in_sync == 1:
            return next(iterator)
        batches = [next(iterator) for _ in range(self.local_replicas)]
        first = self.pipeline * self.local_replicas

        def part(k):
            return self.strategy.experimental_distribute_values_from_function(
                lambda ctx: tf.identity(batches[ctx.replica_id_in_sync_group - first][k])
            )

        return part(0), part(1)

    def _data_iterator(self):
        """This worker's iterator of ``loader.dataset()`` at the current step: its input
        pipeline (one per worker, ``distribute.input_pipeline``) batches a replica's share of
        the global batch and reads its own share of the data; each step takes one batch per
        local replica (:meth:`_next_batch`). A plain tf.data iterator, so that it can be
        checkpointed (``tf.distribute``'s distributed iterators cannot): for a source whose
        iterator is checkpointed it is attached to the checkpoint and restored from the resumed
        one; otherwise the pipeline rebuilds its stream from its batch number at ``step``."""
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
        iterator = iter(self.loader.dataset(start=step * self.local_replicas, context=context))
        if self.loader.checkpoint_iterator:
            self.data_state.iterator = iterator
            if self._stream_checkpoint:
                tf.train.Checkpoint(data=tf.train.Checkpoint(iterator=iterator)).read(
                    self._stream_checkpoint
                ).expect_partial()
        return iterator

    def _nonfinite(self, step: int, what: str) -> NonFiniteError:
        """The error for a non-finite state found at ``step``: names the step, its learning rate,
        the last (finite) checkpoint on disk and how to resume from it."""
        lr = current_lr(self.optimizer, max(0, step - 1))
        last = tf.train.latest_checkpoint(str(self.restore_dir))
        if last:
            nxt = (
                f"the last good checkpoint is {last}; resume from it with "
                f"resume={self.resume_dir} and a lower learning rate, e.g. "
                f"train.lr={self.cfg.train.lr / 10:.3g}"
            )
        else:
            nxt = (
                f"no checkpoint was saved before it; start again with a lower train.lr ({lr:.3g})"
            )
        return NonFiniteError(
            f"{what} at step {step} (lr {lr:.3g}): stopped without saving it; {nxt}",
            step,
            lr,
            last,
        )

    def check_finite(self, weights: bool = False, window: bool = False) -> None:
        """Host side of the non-finite check: read the step's device-side record (one scalar).

        Args:
            weights: also check that every model weight and optimizer slot is finite (one
                reduction per variable; done before every save).
            window: a log line's check; with ``train.on_nonfinite=skip`` it logs the steps
                skipped since the last one and stops if every step since then was skipped.

        Raises:
            NonFiniteError: naming the step, its learning rate and the last good checkpoint.
        """
        step = int(self.step.numpy())
        if self.skip_nonfinite:
            if window:
                skipped = int(self.skipped.numpy())
                mark_step, mark_skipped = self._skip_mark
                new = skipped - mark_skipped
                self._skip_mark = (step, skipped)
                if new:
                    log.warning(
                        "skipped %d step(s) with a non-finite loss or gradient (%d in all)",
                        new,
                        skipped,
                    )
                    with self.writer.as_default(step=step):
                        tf.summary.scalar("train/skipped_steps", skipped)
                if new and new >= step - mark_step:
                    raise self._nonfinite(
                        step, f"every one of the last {new} steps was non-finite and skipped"
                    )
        else:
            bad = int(self.first_bad.numpy())
            if bad >= 0:
                raise self._nonfinite(bad, "non-finite loss (NaN or inf)")
        if weights and not bool(all_finite(self.model.weights + self.optimizer.variables)):
            raise self._nonfinite(step, "non-finite weights")

    def save(self) -> str:
        """Save a checkpoint of the current step (``ckpt-<step>``), once the state is known to be
        finite (:meth:`check_finite` with ``weights=True``).

        Returns:
            The checkpoint's path prefix.

        Raises:
            NonFiniteError: if the loss since the last check or any weight is NaN or inf; nothing
                is written, so the checkpoints on disk stay the finite ones.
        """
        self.check_finite(weights=True)
        if self._clock is not None:
            self.elapsed.assign(self.elapsed_seconds())
        path = self.manager.save(checkpoint_number=int(self.step.numpy()))
        distribute.discard(self.checkpoint_dir)  # a non-chief worker's copy is temporary
        if self.data_manager is not None:
            self.data_manager.save(checkpoint_number=int(self.step.numpy()))
        if self.chief:
            log.info("checkpoint %s", path)
        return path

    def validate_safely(self, saved: bool) -> dict:
        """:meth:`validate`, with the trained steps safe whatever happens to it.

        Args:
            saved: the current step's checkpoint is already written; if not, a failing
                validation writes it before the error propagates.

        Raises:
            NonFiniteError: if the state is non-finite (not validated, not saved).
            ValidationError: if a validation image cannot be read or is too small (names the
                file, the saved checkpoint and ``resume=``).
        """
        self.check_finite()
        try:
            return self.validate()
        except Exception as e:
            path = self.manager.latest_checkpoint if saved else self.save()
            if not isinstance(e, ValueError):
                log.error(
                    "validation failed at step %d; the step is saved in %s",
                    int(self.step.numpy()),
                    path,
                )
                raise
            raise ValidationError(
                f"validation failed at step {int(self.step.numpy())}: {e}. The step is saved "
                f"in {path}: fix or remove the image in data.val_dir={self.loader.val_dir} (or "
                f"set data.val_dir=null), then continue with resume={self.resume_dir}"
            ) from e

    def validate(self) -> dict:
        """PSNR/SSIM on Y of ``data.val_dir`` (paper protocol) with the bicubic baseline, logged to
        the console and TensorBoard (scalars and bicubic | SR | HR panels). With ``train.ema``
        the averaged weights are scored too (``val_ema/`` scalars and panels, ``ema_`` keys of
        the result): they are put into the model for the evaluation and the trained weights put
        back after it, whatever happens."""
        if not self.val_files:
            return {}
        res = self._evaluate("val", "")
        if self.ema is not None:
            trained = [keras.ops.convert_to_numpy(v) for v in self.model.trainable_variables]
            self.optimizer.finalize_variable_values(self.model.trainable_variables)
            try:
                averaged = self._evaluate("val_ema", " of the averaged weights (train.ema)")
            finally:
                for variable, value in zip(self.model.trainable_variables, trained):
                    variable.assign(value)
            res.update({f"ema_{key}": averaged[key] for key in METRICS})
        return res

    def _evaluate(self, tag: str, what: str) -> dict:
        """Score the model's current weights on the validation images; log under ``tag/``."""
        t0 = time.perf_counter()
        res = evaluate_source(self.loader, self.model, keep=self.cfg.train.val_images)
        step = int(self.step.numpy())
        with self.writer.as_default(step=step):
            for key in METRICS:
                tf.summary.scalar(f"{tag}/{key}", res[key])
            for name, bicubic, sr, hr in res["panels"]:
                tf.summary.image(
                    f"{tag}/{Path(name).stem} (bicubic | SR | HR)", side_by_side(bicubic, sr, hr)
                )
        log.info(
            "validation%s step %d on %d images: PSNR %.2f dB (bicubic %.2f dB), SSIM %.4f "
            "(bicubic %.4f) [%.1f s]",
            what,
            step,
            res["n"],
            res["psnr"],
            res["psnr_bicubic"],
            res["ssim"],
            res["ssim_bicubic"],
            time.perf_counter() - t0,
        )
        return res

    def _log_window(self, timer: StepTimer, loss: float) -> None:
        stats = timer.close_window()
        if stats is None:
            return
        lr = current_lr(self.optimizer)
        log.info(
            "[%s] step %d/%d  loss %.5f  step %.1f ms  data-wait %.2f ms (%.1f%%)  "
            "%.0f patches/s  lr %.2e",
            timer.elapsed(),
            int(self.step.numpy()),
            self.cfg.train.steps,
            loss,
            stats.step_time_ms,
            stats.data_wait_ms,
            100 * stats.data_wait_share,
            stats.patches_per_sec,
            lr,
        )
        with self.writer.as_default(step=int(self.step.numpy())):
            tf.summary.scalar("train/loss", loss)
            tf.summary.scalar("train/step_time_ms", stats.step_time_ms)
            tf.summary.scalar("train/data_wait_ms", stats.data_wait_ms)
            tf.summary.scalar("train/patches_per_sec", stats.patches_per_sec)
            tf.summary.scalar("train/lr", lr)

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
        t = self.cfg.train
        timer = StepTimer(self.cfg.data.batch_size)
        iterator = self._data_iterator()
        interrupted = None
        log.info(
            "training %s for %d steps from step %d (data=%s, global batch %d, %s)",
            self.model.name,
            t.steps,
            int(self.step.numpy()),
            self.loader.mode,
            self.cfg.data.batch_size,
            distribute.describe(self.strategy),
        )
        try:
            with stop_signals() as stop:
                timer.resume()
                budget = self.budget if self.budget is not None else float("inf")
                self._clock = (time.perf_counter(), float(self.elapsed.numpy()))
                if self.budget is not None:
                    log.info(
                        "time budget %s minutes (%.2f used): the LR schedule runs over it, at "
                        "max(elapsed / budget, step / train.steps)",
                        t.max_minutes,
                        self._clock[1] / 60,
                    )
                # A Python step counter: reading the step variable every step would block the
                # host on the device each step and stop dispatch from running ahead on a GPU.
                step, loss, first = int(self.step.numpy()), None, True
                # with several workers, stopping (a signal on any of them, the time budget) is
                # agreed every log_every steps, so that all stop, and save, at the same step
                cluster = distribute.input_pipelines(self.strategy) > 1
                profile = list(t.profile_steps) if t.profile_steps and self.chief else None
                while step < t.steps:
                    if not cluster or step % t.log_every == 0:
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
                            break
                        if over:
                            log.info(
                                "time budget of %s minutes reached at step %d",
                                t.max_minutes,
                                step,
                            )
                            break
                    if profile and step == profile[0] - 1:
                        tf.profiler.experimental.start(str(self.run_dir / "tb"))
                        log.info("profiling steps %d to %d into %s", *profile, self.run_dir / "tb")
                    t0 = time.perf_counter()
                    try:
                        batch = self._next_batch(iterator)
                    except tf.errors.DataLossError as e:  # a corrupt shard: name it, mark stale
                        raise self.loader.explain_data_loss(e) from e
                    timer.add_wait(time.perf_counter() - t0)
                    loss = self.train_step(batch)
                    step += 1
                    if first:
                        # The first step of a process traces and compiles the step function and
                        # fills the input pipeline: start-up, not training. Charged to the budget,
                        # it ate the warm-up of a short one (docs/results.md: 0.5 dB lost at a
                        # 4.875-minute budget); the budget's clock starts after it.
                        first = False
                        if self.budget is not None:
                            log.info(
                                "first step (tracing, compiling, filling the input pipeline): "
                                "%.1f s, not charged to the time budget",
                                time.perf_counter() - self._clock[0],
                            )
                        self._clock = (time.perf_counter(), self._clock[1])
                    if profile and step == profile[1]:
                        tf.profiler.experimental.stop()
                        profile = None
                    if step % t.log_every == 0:
                        self._log_window(timer, float(loss))
                        self.check_finite(window=True)  # reads a scalar: the loss's sync
                    ckpt_now = step % t.ckpt_every == 0 and step < t.steps
                    val_now = step % t.val_every == 0 and step < t.steps
                    if ckpt_now or val_now:
                        timer.close_window()
                        if ckpt_now:  # before validating: a failing validation loses nothing
                            self.save()
                        if val_now:
                            self.validate_safely(saved=ckpt_now)
                        timer.resume()
                if profile and step >= profile[0]:  # stopped inside the profiled steps
                    tf.profiler.experimental.stop()
                interrupted = stop["signal"]
                if loss is not None and step % t.log_every:
                    self._log_window(timer, float(loss))
                    self.check_finite(window=True)
                self.save()
        finally:
            del iterator  # a generator-mode iterator must go before interpreter shutdown
        if interrupted is not None:
            log.warning(
                "stopped by %s at step %d; resume with resume=%s",
                signal.Signals(interrupted).name,
                int(self.step.numpy()),
                self.resume_dir,
            )
        res = {} if interrupted is not None else self.validate_safely(saved=True)
        return self._finish(timer, res, interrupted)

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

    def _finish(self, timer: StepTimer, res: dict, interrupted) -> dict:
        summary = timer.summary()
        final = {"step": int(self.step.numpy()), "interrupted": interrupted}
        if self.budget is not None:
            final["budget_minutes_used"] = self.elapsed_seconds() / 60
            log.info(
                "steps reached: %d of train.steps=%d in %.2f of %s budget minutes; final lr %.3g",
                final["step"],
                self.cfg.train.steps,
                final["budget_minutes_used"],
                self.cfg.train.max_minutes,
                current_lr(self.optimizer),
            )
        if summary:
            final.update(
                step_time_ms=summary.step_time_ms,
                data_wait_ms=summary.data_wait_ms,
                data_wait_share=summary.data_wait_share,
                patches_per_sec=summary.patches_per_sec,
            )
        for key in (*METRICS, "ema_psnr", "ema_ssim"):
            if key in res:
                final[f"val/{key}"] = res[key]
        self._write_hparams(final)
        self.writer.flush()
        if "val/psnr" in final:
            log.info(
                "final step %d: val PSNR %.2f dB vs bicubic %.2f dB (%+.2f dB), SSIM %.4f vs "
                "%.4f; mean step %.1f ms, data-wait %.2f ms (%.1f%% of step time)",
                final["step"],
                final["val/psnr"],
                final["val/psnr_bicubic"],
                final["val/psnr"] - final["val/psnr_bicubic"],
                final["val/ssim"],
                final["val/ssim_bicubic"],
                final.get("step_time_ms", 0),
                final.get("data_wait_ms", 0),
                100 * final.get("data_wait_share", 0),
            )
            if "val/ema_psnr" in final:
                log.info(
                    "final step %d, averaged weights (train.ema=%s): val PSNR %.2f dB (%+.2f dB "
                    "vs the trained weights), SSIM %.4f",
                    final["step"],
                    self.cfg.train.ema,
                    final["val/ema_psnr"],
                    final["val/ema_psnr"] - final["val/psnr"],
                    final["val/ema_ssim"],
                )
        elif "step_time_ms" in final:
            log.info(
                "final step %d: mean step %.1f ms, data-wait %.2f ms (%.1f%% of step time)",
                final["step"],
                final["step_time_ms"],
                final["data_wait_ms"],
                100 * final["data_wait_share"],
            )
        self.final = final
        return final

    def _write_hparams(self, final: dict) -> None:
        from tensorboard.plugins.hparams import api as hp

        c = self.cfg
        hparams = {
            "model": describe_model(c.model),
            "parameters": int(self.model.count_params()),
            "data_mode": self.loader.mode,
            "strategy": str(c.train.strategy),
            "replicas": int(self.strategy.num_replicas_in_sync),
            "steps": int(c.train.steps),
            "steps_reached": int(self.step.numpy()),
            "max_minutes": float(c.train.max_minutes or 0.0),
            "batch_size": int(c.data.batch_size),
            "patch_size": int(c.data.patch_size),
            "scale": int(c.data.scale),
            "lr": float(c.train.lr),
            "lr_schedule": str(c.train.lr_schedule),
            "loss": str(c.train.loss),
            "ema": float(c.train.get("ema") or 0.0),
        }
        with self.writer.as_default(step=int(self.step.numpy())):
            hp.hparams(hparams, trial_id=self.run_dir.name)  # metrics: the val/ scalars
