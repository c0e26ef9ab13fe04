"""EDSR baseline: B. Lim et al., "Enhanced Deep Residual Networks for Single Image
Super-Resolution", CVPRW 2017.

16 residual blocks (conv-ReLU-conv, no batch norm, residual scaling 1) of 64 features, a global
skip, and an upsampler of pixel-shuffle x2 stages (two for x4, one x3 stage for x3). The paper
subtracts the DIV2K RGB mean; on the Y channel in [0, 1] we subtract 0.5 and add it back.
"""

from __future__ import annotations

import keras

from sr.models.layers import PixelShuffle, float32_output


def _upsample(x, scale: int, features: int):
    stages = {2: [2], 3: [3], 4: [2, 2], 8: [2, 2, 2]}
    if scale not in stages:
        raise ValueError(f"EDSR supports scales 2, 3, 4 and 8, got {scale}")
    for r in stages[scale]:
        x = keras.layers.Conv2D(features * r * r, 3, padding="same")(x)
        x = PixelShuffle(r)(x)
    return x


def build_edsr_baseline(
    scale: int = 4,
    channels: int = 1,
    features: int = 64,
    blocks: int = 16,
    res_scale: float = 1.0,
) -> keras.Model:
    """Build EDSR (baseline: 16 blocks, 64 features, res_scale 1; full EDSR: 32, 256, 0.1).

    Args:
        scale: upscaling factor (2, 3, 4 or 8).
        channels: image channels (1 for Y).
        features: filters of every convolution of the body.
        blocks: residual blocks.
        res_scale: factor on each block's residual before the addition.

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1], output float32 ``[B, s h, s w, C]``.

    Raises:
        ValueError: for an unsupported scale.
    """
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = keras.layers.Rescaling(1.0, offset=-0.5)(lr)
    head = keras.layers.Conv2D(features, 3, padding="same")(x)
    x = head
    for _ in range(blocks):
        r = keras.layers.Conv2D(features, 3, padding="same", activation="relu")(x)
        r = keras.layers.Conv2D(features, 3, padding="same")(r)
        if res_scale != 1.0:
            r = keras.layers.Rescaling(res_scale)(r)
        x = keras.layers.Add()([x, r])
    x = keras.layers.Conv2D(features, 3, padding="same")(x)
    x = keras.layers.Add()([head, x])
    x = _upsample(x, scale, features)
    x = keras.layers.Conv2D(channels, 3, padding="same")(x)
    x = keras.layers.Rescaling(1.0, offset=0.5)(x)
    return keras.Model(lr, float32_output(x), name=f"edsr_x{scale}")
