"""The ways of training the trainer composes, one part each: the pixel-loss training of
:mod:`sr.train.step` (the default), L1 + perceptual training of :mod:`sr.train.perceptual` and
the GAN stage of :mod:`sr.train.gan`. The one place that chooses between them from the loss and
the discriminator together, so that :mod:`sr.train.loop` names none of them."""

from __future__ import annotations

import logging

import tensorflow as tf

from sr.core.errors import ConfigError
from sr.train.gan import AdversarialTraining
from sr.train.gan_loss import RealESRGANLoss
from sr.train.perceptual import PerceptualTraining
from sr.train.pretrained import init_discriminator
from sr.train.step import PixelTraining

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log


def training_part(cfg, loss, channels: int, mixed: bool, lr_scale: tf.Variable):
    """The trainer's part for ``cfg`` and its ``loss`` (built in the strategy's scope):

    - no discriminator, a pixel loss (``l1``, ``l2``, ...): :class:`sr.train.step.PixelTraining`;
    - no discriminator, ``loss=realesrgan`` with ``gan_weight=0``:
      :class:`sr.train.perceptual.PerceptualTraining` (L1 + perceptual);
    - ``discriminator=unet_sn``, ``loss=realesrgan``: :class:`sr.train.gan.AdversarialTraining`.

    Raises:
        ConfigError: a discriminator with a loss that is not ``loss=realesrgan``;
            ``loss=realesrgan`` with a GAN weight and no discriminator; a missing or
            unreachable VGG19 weights file (before any step).
    """
    node = cfg.get("discriminator")
    adversary = node is not None and bool(node.get("_target_"))
    gan_loss = isinstance(loss, RealESRGANLoss)
    if adversary and not gan_loss:
        raise ConfigError("discriminator=unet_sn needs loss=realesrgan (the GAN's loss terms)")
    if not adversary:
        if not gan_loss:
            return PixelTraining()
        if loss.gan_weight > 0:
            raise ConfigError(
                f"loss=realesrgan with loss.gan_weight={loss.gan_weight:g} needs a "
                "discriminator: add discriminator=unet_sn, or set loss.gan_weight=0"
            )
        return PerceptualTraining(loss)
    if not cfg.train.get("init_from") and not cfg.get("resume"):
        log.warning(
            "the GAN stage starts from random generator weights: Real-ESRGAN starts it from an "
            "L1 model (train.init_from=<a run of experiment=cpu20_realesrnet or realesrnet_x4>)"
        )
    part = AdversarialTraining(cfg, loss, channels, mixed, lr_scale)
    init_discriminator(part.discriminator, cfg)  # discriminator.init_from=FILE
    return part
