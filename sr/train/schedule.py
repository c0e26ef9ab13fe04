"""The learning rate per step: the ``train.lr_schedule`` (cosine with an optional warm-up, step,
constant) and, with a time budget (``train.max_minutes``), that schedule run over the budget."""

from __future__ import annotations

import keras
import tensorflow as tf
from omegaconf import DictConfig


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
class ScaledSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A schedule (or a constant) times ``scale``: a float32 scalar variable, 1 until the
    divergence guard lowers it (``train.guard_lr_factor`` per rollback, :mod:`sr.train.guard`);
    checkpointed, so a resumed run keeps the lowered rate. At 1 the values are the wrapped
    schedule's, bit for bit."""

    def __init__(self, inner, scale: tf.Variable):
        self.inner, self.scale = inner, scale

    def __call__(self, step):
        value = self.inner(step) if callable(self.inner) else tf.constant(float(self.inner))
        return tf.cast(value, tf.float32) * self.scale

    def get_config(self):
        return {}


def train_schedule(
    cfg: DictConfig, progress: tf.Variable | None = None, scale: tf.Variable | None = None
):
    """The run's schedule: :func:`make_schedule`, over the time budget (:class:`BudgetSchedule`)
    when ``progress`` is given (``train.max_minutes`` is set), times ``scale``
    (:class:`ScaledSchedule`) when given."""
    schedule = make_schedule(cfg)
    if progress is not None:
        schedule = BudgetSchedule(schedule, cfg.train.steps, progress)
    if scale is not None:
        schedule = ScaledSchedule(schedule, scale)
    return schedule


def lr_at(schedule, step) -> float:
    """The learning rate of ``schedule`` (a schedule or a constant) at ``step``."""
    value = schedule(step) if callable(schedule) else schedule
    return float(tf.convert_to_tensor(value).numpy())


def current_lr(optimizer) -> float:
    """The learning rate of the optimizer's current iteration (Keras 3's
    ``optimizer.learning_rate``, the schedule's value there; under loss scaling the inner
    optimizer's)."""
    value = optimizer.learning_rate
    value = getattr(value, "value", value)  # a Keras variable's (a constant learning rate)
    return float(tf.convert_to_tensor(value).numpy())  # also a MirroredVariable's
