"""L1 + perceptual training without a discriminator (``loss=realesrgan discriminator=none
loss.gan_weight=0``): a part the trainer composes, as the pixel-loss training of
:mod:`sr.train.step` and the GAN stage of :mod:`sr.train.gan`.

Many recipes train a perceptual-only stage between the L1 model and the GAN (ESRGAN's
"perceptual" baselines; BasicSR's ``SRModel`` with a ``perceptual_opt`` and no discriminator).
The generator's loss is Real-ESRGAN's without its GAN term: ``l1_weight L1(target_l1, SR) +
perceptual_weight perceptual(target_percep, SR)`` (:class:`sr.train.gan_loss.RealESRGANLoss`),
each term on the target its ``loss.*_gt_usm`` key names (``batch.target(key)``), so that the
batch is an ``sr.core.batch.Batch`` ``(lq, gt)`` or ``SharpenedBatch`` ``(lq, gt_usm, gt)`` as in
the GAN stage.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from sr.core.batch import Batch, SharpenedBatch
from sr.train.best import NIQE, PSNR
from sr.train.gan_loss import RealESRGANLoss
from sr.train.step import StepArgs, TrainStep
from sr.train.window import terms_window

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log

TERMS = ("l1", "perceptual")
"""What :class:`PerceptualStep` records each step (batch means, unweighted)."""


class PerceptualStep(TrainStep):
    """One generator update on ``l1_weight L1 + perceptual_weight perceptual`` for a
    (distributed) ``sr.core.batch.Batch`` ``(lq, gt)`` or ``SharpenedBatch``
    ``(lq, gt_usm, gt)``: float32 ``[B, h, w, C]`` and ``[B, s h, s w, C]`` in [0, 1], ``gt``
    the sharpened HR with ``degradation.gt_usm`` unless ``gt_usm`` is there. The arguments are
    :class:`sr.train.step.TrainStep`'s, with the ``loss`` a
    :class:`sr.train.gan_loss.RealESRGANLoss` whose VGG is built; its ``window`` records
    :data:`TERMS` (one is made without it). The step's loss (the divergence guard's, the log's)
    is the weighted sum that is minimised.

    Raises:
        ValueError: a ``window`` whose terms are not :data:`TERMS`.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.window = terms_window(self.window, TERMS, not self.skip_nonfinite)

    def _gradients(self, batch: Batch | SharpenedBatch):
        """Forward and backward pass of one replica on its ``batch``: its shares of
        ``[loss, l1, perceptual]`` (float32 ``[3]``) and the gradients of the (scaled) loss."""
        loss = self.loss
        share = lambda x: tf.nn.compute_average_loss(x, global_batch_size=self.global_batch)  # noqa: E731
        with tf.GradientTape() as tape:
            sr = tf.cast(self.model(batch.lq, training=True), tf.float32)
            l1 = share(loss.l1(batch.target(loss.l1_gt_usm), sr))
            percep = share(loss.perceptual(batch.target(loss.percep_gt_usm), sr))
            total = loss.l1_weight * l1 + loss.perceptual_weight * percep
            scaled = self.optimizer.scale_loss(total)
        grads = tape.gradient(scaled, self.model.trainable_variables)
        return tf.stack([total, l1, percep]), grads

    def record(self, terms: tf.Tensor) -> tf.Tensor:
        """Record the weighted loss (the guard's) and the unweighted terms (:data:`TERMS`) in
        the loss window; returns the weighted loss."""
        self.window.add(terms[0], terms[1:])
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

    terms = TERMS  # what its step records in the loss window, beside the loss

    def __init__(self, loss: RealESRGANLoss):
        loss.build()
        self.loss = loss
        perceptual = loss.perceptual_weight > 0
        self.best = NIQE if perceptual else PSNR
        self.psnr_reference = "start" if perceptual else "best"
        self.step: PerceptualStep | None = None
        log.info("L1 + perceptual training without a discriminator: loss %s", loss.describe())

    def checkpoint_parts(self) -> dict:
        """What the part adds to every checkpoint: nothing (the VGG is fixed)."""
        return {}

    def variables(self) -> list:
        """Variables of the part checked finite before every save: none."""
        return []

    def make_step(self, args: StepArgs) -> PerceptualStep:
        """The :class:`PerceptualStep` of ``args``; ``args.window`` made with :attr:`terms`."""
        self.step = args.build(PerceptualStep)
        return self.step

    def log_window(self, step: int, writer) -> None:
        """The terms' log line and ``terms/`` scalars of the steps since the last one."""
        means = self.step.window.read_terms()
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
            self.step.window.read_terms()

    def describe(self) -> str:
        return "none"
