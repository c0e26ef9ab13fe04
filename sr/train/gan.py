"""The GAN stage of Real-ESRGAN (``discriminator=unet_sn`` with ``loss=realesrgan``): a part the
trainer composes, as it composes the pixel-loss training of :mod:`sr.train.step`.

:func:`sr.train.parts.training_part` gives the trainer its part:
:class:`sr.train.step.PixelTraining` for ``discriminator=none``, :class:`AdversarialTraining`
otherwise. The part owns what the GAN adds:
the discriminator and its optimizer (in every checkpoint: resume, rollback and
``checkpoints/best`` cover them), its step (:class:`GANStep`), its TensorBoard scalars, the
guard's collapse rule and the rule of ``checkpoints/best`` (the lowest NIQE of the validation
SR: a GAN lowers PSNR on purpose). The trainer's loop has no GAN branch.

The update is Real-ESRGAN's ``optimize_parameters`` (``realesrgan/models/realesrgan_model.py``):
the generator's step on ``l1_weight L1 + perceptual_weight perceptual + gan_weight BCE(D(SR),
1)``, then the discriminator's on ``BCE(D(HR), 1) + BCE(D(SR), 0)`` with the same (detached) SR
and the discriminator's weights before its update; both gradients come from one forward pass
here, which is the same arithmetic (the generator's step does not change the discriminator's
weights). The discriminator is called three times in training mode, in the official order: D(SR)
for the generator, then D(HR) and D(SR) for itself, so its spectral norm
(:class:`sr.models.spectral_norm.SpectralNorm`) runs three power iterations per step, each call's
sigma from its own, as PyTorch's.
"""

from __future__ import annotations

import logging

import hydra
import keras
import tensorflow as tf

from sr.core.batch import Batch, SharpenedBatch
from sr.train.best import NIQE
from sr.train.gan_loss import RealESRGANLoss
from sr.train.schedule import ScaledSchedule
from sr.train.step import StepArgs, TrainStep, all_finite, clip_by_global_norm
from sr.train.window import terms_window

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log

TERMS = ("l1", "perceptual", "gan", "d_real_loss", "d_fake_loss", "d_real", "d_fake")
"""What :class:`GANStep` records each step (batch means): the generator's unweighted L1,
perceptual and GAN terms, the discriminator's two cross-entropies, and its mean logit on the HR
(``D(real)``) and on the SR (``D(fake)``)."""


