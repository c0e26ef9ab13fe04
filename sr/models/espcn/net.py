"""ESPCN: W. Shi et al., "Real-Time Single Image and Video Super-Resolution Using an Efficient
Sub-Pixel Convolutional Neural Network", CVPR 2016.

Three convolutions on the LR image (5x5 with 64 filters, 3x3 with 32, 3x3 with r^2 C, tanh between
them) and a pixel shuffle. All the work happens at LR resolution, which makes it the CPU-friendly
default of this project.
"""

from __future__ import annotations

import keras

from sr.models.layers import PixelShuffle, float32_output


def build_espcn(cfg, scale: int, channels: int) -> keras.Model:
    """Build ESPCN.

    Args:
        cfg: its keys (``sr.models.espcn.ESPCNConfig``): ``features``, the filters of the first
            two convolutions (paper: 64, 32); ``activation``, between convolutions (paper: tanh).
        scale: upscaling factor r.
        channels: image channels C (1 for the Y channel).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1], output float32 ``[B, r h, r w, C]``.
    """
    lr = keras.Input(shape=(None, None, channels), name="lr")
    out = espcn_body(lr, scale, channels, tuple(cfg.features), cfg.activation)
    return keras.Model(lr, out, name=f"espcn_x{scale}")


def espcn_body(
    x,
    scale: int,
    channels: int,
    features: tuple[int, int],
    activation: str,
    first_init="glorot_uniform",
):
    """ESPCN's layers on a Keras tensor ``[B, h, w, any]``: 5x5 conv (``features[0]``, kernel
    initialised by ``first_init``), 3x3 conv (``features[1]``), 3x3 conv to ``r^2 channels``,
    pixel shuffle; float32 ``[B, r h, r w, channels]``."""
    f1, f2 = features
    x = keras.layers.Conv2D(
        f1, 5, padding="same", activation=activation, kernel_initializer=first_init
    )(x)
    x = keras.layers.Conv2D(f2, 3, padding="same", activation=activation)(x)
    x = keras.layers.Conv2D(channels * scale**2, 3, padding="same")(x)
    return float32_output(PixelShuffle(scale)(x))
