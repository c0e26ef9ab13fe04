"""The ways of training the trainer composes, one part each: :class:`GeneratorTraining` (one
model on the sum of its loss terms: the default) and the adversarial part of :mod:`sr.train.gan`
(the GAN term and the discriminator). What is configured chooses: a GAN term
(``loss.terms.gan``), or a discriminator, means the adversarial part; the rule that they come
together is :func:`sr.config.check_adversary`, the one declared beside the schemas. The loop
(:mod:`sr.train.loop`) names none of them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol, runtime_checkable

import tensorflow as tf
from omegaconf import OmegaConf

from sr.losses import Loss
from sr.losses.rules import adversary_rule
from sr.train.best import NIQE, PSNR, BestRule
from sr.train.gan import AdversarialTraining
from sr.train.pretrained import init_discriminator
from sr.train.step import StepArgs, TrainStep

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log


@runtime_checkable
class TrainingPart(Protocol):
    """What the trainer (``sr.train.loop``, ``rollback``, ``saving``, ``report``) asks of a way of
    training; :func:`training_part` returns one. A new way of training implements every member
    (``tests/test_parts.py`` checks each part against this list).

    Attributes:
        best: the rule of ``checkpoints/best`` (``sr.train.best.PSNR`` or ``NIQE``).
        psnr_reference: what a validation collapse is judged against: ``best`` (the best
            validation PSNR so far, ``train.guard_val_drop``) or ``start`` (the stage's start,
            its ``train.init_from`` weights, ``train.guard_gan_val_drop``).
        terms: the names of the terms its step records in the loss window beside the guard's
            loss (``()``: none); the trainer makes the window with them
            (:class:`sr.train.window.LossWindow`).
    """

    best: BestRule
    psnr_reference: str
    terms: tuple[str, ...]

    def checkpoint_parts(self) -> dict:
        """Trackables added to every checkpoint (``{"discriminator": ..., ...}``)."""
        ...

    def variables(self) -> list:
        """Variables checked finite before every save, beside the model's."""
        ...

    def make_step(self, args: StepArgs) -> TrainStep:
        """The run's step: a :class:`sr.train.step.TrainStep` (or subclass) of ``args``;
        ``args.window`` made with :attr:`terms`."""
        ...

    def log_window(self, step: int, writer) -> None:
        """The part's log line and TensorBoard scalars of the steps since the last call."""
        ...

    def judge(self, step: int) -> str | None:
        """The part's own guard verdict at a log step (its reason), or None."""
        ...

    def advice(self, reason: str) -> str | None:
        """The keys to change after the guard stopped the run for ``reason``, or None."""
        ...

    def forget(self) -> None:
        """Drop what the diverged steps left (after a rollback)."""
        ...

    def describe(self) -> str:
        """The discriminator, as the run's summary names it (``none`` without one)."""
        ...


class GeneratorTraining:
    """The trainer's part without a discriminator: one model, one optimizer, the
    :class:`sr.train.step.TrainStep`, which sums the loss's terms (``loss=l1``; ``loss=charbonnier
    +loss.terms.fft.weight=0.05``; ``loss=realesrgan ~loss.terms.gan``: L1 + perceptual) and,
    with more than one, records each (:attr:`terms`), which :meth:`log_window` logs and writes
    as ``terms/<name>`` scalars.

    Args:
        loss: the run's :class:`sr.losses.Loss`; its terms are built here (the perceptual
            term's VGG19), so that a missing weights file is refused before any step.

    With a term of a network's features (``perceptual``, weight > 0) the rules are the GAN
    stage's: the term trades PSNR for texture, so ``checkpoints/best`` keeps the lowest NIQE of
    the validation SR (:attr:`best`) and the guard judges the validation PSNR against the
    stage's start (:attr:`psnr_reference` ``start``, ``train.guard_gan_val_drop``); without, the
    highest PSNR, judged against the best so far.

    Raises:
        ConfigError: a weights file of a term is missing or not its network's.
    """

    def __init__(self, loss: Loss):
        loss.build()
        self.loss = loss
        self.best = NIQE if loss.feature else PSNR
        self.psnr_reference = "start" if loss.feature else "best"
        self.terms = tuple(loss.names) if len(loss.names) > 1 else ()
        self.step: TrainStep | None = None
        if self.terms:
            log.info("training on the loss terms %s", loss.describe())

    def checkpoint_parts(self) -> dict:
        """What the part adds to every checkpoint: nothing (a VGG is fixed)."""
        return {}

    def variables(self) -> list:
        """Variables of the part checked finite before every save: none."""
        return []

    def make_step(self, args: StepArgs) -> TrainStep:
        """The :class:`sr.train.step.TrainStep` of ``args``; ``args.window`` made with
        :attr:`terms`."""
        self.step = args.build(TrainStep)
        return self.step

    def log_window(self, step: int, writer) -> None:
        """With more than one term: the terms' log line (``terms: charbonnier 0.0123  fft
        0.0456``, unweighted batch means) and ``terms/<name>`` scalars of the steps since the
        last one."""
        means = self.step.window.read_terms() if self.terms else None
        if means is None:
            return
        log.info("terms: %s", "  ".join(f"{k} {v:.4f}" for k, v in means.items()))
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
        if self.step is not None and self.terms:
            self.step.window.read_terms()

    def describe(self) -> str:
        return "none"