class GANStep(TrainStep):
    """One generator and one discriminator update on a (distributed) ``sr.core.batch.Batch``
    ``(lq, gt)`` or ``SharpenedBatch`` ``(lq, gt_usm, gt)`` (the HR as it is beside the
    sharpened target, when a term asks for it: ``loss.*_gt_usm``; each term takes
    ``batch.target(its key)``). The arguments are :class:`sr.train.step.TrainStep`'s, with the
    ``loss`` a :class:`sr.train.gan_loss.RealESRGANLoss`, plus the ``discriminator`` and its
    ``d_optimizer``; its ``window`` records :data:`TERMS` (one is made without it).
    ``train.clip_norm`` clips the generator's gradient. The step's loss (the divergence
    guard's, the log's) is the unweighted L1 term: the pixel loss.

    Raises:
        ValueError: a ``window`` whose terms are not :data:`TERMS`.
    """

    def __init__(self, *args, discriminator: keras.Model, d_optimizer, **kwargs):
        self.discriminator, self.d_optimizer = discriminator, d_optimizer
        super().__init__(*args, **kwargs)
        self.window = terms_window(self.window, TERMS, not self.skip_nonfinite)

    def _gradients(self, batch: Batch | SharpenedBatch):
        """Forward and backward pass of one replica on its ``batch``: its shares of
        :data:`TERMS` (float32 ``[7]``), the generator's and the discriminator's gradients."""
        loss, d = self.loss, self.discriminator
        share = lambda x: tf.nn.compute_average_loss(x, global_batch_size=self.global_batch)  # noqa: E731
        with tf.GradientTape(persistent=True) as tape:
            sr = tf.cast(self.model(batch.lq, training=True), tf.float32)
            l1 = share(loss.l1(batch.target(loss.l1_gt_usm), sr))
            percep = share(loss.perceptual(batch.target(loss.percep_gt_usm), sr))
            fake_g = d(sr, training=True)
            gan = share(loss.generator_gan(fake_g))
            g_loss = loss.l1_weight * l1 + loss.perceptual_weight * percep + loss.gan_weight * gan
            real_logits = d(batch.target(loss.gan_gt_usm), training=True)
            fake_logits = d(tf.stop_gradient(sr), training=True)
            d_real, d_fake = (share(t) for t in loss.discriminator(real_logits, fake_logits))
            scaled_g = self.optimizer.scale_loss(g_loss)
            scaled_d = self.d_optimizer.scale_loss(d_real + d_fake)
        g_grads = tape.gradient(scaled_g, self.model.trainable_variables)
        d_grads = tape.gradient(scaled_d, d.trainable_variables)
        del tape
        means = [share(tf.reduce_mean(tf.cast(x, tf.float32), axis=[1, 2, 3]))
                 for x in (real_logits, fake_logits)]  # fmt: skip
        return tf.stack([l1, percep, gan, d_real, d_fake, *means]), g_grads, d_grads

    def _replica_step(self, batch: Batch | SharpenedBatch):
        """One replica's share of the GAN update on its ``batch``; returns its shares of
        :data:`TERMS` and whether the step is finite on every replica (float32 1 or 0)."""
        terms, g_grads, d_grads = self.gradients(batch)
        if self.clip_norm is not None:
            unscale = tf.cast(self.optimizer.scale_loss(tf.constant(1.0)), tf.float32)
            g_grads = clip_by_global_norm(g_grads, float(self.clip_norm), unscale)
        generator = self.model.trainable_variables
        discriminator = self.discriminator.trainable_variables

        def update():
            self.optimizer.apply(g_grads, generator)
            self.d_optimizer.apply(d_grads, discriminator)
            return tf.constant(0.0)

        if not self.skip_nonfinite:
            update()
            return terms, tf.constant(1.0)
        finite = tf.logical_and(
            tf.reduce_all(tf.math.is_finite(terms)), all_finite([*g_grads, *d_grads])
        )
        context = tf.distribute.get_replica_context()
        bad = context.all_reduce(tf.distribute.ReduceOp.SUM, 1.0 - tf.cast(finite, tf.float32))
        tf.cond(bad == 0, update, lambda: tf.constant(0.0))
        return terms, tf.cast(bad == 0, tf.float32)

    def record(self, terms: tf.Tensor) -> tf.Tensor:
        """Record the step's pixel loss (the guard's) and its terms in the loss window; returns
        the pixel loss."""
        self.window.add(terms[0], terms)
        return terms[0]


