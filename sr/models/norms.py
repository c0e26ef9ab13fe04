"""The input normalisations of the builders (``model.norm``), declared without Keras so that the
config is checked before TensorFlow starts: what a builder subtracts from its input in [0, 1]
(``sr.models.layers.input_mean`` computes it)."""

from __future__ import annotations

NORMS = ("centre", "div2k_mean", "none")
"""``centre`` 0.5 on every channel (the project's own convention), ``div2k_mean``
``sr.models.layers.DIV2K_RGB_MEAN`` (the reference code's, RGB only), ``none`` nothing."""


def norm_rule(keys: dict, channels: int) -> str | None:
    """Why ``model.norm`` of ``keys`` cannot take ``channels`` image channels, or None:
    ``div2k_mean`` subtracts DIV2K's RGB mean and needs 3."""
    if keys.get("norm") == "div2k_mean" and channels != 3:
        return (
            f"model.norm=div2k_mean subtracts DIV2K's RGB mean and needs 3 channels, got "
            f"{channels}: use data.channels=rgb or model.norm=centre"
        )
    return None
