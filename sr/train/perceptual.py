"""L1 + perceptual training without a discriminator (``loss=realesrgan discriminator=none
loss.gan_weight=0``): a part the trainer composes, as the pixel-loss training of
:mod:`sr.train.step` and the GAN stage of :mod:`sr.train.gan`.

Many recipes train a perceptual-only stage between the L1 model and the GAN (ESRGAN's
"perceptual" baselines; BasicSR's ``SRModel`` with a ``perceptual_opt`` and no discriminator).
The generator's loss is Real-ESRGAN's without its GAN term: ``l1_weight L1(target_l1, SR) +
perceptual_weight perceptual(target_percep, SR)`` (:class:`sr.train.gan_loss.RealESRGANLoss`),
each term on the target its ``loss.*_gt_usm`` key names, so that the batch is ``(lr, target)``
or ``(lr, target, hr)`` as in the GAN stage.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from sr.train.best import NIQE, PSNR
from sr.train.gan import TermWindow
from sr.train.gan_loss import RealESRGANLoss
from sr.train.step import TrainStep

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log

TERMS = ("l1", "perceptual")
"""What :class:`PerceptualStep` records each step (batch means, unweighted)."""


class PerceptualStep(TrainStep):
    """One generator update on ``l1_weight L1 + perceptual_weight perceptual`` for a
    (distributed) batch ``(lr, target)`` or ``(lr, target, hr)``: float32 ``[B, h, w, C]``,
    ``[B, s h, s w, C]`` (and ``[B, s h, s w, C]``) in [0, 1], the target the sharpened HR with
    ``degradation.gt_usm``. The arguments are :class:`sr.train.step.TrainStep`'s, with the
    ``loss`` a :class:`sr.train.gan_loss.RealESRGANLoss` whose VGG is built, plus the
    :class:`sr.train.gan.TermWindow` of :data:`TERMS`. The step's loss (the divergence guard's,
    the log's) is the weighted sum that is minimised."""

    def __init__(self, *args, terms: TermWindow | None = None, **kwargs):
        self.terms = terms or TermWindow(TERMS)  # create it in the strategy's scope
        super().__init__(*args, **kwargs)

    def _gradients(self, lr, target, hr=None):
        """Forward and backward pass of one replica: its shares of ``[loss, l1, perceptual]``
        (float32 ``[3]``) and the gradients of the (scaled) loss."""
        loss, hr = self.loss, target if hr is None else hr
        share = lambda x: tf.nn.compute_average_loss(x, global_batch_size=self.global_batch)  # noqa: E731
        with tf.GradientTape() as tape:
            sr = tf.cast(self.model(lr, training=True), tf.float32)
            l1 = share(loss.l1(target if loss.l1_gt_usm else hr, sr))
            percep = share(loss.perceptual(target if loss.percep_gt_usm else hr, sr))
            total = loss.l1_weight * l1 + loss.perceptual_weight * percep
            scaled = self.optimizer.scale_loss(total)
        grads = tape.gradient(scaled, self.model.trainable_variables)
        return tf.stack([total, l1, percep]), grads

    def record(self, terms: tf.Tensor) -> tf.Tensor:
        """Record the unweighted terms (:attr:`terms`) and the weighted loss (the guard's
        window); returns the weighted loss."""
        self.terms.add(terms[1:])
        if self.window is not None:
            self.window.add(terms[0])
        return terms[0]


class PerceptualTraining:
    """The trainer's part for ``loss=realesrgan`` without a discriminator (its GAN weight 0).

    Args:
        loss: the run's :class:`sr.train.gan_loss.RealESRGANLoss`; its VGG19 is built here, so
            that a missing weights file is refused before any step.

    With a perceptual term (``loss.perceptual_weight > 0``), the rules are the GAN stage's: the
    term trades PSNR for texture, so ``checkpoints/best`` keeps the lowest NIQE of the
    validation SR (:attr:`best`) and the guard judges the validation PSNR against the stage's
    start, not the best so far (:attr:`psnr_reference`: ``start``, as the GAN stage's,
    ``train.guard_gan_val_drop``); with none, the pixel loss's (the highest PSNR, judged against
    the best so far).

    Raises:
        ConfigError: the VGG19 weights file is missing or not VGG19's (from ``loss.build()``).
    """

    def __init__(self, loss: RealESRGANLoss):
        loss.build()
        self.loss = loss
        perceptual = loss.perceptual_weight > 0
        self.best = NIQE if perceptual else PSNR
        self.psnr_reference = "start" if perceptual else "best"
        self.terms = TermWindow(TERMS)  # here, in the strategy's scope
        self.step: PerceptualStep | None = None
        log.info("L1 + perceptual training without a discriminator: loss %s", loss.describe())

    def checkpoint_parts(self) -> dict:
        """What the part adds to every checkpoint: nothing (the VGG is fixed)."""
        return {}

    def variables(self) -> list:
        """Variables of the part checked finite before every save: none."""
        return []

    def make_step(self, *args, **kwargs) -> PerceptualStep:
        """The :class:`PerceptualStep` (arguments: :class:`sr.train.step.TrainStep`'s)."""
        self.step = PerceptualStep(*args, terms=self.terms, **kwargs)
        return self.step

    def log_window(self, step: int, writer) -> None:
        """The terms' log line and ``terms/`` scalars of the steps since the last one."""
        means = self.step.terms.read()
        if means is None:
            return
        log.info("terms: l1 %.4f  perceptual %.4f", means["l1"], means["perceptual"])
        with writer.as_default(step=step):
            for key, value in means.items():
                tf.summary.scalar(f"terms/{key}", value)

    def judge(self, step: int) -> str | None:
        """No rule beyond the guard's own: None."""
        return None

    def advice(self, reason: str) -> str | None:
        """No advice beyond the trainer's (``train.lr``): None."""
        return None

    def forget(self) -> None:
        """After a rollback: the diverged steps' terms are dropped."""
        if self.step is not None:
            self.step.terms.read()

    def describe(self) -> str:
        return "none"
