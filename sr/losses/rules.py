"""The config's rules of the ``loss`` group, without TensorFlow: the terms by their schemas, a
key a preset leaves at its default, and the one rule of the adversarial part (a GAN term and a
discriminator come together), which ``sr.config.check_adversary`` applies to a config and
``sr.train.parts.training_part`` to the built loss."""

from __future__ import annotations

import re

from omegaconf import DictConfig, OmegaConf

from sr.core.errors import ConfigError
from sr.losses import registry as loss_terms


def check_loss(cfg: DictConfig) -> None:
    """The ``loss.terms`` of ``cfg`` by their schemas (``sr.losses.registry.term_settings``),
    and a ``fft`` term's ``patch_factor`` against ``data.patch_size``.

    Raises:
        ConfigError: no term, an unknown term (naming the known ones), a key a term does not
            take, a value out of bounds, or a patch the FFT term's patches do not divide.
    """
    terms = OmegaConf.select(cfg, "loss.terms", default=None)
    settings = loss_terms.term_settings(
        OmegaConf.to_container(terms, resolve=True) if terms is not None else None
    )
    patch = OmegaConf.select(cfg, "data.patch_size", default=None)
    factor = getattr(settings.get("fft"), "patch_factor", 1)
    if isinstance(patch, int) and patch % factor:
        raise ConfigError(
            f"loss.terms.fft.patch_factor={factor} must divide data.patch_size={patch} (each "
            "HR patch is cut into patch_factor^2 spectra): choose a divisor of the patch"
        )


def key_error(e: Exception) -> ConfigError | None:
    """Hydra's refusal of ``loss.terms.<term>.<key>=V`` for a key the preset leaves at its
    schema's default (so not in the composed node) as how to set it: ``+`` adds it, ``++`` sets
    it either way; None for any other refusal."""
    found = re.search(r"Could not override '(loss\.terms\.[\w.]+)'", str(e))
    if not found:
        return None
    key = found[1]
    return ConfigError(
        f"{key}: the preset leaves this key at its default (sr/losses/), so it is not in the "
        f"config to override: add it with +{key}=VALUE (++{key}=VALUE sets it either way)"
    )


def adversarial_terms(cfg: DictConfig) -> list[str]:
    """The terms of ``loss.terms`` that need a discriminator (``gan``)."""
    terms = OmegaConf.select(cfg, "loss.terms", default=None) or {}
    return [n for n in terms if loss_terms.get(str(n)).kind == "adversarial"]


def adversary_rule(gan: list[str], has_d: bool) -> None:
    """A GAN term and a discriminator come together: ``gan`` the loss's adversarial terms,
    ``has_d`` a discriminator is configured (``sr.config.check_adversary`` on a config,
    ``sr.train.parts.training_part`` on the built loss).

    Raises:
        ConfigError: one without the other, naming what to add or drop.
    """
    if has_d and not gan:
        raise ConfigError(
            "discriminator=unet_sn trains a GAN and needs a GAN term: add loss=realesrgan or "
            "+loss.terms.gan.weight=0.1 (or choose discriminator=none)"
        )
    if gan and not has_d:
        raise ConfigError(
            f"loss.terms.{gan[0]} is a GAN term and needs a discriminator: add "
            f"discriminator=unet_sn, or drop the term (~loss.terms.{gan[0]})"
        )
