"""The optimizers, chosen by the ``optimizer`` config group (``conf/optimizer/<name>.yaml``, whose
``_target_`` names a class here; its schema is in :mod:`sr.config`): Adam and AdamW (Keras 3) on
the learning-rate schedule of :mod:`sr.train.schedule`, with the weight averaging of
``train.ema`` and loss scaling under mixed precision. Adding an optimizer is one class here
(its :meth:`OptimizerChoice.make`) and one YAML there."""

from __future__ import annotations

import hydra
import keras
import tensorflow as tf
from omegaconf import DictConfig

from sr.train.schedule import train_schedule


class WarmupAverage:
    """Keras's moving average of the weights (``use_ema=True``) whose decay warms up: the update
    after n earlier ones uses ``min(ema_momentum, (1 + n) / (10 + n))``, the ``num_updates`` rule
    of ``tf.train.ExponentialMovingAverage``. With a fixed 0.999 the average of a run of 1,200
    steps (the 20-minute recipe on a slow machine) still weighs the first steps' weights by
    e^-1.2 = 30 % and scores 1.9 dB under the trained weights on Set5; with the warm-up it
    averages over about the last (10 + n) / 9 steps until the decay reaches its value (n = 8,990
    for 0.999), then over the last 1 / (1 - decay).

    ``ema_warmup=False`` (``train.ema_warmup=false``) keeps the decay fixed from the first
    update, as BasicSR's ``model_ema(decay=0.999)`` of Real-ESRGAN's recipes
    (``basicsr/models/base_model.py``). One difference stays: BasicSR's average starts from the
    weights before the first update, Keras's is the weights after it (Keras 3's rule for the
    first update), so the two averages differ by ``decay^n`` times one update.

    Mixed into a Keras optimizer class (first base); :attr:`averages` holds the averages once
    built, one per variable of ``build``'s list and in its order."""

    averages: list | None = None

    def __init__(self, *args, ema_warmup: bool = True, **kwargs):
        super().__init__(*args, **kwargs)  # Keras's first: it guards its attributes
        self._ema_warmup = bool(ema_warmup)

    @property
    def ema_momentum(self):
        fixed = not getattr(self, "_ema_warmup", True)
        if fixed or not getattr(self, "built", False):  # Keras's __init__: no iterations yet
            return self._ema_decay
        n = keras.ops.cast(self.iterations, "float32")
        return keras.ops.minimum(self._ema_decay, (1.0 + n) / (10.0 + n))

    @ema_momentum.setter
    def ema_momentum(self, value):
        self._ema_decay = value

    def add_optimizer_variables(self, trainable_variables, name, initializer="zeros"):
        """Keras's, keeping the averages (the variables Keras's ``build`` creates as
        ``"average"``; Keras 3 public API, not tracked twice: ``build`` does not track)."""
        created = super().add_optimizer_variables(trainable_variables, name, initializer)
        if name == "average":
            self.averages = list(created)
        return created

    def get_config(self):
        return {
            **super().get_config(),
            "ema_momentum": self._ema_decay,
            "ema_warmup": self._ema_warmup,
        }


@keras.saving.register_keras_serializable(package="sr")
class AveragingAdam(WarmupAverage, keras.optimizers.Adam):
    """Adam with the warmed-up weight average of :class:`WarmupAverage`."""


@keras.saving.register_keras_serializable(package="sr")
class AveragingAdamW(WarmupAverage, keras.optimizers.AdamW):
    """AdamW with the warmed-up weight average of :class:`WarmupAverage`."""


class OptimizerChoice:
    """An option of the ``optimizer`` group: its keys, and the Keras optimizer they make."""

    name = ""
    plain: type = keras.optimizers.Adam  # without train.ema
    averaging: type = AveragingAdam  # with train.ema

    def __init__(self, beta_1: float = 0.9, beta_2: float = 0.999):
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)

    def arguments(self) -> dict:
        return {"beta_1": self.beta_1, "beta_2": self.beta_2}

    def make(
        self, schedule, ema: float | None, ema_warmup: bool = True
    ) -> keras.optimizers.Optimizer:
        """The Keras optimizer on ``schedule``; with ``ema`` (a decay) it keeps the averages,
        whose decay warms up unless ``ema_warmup`` is false (:class:`WarmupAverage`)."""
        if ema is None:
            return self.plain(schedule, **self.arguments())
        return self.averaging(
            schedule, **self.arguments(), use_ema=True, ema_momentum=ema, ema_warmup=ema_warmup
        )

    def describe(self) -> str:
        """``adamw(beta_1=0.9, beta_2=0.999, weight_decay=0.004)`` (TensorBoard HParams)."""
        return f"{self.name}({', '.join(f'{k}={v}' for k, v in self.arguments().items())})"


class Adam(OptimizerChoice):
    """Adam (``beta_1``, ``beta_2``): the default, the optimizer of EDSR's recipe."""

    name = "adam"


class AdamW(OptimizerChoice):
    """AdamW: Adam with decoupled weight decay ``weight_decay`` (Keras's, on every weight)."""

    name = "adamw"
    plain, averaging = keras.optimizers.AdamW, AveragingAdamW

    def __init__(self, beta_1: float = 0.9, beta_2: float = 0.999, weight_decay: float = 0.004):
        super().__init__(beta_1, beta_2)
        self.weight_decay = float(weight_decay)

    def arguments(self) -> dict:
        return {**super().arguments(), "weight_decay": self.weight_decay}


def optimizer_choice(cfg: DictConfig) -> OptimizerChoice:
    """The ``optimizer`` group's option of the composed config, instantiated."""
    return hydra.utils.instantiate(cfg.optimizer)


def make_optimizer(
    cfg: DictConfig, mixed: bool, progress: tf.Variable | None = None, schedule=None
) -> keras.optimizers.Optimizer:
    """The ``optimizer`` group's optimizer on ``schedule`` (default
    :func:`sr.train.schedule.train_schedule`: over the time budget when ``progress`` is given).

    With ``train.ema=D`` it also keeps an exponential moving average of the weights (
    :class:`WarmupAverage`): after each applied update, ``average = d average + (1 - d) weight``
    (``average = weight`` after the first) with ``d = min(D, (1 + n) / (10 + n))``, n the updates
    before it; the weight averaging of BasicSR's recipes (``ema_decay``, 0.999) with
    TensorFlow's warm-up, or with ``train.ema_warmup=false`` ``d = D`` from the first update,
    as BasicSR. A step skipped for non-finite gradients (``train.on_nonfinite=skip``,
    loss scaling) leaves the average as it is. :func:`ema_variables` gives the averages.

    With ``mixed`` (``train.precision=float16`` in force: :mod:`sr.train.precision`) it is
    wrapped in Keras's ``LossScaleOptimizer`` (a dynamic loss scale: the loss times the scale
    before the gradients, the gradients divided by it, a step with non-finite gradients skipped
    and the scale halved); bfloat16 needs none."""
    if schedule is None:
        schedule = train_schedule(cfg, progress)
    ema = cfg.train.get("ema")
    opt = optimizer_choice(cfg).make(
        schedule, None if ema is None else float(ema), bool(cfg.train.get("ema_warmup", True))
    )
    return keras.optimizers.LossScaleOptimizer(opt) if mixed else opt


def ema_variables(optimizer) -> list | None:
    """The moving averages of a built optimizer of :func:`make_optimizer`, one per trainable
    variable of the model, in the order of ``model.trainable_variables``; None without
    ``train.ema``. (``tests/test_ema.py`` checks them against the averaging formula.)"""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if not inner.use_ema:
        return None
    return list(inner.averages)