class AdversarialTraining:
    """The GAN stage's part of the trainer (``discriminator=unet_sn``, ``loss=realesrgan``).

    Args:
        cfg: the composed config (``discriminator``, ``train.guard``).
        loss: the run's :class:`sr.train.gan_loss.RealESRGANLoss` (its VGG is built here).
        channels: the images' channels (1: Y, 3: RGB).
        mixed: mixed float16 is on (the discriminator's optimizer scales its loss).
        lr_scale: the divergence guard's learning-rate factor (scales the discriminator's rate
            too).

    The rule of ``checkpoints/best`` (:attr:`best`): the lowest NIQE of the validation SR
    (``sr.metrics.niqe``, of the averaged weights with ``train.ema``), as a GAN trades
    PSNR for texture. The guard judges the pixel loss, the discriminator's loss (its collapse
    and its explosion, :meth:`judge`) and the validation PSNR against the stage's start, not
    the best so far (:attr:`psnr_reference`: ``start``; ``train.guard_gan_val_drop``).
    """

    best = NIQE
    psnr_reference = "start"
    terms = TERMS  # what its step records in the loss window, beside the pixel loss

    def __init__(self, cfg, loss: RealESRGANLoss, channels: int, mixed: bool, lr_scale):
        d = cfg.discriminator
        loss.build()  # the VGG19: a missing weights file is refused here, before any step
        self.loss, self.guard_on = loss, bool(cfg.train.guard)
        self.collapse_loss = float(d.collapse_loss)
        self.explode_loss = float(d.get("explode_loss", 100.0))
        self.d_lr = float(d.lr)
        self.discriminator = hydra.utils.get_method(d._target_)(
            channels=channels, features=int(d.features), skip_connection=bool(d.skip_connection)
        )
        optimizer = keras.optimizers.Adam(
            ScaledSchedule(float(d.lr), lr_scale), beta_1=float(d.beta_1), beta_2=float(d.beta_2)
        )
        self.d_optimizer = keras.optimizers.LossScaleOptimizer(optimizer) if mixed else optimizer
        self.d_optimizer.build(self.discriminator.trainable_variables)
        self.step: GANStep | None = None
        self.means: dict[str, float] | None = None  # of the last log window, not yet judged
        log.info(
            "GAN stage: discriminator %s (%d parameters, Adam %g, betas %g/%g), loss %s",
            d._target_.rsplit(".", 1)[-1], self.discriminator.count_params(), d.lr, d.beta_1,
            d.beta_2, loss.describe(),
        )  # fmt: skip

    def checkpoint_parts(self) -> dict:
        """The discriminator and its optimizer, saved in every checkpoint."""
        return {"discriminator": self.discriminator, "d_optimizer": self.d_optimizer}

    def variables(self) -> list:
        """The variables checked finite before every save."""
        return [*self.discriminator.weights, *self.d_optimizer.variables]

    def make_step(self, args: StepArgs) -> GANStep:
        """The :class:`GANStep` of ``args`` with the part's discriminator and its optimizer;
        ``args.window`` made with :attr:`terms`."""
        self.step = args.build(
            GANStep, discriminator=self.discriminator, d_optimizer=self.d_optimizer
        )
        return self.step

    def log_window(self, step: int, writer) -> None:
        """The GAN's log line and ``gan/`` scalars (each term, D(real), D(fake)) of the steps
        since the last one."""
        self.means = self.step.window.read_terms()
        if self.means is None:
            return
        m = self.means
        log.info(
            "GAN terms: l1 %.4f  perceptual %.4f  gan %.4f  |  D loss real %.4f fake %.4f  "
            "D(real) %+.3f  D(fake) %+.3f", *(m[k] for k in TERMS),
        )  # fmt: skip
        with writer.as_default(step=step):
            for key, value in m.items():
                tf.summary.scalar(f"gan/{key}", value)

    def judge(self, step: int) -> str | None:
        """The discriminator's rules on the last log window (None: accepted, or nothing to
        judge): its mean loss (real + fake; 2 ln 2 = 1.39 at balance) below
        ``discriminator.collapse_loss`` (it wins: the generator's GAN term gives no signal) or
        above ``discriminator.explode_loss`` (its updates blew up: the GAN term misleads)."""
        means, self.means = self.means, None
        if not self.guard_on or means is None:
            return None
        d_loss = means["d_real_loss"] + means["d_fake_loss"]
        logits = f"D(real) {means['d_real']:+.2f}, D(fake) {means['d_fake']:+.2f}"
        if d_loss < self.collapse_loss:
            return (
                f"discriminator collapse: its mean loss in the window to step {step} is "
                f"{d_loss:.4g}, below discriminator.collapse_loss={self.collapse_loss:g} (it "
                f"wins: {logits}, and the generator's GAN term gives no signal)"
            )
        if not d_loss <= self.explode_loss:  # NaN and inf too
            return (
                f"discriminator explosion: its mean loss in the window to step {step} is "
                f"{d_loss:.4g}, above discriminator.explode_loss={self.explode_loss:g} (its "
                f"balance is 2 ln 2 = 1.39; {logits}: its updates blew up, and its GAN term "
                "misleads the generator)"
            )
        return None

    def advice(self, reason: str) -> str | None:
        """What to change after the guard stopped the run for ``reason`` when it is one of the
        GAN stage's verdicts (the discriminator's rules, the collapse below the stage's start):
        the discriminator's keys; None for the others (the trainer's ``train.lr`` advice)."""
        lower = f"a lower discriminator.lr (now {self.d_lr:g})"
        if reason.startswith("discriminator collapse"):
            return (
                f"Start the GAN stage again (train.init_from=) with {lower} or a higher "
                "loss.gan_weight, or a lower discriminator.collapse_loss "
                f"(now {self.collapse_loss:g}) if the rule misjudged it"
            )
        if reason.startswith("discriminator explosion"):
            return (
                f"Start the GAN stage again (train.init_from=) with {lower}, or a higher "
                f"discriminator.explode_loss (now {self.explode_loss:g}) if the rule misjudged it"
            )
        if reason.startswith("validation collapse of the GAN stage"):
            return (
                f"Start the GAN stage again (train.init_from=) with {lower}, a lower "
                "loss.gan_weight or train.lr, or a larger train.guard_gan_val_drop if the rule "
                "misjudged it"
            )
        return None

    def forget(self) -> None:
        """After a rollback: the diverged steps' terms are dropped."""
        if self.step is not None:
            self.step.window.read_terms()
        self.means = None

    def describe(self) -> str:
        """The discriminator and its parameter count (TensorBoard HParams)."""
        return f"{self.discriminator.name} ({self.discriminator.count_params()} parameters)"
