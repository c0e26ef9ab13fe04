"""The ways of training the trainer composes, one part each: the pixel-loss training of
:mod:`sr.train.step` (the default) and the GAN stage of :mod:`sr.train.gan`. The one place that
chooses between them from the config, so that :mod:`sr.train.loop` names none of them."""

from __future__ import annotations

import logging

import tensorflow as tf

from sr.core.errors import ConfigError
from sr.train.gan import AdversarialTraining
from sr.train.gan_loss import RealESRGANLoss
from sr.train.pretrained import init_discriminator
from sr.train.step import PixelTraining

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log


def training_part(cfg, loss, channels: int, mixed: bool, lr_scale: tf.Variable):
    """The trainer's part for ``cfg``: :class:`sr.train.step.PixelTraining` without a
    discriminator, else :class:`sr.train.gan.AdversarialTraining` (built in the strategy's scope).

    Raises:
        ConfigError: a discriminator with a loss that is not ``loss=realesrgan``; a missing or
            unreachable VGG19 weights file (before any step).
    """
    node = cfg.get("discriminator")
    if node is None or not node.get("_target_"):
        return PixelTraining()
    if not isinstance(loss, RealESRGANLoss):
        raise ConfigError("discriminator=unet_sn needs loss=realesrgan (the GAN's loss terms)")
    if not cfg.train.get("init_from") and not cfg.get("resume"):
        log.warning(
            "the GAN stage starts from random generator weights: Real-ESRGAN starts it from an "
            "L1 model (train.init_from=<a run of experiment=cpu20_realesrnet or realesrnet_x4>)"
        )
    part = AdversarialTraining(cfg, loss, channels, mixed, lr_scale)
    init_discriminator(part.discriminator, cfg)  # discriminator.init_from=FILE
    return part
