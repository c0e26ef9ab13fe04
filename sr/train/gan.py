"""The adversarial part of the trainer: chosen when the loss has a GAN term
(``loss.terms.gan``) and a discriminator is configured (``discriminator=unet_sn``; the one rule:
``sr.config.check_adversary``), as Real-ESRGAN's GAN stage (``loss=realesrgan``). A part the
trainer composes, as it composes the generator-only training of :mod:`sr.train.parts`.

:func:`sr.train.parts.training_part` gives the trainer its part. This one owns what the GAN
adds: the discriminator and its optimizer (in every checkpoint: resume, rollback and
``checkpoints/best`` cover them), its step (:class:`GANStep`), its TensorBoard scalars, the
guard's collapse rule and the rule of ``checkpoints/best`` (the lowest NIQE of the validation
SR: a GAN lowers PSNR on purpose). The trainer's loop has no GAN branch.

The update is Real-ESRGAN's ``optimize_parameters`` (``realesrgan/models/realesrgan_model.py``):
the generator's step on the weighted sum of the loss's terms in their order (``loss=realesrgan``:
``1 L1 + 1 perceptual + 0.1 GAN(D(SR), real)``), then the discriminator's on its real and fake
terms (``sr.losses.gan``) with the same (detached) SR and the discriminator's weights before its
update; both gradients come from one forward pass here, which is the same arithmetic (the
generator's step does not change the discriminator's weights). The discriminator is called
three times in training mode, in the official order: D(SR) for the generator, then D(HR) and
D(SR) for itself, so its spectral norm (:class:`sr.models.spectral_norm.SpectralNorm`) runs
three power iterations per step, each call's sigma from its own, as PyTorch's.
"""

from __future__ import annotations

import logging

import hydra
import keras
import tensorflow as tf

from sr.core.batch import Batch, SharpenedBatch
from sr.losses import Loss
from sr.train.best import NIQE
from sr.train.schedule import ScaledSchedule
from sr.train.step import StepArgs, TrainStep, all_finite, clip_by_global_norm

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log

D_TERMS = ("d_real_loss", "d_fake_loss", "d_real", "d_fake")
"""What :class:`GANStep` records each step after the loss's terms (batch means): the
discriminator's two terms, and its mean logit on the real images (``D(real)``) and on the SR
(``D(fake)``)."""


def gan_terms(loss: Loss) -> tuple[str, ...]:
    """What the GAN step records for ``loss``: each term (unweighted, in order), then
    :data:`D_TERMS` (``loss=realesrgan``: ``l1, perceptual, gan, d_real_loss, ...``)."""
    return (*loss.names, *D_TERMS)