def training_part(
    cfg, loss: Loss, channels: int, mixed: bool, lr_scale: tf.Variable
) -> TrainingPart:
    """The trainer's part for ``cfg`` and its ``loss`` (built in the strategy's scope): the
    adversarial part (:class:`sr.train.gan.AdversarialTraining`) for a GAN term with a
    discriminator, :class:`GeneratorTraining` otherwise.

    Raises:
        ConfigError: a GAN term without a discriminator or the other way round (the one rule,
            :func:`sr.losses.rules.adversary_rule`); a missing or unreachable VGG19 weights file
            (before any step).
    """
    has_d = bool(OmegaConf.select(cfg, "discriminator._target_", default=None))
    adversary_rule([loss.adversarial.name] if loss.adversarial else [], has_d)
    if loss.adversarial is None:
        return GeneratorTraining(loss)
    if not cfg.train.get("init_from") and not cfg.get("resume"):
        log.warning(
            "the GAN stage starts from random generator weights: Real-ESRGAN starts it from an "
            "L1 model (train.init_from=<a run of experiment=cpu20_realesrnet or realesrnet_x4>)"
        )
    warn_fresh_discriminator(cfg)
    part = AdversarialTraining(cfg, loss, channels, mixed, lr_scale)
    init_discriminator(part.discriminator, cfg)  # discriminator.init_from=FILE
    return part


def warn_fresh_discriminator(cfg) -> bool:
    """Warn (and return True) when a GAN stage starts a random discriminator against a
    generator that may be GAN-trained: ``train.init_from`` a weights file (a released
    RealESRGAN_x4plus.pth, say) or a run that had a discriminator, with no
    ``discriminator.init_from``, not on a resume. Real-ESRGAN's own fine-tune options
    (``finetune_realesrgan_x4plus.yml``) load both networks; a fresh discriminator fits a
    generator trained on L1 alone (a RealESRNet run or RealESRNet_x4plus.pth)."""
    init = cfg.train.get("init_from")
    if not init or cfg.get("resume") or OmegaConf.select(cfg, "discriminator.init_from"):
        return False
    path = Path(str(init))  # a run, or a checkpoint of one (<run>/checkpoints/ckpt-N)
    saved = [p / ".hydra" / "config.yaml" for p in (path, *path.parents[:2])]
    saved = [f for f in saved if f.is_file()]
    if saved and not OmegaConf.select(OmegaConf.load(saved[0]), "discriminator._target_"):
        return False  # an L1 (or perceptual) run: the official stage 2 starts from one
    log.warning(
        "train.init_from=%s with a discriminator of random weights (no discriminator.init_from):"
        " if that generator was trained with a GAN (RealESRGAN_x4plus.pth, a GAN run), its first"
        " steps train a fresh discriminator against it and the adversarial loss can pull it"
        " away; give the discriminator it was trained with (discriminator.init_from="
        "RealESRGAN_x4plus_netD.pth for the released model), as Real-ESRGAN's fine-tune"
        " options do",
        init,
    )
    return True
