"""EDSR: B. Lim, S. Son, H. Kim, S. Nah and K. M. Lee, "Enhanced Deep Residual Networks for
Single Image Super-Resolution", CVPRW 2017.

Residual blocks (conv-ReLU-conv, no batch norm, residual scaling), a global skip over the body,
and an upsampler of pixel-shuffle stages (x2 stages for x4, one x3 stage for x3). The paper
subtracts the DIV2K RGB mean; on the Y channel in [0, 1] we subtract 0.5 and add it back
(``model.norm=centre``). BasicSR's ``EDSR`` (``basicsr/archs/edsr_arch.py``) computes
``conv_last(...) / img_range + rgb_mean`` of ``(x - rgb_mean) * img_range`` with the DIV2K RGB
mean and ``img_range`` 255: ``model.norm=div2k_mean model.img_range=255`` is that model exactly
(the layout of ``sr.models.edsr.layout`` builds BasicSR's files so).

One builder, :func:`build_edsr`, makes every variant; a variant is a configuration of it:

- the paper's EDSR baseline (``conf/model/edsr_baseline.yaml``): 16 blocks, 64 features,
  res_scale 1, x2 pixel-shuffle stages, no bicubic skip (1.52 M parameters on Y, as the paper's
  1.5 M on RGB);
- the paper's full EDSR: ``model.blocks=32 model.features=256 model.res_scale=0.1`` over it;
- ``conf/model/edsr_lite.yaml`` for small CPU budgets, with two changes: one pixel shuffle of
  scale^2 channels at the end (as ESPCN) instead of x2 stages, and a bicubic skip from input to
  output, so that the network only learns the residual over bicubic upscaling (as VDSR, Kim et
  al., CVPR 2016).
"""

from __future__ import annotations

import keras

from sr.models.layers import (
    PixelShuffle,
    UpSampling2D,
    denormalized,
    float32_output,
    input_mean,
    normalized,
)

_STAGES = {2: [2], 3: [3], 4: [2, 2], 8: [2, 2, 2]}


def _upsample(x, scale: int, features: int, channels: int, direct: bool):
    if direct:
        x = keras.layers.Conv2D(channels * scale * scale, 3, padding="same")(x)
        return PixelShuffle(scale)(x)
    for r in _STAGES[scale]:
        x = keras.layers.Conv2D(features * r * r, 3, padding="same")(x)
        x = PixelShuffle(r)(x)
    return keras.layers.Conv2D(channels, 3, padding="same")(x)


def build_edsr(cfg, scale: int, channels: int) -> keras.Model:
    """Build EDSR; the defaults are the paper's baseline (``conf/model/edsr_baseline.yaml``).

    Args:
        cfg: its keys (``sr.models.edsr.EDSRConfig``), each below as ``cfg.<key>``.
        scale: upscaling factor (2, 3, 4 or 8; any with ``direct_upsample``).
        channels: image channels (1 for Y).
        features: filters of every convolution of the body.
        blocks: residual blocks.
        res_scale: factor on each block's residual before the addition (paper: 1 for the
            baseline, 0.1 for the 32-block, 256-feature EDSR).
        direct_upsample: one conv to ``channels * scale^2`` and one pixel shuffle at the end.
        bicubic_skip: add the bicubic upscaling of the input to the output (instead of the
            mean).
        norm: the mean m the input loses and the output gets back (``sr.models.layers.NORMS``):
            ``centre`` 0.5, ``div2k_mean`` the DIV2K RGB mean (BasicSR's ``rgb_mean``), ``none``.
        img_range: R: the body sees ``(x - m) R`` and the output is ``y / R + m`` (BasicSR: 255).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1], output float32 ``[B, s h, s w, C]``.
    """
    features = cfg.features
    blocks = cfg.blocks
    res_scale = cfg.res_scale
    direct_upsample = cfg.direct_upsample
    bicubic_skip = cfg.bicubic_skip
    norm = cfg.norm
    img_range = cfg.img_range
    mean = input_mean(norm, channels)
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = normalized(lr, mean, img_range)
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
    x = _upsample(x, scale, features, channels, direct_upsample)
    if bicubic_skip:
        x = denormalized(x, (0.0,), img_range)
        up = UpSampling2D(scale, interpolation="bicubic")(lr)
        x = keras.layers.Add()([x, up])
    else:
        x = denormalized(x, mean, img_range)
    return keras.Model(lr, float32_output(x), name=f"edsr_x{scale}")
