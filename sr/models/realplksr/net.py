"""RealPLKSR (from PLKSR, Lee et al., arXiv 2404.11848, 2024). Reference code: the community's
``RealPLKSR`` as spandrel copies it (``spandrel/architectures/PLKSR/__arch/RealPLKSR.py``).

``feats.0`` a 3x3 conv, PLK blocks ``feats.1 .. feats.<blocks>``, a dropout (``feats.<blocks+1>``,
none at inference and with the default rate 0, so absent here), ``feats.<blocks+2>`` a 3x3 conv
to ``C s^2``, plus the input repeated ``s^2`` times per channel, and a pixel shuffle: the shuffle
of the repeated input is the nearest-neighbour upscaling of the input, added after the shuffle
here. A PLK block: an optional channel LayerNorm (eps 1e-6), DCCM (3x3 conv to ``2 dim``, Mish,
3x3 conv back), the partial large kernel (a ``kernel_size`` conv on the first ``int(dim
split_ratio)`` channels, the others kept), element-wise attention (3x3 conv, sigmoid, product),
a 1x1 refinement, a GroupNorm (eps 1e-5; without the LayerNorm) and the block's skip. Norms run
in float32.

Any input size (convolutions and per-image norms only; no padding).
"""

from __future__ import annotations

import keras

from sr.models.layers import PixelShuffle, UpSampling2D, float32_output
from sr.models.safmn.net import Channels


def conv(name: str, filters: int, kernel: int):
    """PyTorch's ``nn.Conv2d(.., kernel, 1, kernel // 2)`` named ``name``."""
    return keras.layers.Conv2D(filters, kernel, padding="same", name=name)


def plk_block(x, prefix: str, cfg):
    """One PLK block at ``prefix`` (``feats.<i>``)."""
    dim, pdim = cfg.dim, int(cfg.dim * cfg.split_ratio)
    skip = x
    if cfg.layer_norm:
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"{prefix}.layer_norm",
                                            dtype="float32")(x)  # fmt: skip
    x = conv(f"{prefix}.channel_mixer.0", dim * 2, 3)(x)
    x = conv(f"{prefix}.channel_mixer.2", dim, 3)(keras.layers.Activation("mish")(x))
    lk = conv(f"{prefix}.lk.conv", pdim, cfg.kernel_size)(Channels(0, pdim)(x))
    x = keras.layers.Concatenate()([lk, Channels(pdim, dim)(x)]) if pdim < dim else lk
    if cfg.use_ea:
        gate = conv(f"{prefix}.attn.f.0", dim, 3)(x)
        x = keras.layers.Multiply()([x, keras.layers.Activation("sigmoid")(gate)])
    x = conv(f"{prefix}.refine", dim, 1)(x)
    if not cfg.layer_norm:
        x = keras.layers.GroupNormalization(cfg.norm_groups, epsilon=1e-5, name=f"{prefix}.norm",
                                            dtype="float32")(x)  # fmt: skip
    return keras.layers.Add()([x, skip])


def build(cfg, scale: int, channels: int) -> keras.Model:
    """Build RealPLKSR; the defaults are the released network's (``conf/model/realplksr.yaml``).

    Args:
        cfg: its keys (``sr.models.realplksr.RealPLKSRConfig``): ``dim``, ``blocks``,
            ``kernel_size``, ``split_ratio``, ``use_ea``, ``norm_groups``, ``layer_norm``.
        scale: upscaling factor.
        channels: image channels (1 for Y: only the first and last convs differ).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1], output float32 ``[B, s h, s w, C]``.
    """
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = conv("feats.0", cfg.dim, 3)(lr)
    for i in range(1, cfg.blocks + 1):
        x = plk_block(x, f"feats.{i}", cfg)
    x = conv(f"feats.{cfg.blocks + 2}", channels * scale * scale, 3)(x)
    x = PixelShuffle(scale)(x)
    up = UpSampling2D(scale, interpolation="nearest")(lr)
    x = keras.layers.Add()([x, up])
    return keras.Model(lr, float32_output(x), name="realplksr")