class GANStep(TrainStep):
    """One generator and one discriminator update on a (distributed) ``sr.core.batch.Batch``
    ``(lq, gt)`` or ``SharpenedBatch`` ``(lq, gt_usm, gt)`` (the HR as it is beside the
    sharpened target, when a term takes it: ``target: gt``; each term takes
    ``batch.target(term.usm)``). The arguments are :class:`sr.train.step.TrainStep`'s, with the
    ``loss`` an :class:`sr.losses.Loss` with a GAN term, plus the ``discriminator`` and its
    ``d_optimizer``; its ``window`` records :func:`gan_terms` (one is made without it).
    ``train.clip_norm`` clips the generator's gradient. The step's loss (the divergence guard's,
    the log's) is the weighted sum of the pixel terms (``loss=realesrgan``: its L1 term); of
    the other non-GAN terms without one, of the GAN term without any.

    Raises:
        ValueError: a ``window`` whose terms are not :func:`gan_terms`.
    """

    def __init__(self, *args, discriminator: keras.Model, d_optimizer, **kwargs):
        self.discriminator, self.d_optimizer = discriminator, d_optimizer
        super().__init__(*args, **kwargs)

    def recorded_terms(self) -> tuple[str, ...]:
        """:func:`gan_terms` of the loss."""
        return gan_terms(self.loss)

    def _gradients(self, batch: Batch | SharpenedBatch):
        """Forward and backward pass of one replica on its ``batch``: its shares of the guard's
        loss and :func:`gan_terms` (float32 ``[1 + len(terms)]``), the generator's and the
        discriminator's gradients."""
        loss, d, gan = self.loss, self.discriminator, self.loss.adversarial
        with tf.GradientTape(persistent=True) as tape:
            sr = tf.cast(self.model(batch.lq, training=True), tf.float32)
            content = dict(zip(loss.content, self.content_terms(batch, sr, loss.content)))
            values = {**content, gan: self.share(gan.generator(d(sr, training=True)))}
            g_loss = None
            for term in loss.terms:  # in the config's order
                weighted = term.weight * values[term]
                g_loss = weighted if g_loss is None else g_loss + weighted
            real_logits = d(tf.cast(batch.target(gan.usm), tf.float32), training=True)
            fake_logits = d(tf.stop_gradient(sr), training=True)
            d_real, d_fake = (self.share(t) for t in gan.discriminator(real_logits, fake_logits))
            scaled_g = self.optimizer.scale_loss(g_loss)
            scaled_d = self.d_optimizer.scale_loss(d_real + d_fake)
        g_grads = tape.gradient(scaled_g, self.model.trainable_variables)
        d_grads = tape.gradient(scaled_d, d.trainable_variables)
        del tape
        means = [self.share(tf.reduce_mean(tf.cast(x, tf.float32), axis=[1, 2, 3]))
                 for x in (real_logits, fake_logits)]  # fmt: skip
        guard = self.guard_loss(values)
        terms = [values[t] for t in loss.terms]
        return tf.stack([guard, *terms, d_real, d_fake, *means]), g_grads, d_grads

    def guard_loss(self, values: dict) -> tf.Tensor:
        """The loss the guard judges and the log shows: the weighted sum of the pixel terms
        (``loss=realesrgan``: 1 x its L1 term), else of the other non-GAN terms, else the GAN
        term's."""
        loss = self.loss
        chosen = loss.pixel_terms() or loss.content or [loss.adversarial]
        total = chosen[0].weight * values[chosen[0]]
        for term in chosen[1:]:
            total += term.weight * values[term]
        return total

    def _replica_step(self, batch: Batch | SharpenedBatch):
        """One replica's share of the GAN update on its ``batch``; returns its shares of the
        guard loss and :func:`gan_terms`, and whether the step is finite on every replica
        (float32 1 or 0)."""
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
        """Record the step's guard loss and its terms (:func:`gan_terms`) in the loss window;
        returns the guard loss."""
        self.window.add(terms[0], terms[1:])
        return terms[0]


class AdversarialTraining:
    """The adversarial part of the trainer: a GAN term (``loss.terms.gan``) and a
    discriminator (``discriminator=unet_sn``), as ``loss=realesrgan``'s GAN stage.

    Args:
        cfg: the composed config (``discriminator``, ``train.guard``).
        loss: the run's :class:`sr.losses.Loss`, with a GAN term (its terms are built here: the
            perceptual term's VGG19).
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

    def __init__(self, cfg, loss: Loss, channels: int, mixed: bool, lr_scale):
        d = cfg.discriminator
        loss.build()  # the VGG19: a missing weights file is refused here, before any step
        self.loss, self.guard_on = loss, bool(cfg.train.guard)
        self.terms = gan_terms(loss)  # what its step records in the loss window
        self.balance = loss.adversarial.balance  # the discriminator's loss at balance
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
            "GAN terms: %s  |  D loss real %.4f fake %.4f  D(real) %+.3f  D(fake) %+.3f",
            "  ".join(f"{k} {m[k]:.4f}" for k in self.loss.names), *(m[k] for k in D_TERMS),
        )  # fmt: skip
        with writer.as_default(step=step):
            for key, value in m.items():
                tf.summary.scalar(f"gan/{key}", value)

    def judge(self, step: int) -> str | None:
        """The discriminator's rules on the last log window (None: accepted, or nothing to
        judge): its mean loss (real + fake; at balance 2 ln 2 = 1.39 vanilla, 0.5 lsgan, 2
        hinge) below
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
                f"balance is {self.balance:.3g}; {logits}: its updates blew up, and its GAN term "
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
                "loss.terms.gan.weight, or a lower discriminator.collapse_loss "
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
                "loss.terms.gan.weight or train.lr, or a larger train.guard_gan_val_drop if the "
                "rule misjudged it"
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
