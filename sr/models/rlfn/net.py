"""RLFN: F. Kong, M. Li, S. Liu, D. Liu, J. He, Y. Bai, F. Chen and L. Fu, "Residual Local
Feature Network for Efficient Super-Resolution", CVPR Workshops (NTIRE) 2022; the winner of the
NTIRE 2022 efficient SR challenge's runtime track. Reference code: github.com/bytedance/RLFN
(``model/block.py``, ``model/rlfn.py``, ``model/rlfn_s.py``, ``model/rlfn_ntire.py``).

A 3x3 head, residual local feature blocks (RLFB: three 3x3 conv + leaky ReLU 0.05 with a skip
over them, a 1x1 conv, then enhanced spatial attention, ESA), a 3x3 conv with a skip to the head,
and one 3x3 conv to ``C s^2`` channels and a pixel shuffle. ESA (Liu et al., "Residual Feature
Aggregation Network", CVPR 2020, as RLFN trims it): 1x1 to 16 channels, a 3x3 stride-2 conv and
a 7x7 stride-3 max pool (both unpadded), a 3x3 conv, bilinear upsampling back to the input size,
plus a 1x1 of the 16 channels, a 1x1 back to the features, and a sigmoid that gates them.

The configurations of the paper, parameter counts on RGB at x4 (``tests/test_models.py``):

- RLFN, 52 features, 6 blocks: 543 K (``conf/model/rlfn.yaml``);
- RLFN-S, 48 features, 6 blocks: 470 K (``model.features=48``);
- the challenge entry (``rlfn_ntire``), 46 features, 48 in the blocks, 4 blocks: 317 K
  (``model.features=46 model.mid_features=48 model.blocks=4``).

On the Y channel the head and the tail read and write one channel instead of three (a few
hundred parameters fewer). As our other models, the input in [0, 1] is shifted by -0.5 and the
output back by +0.5 (``model.norm=centre``). The reference network has no normalisation of its
own, and its released model takes [0, 255] (``test_demo.py`` feeds ``img_L * 255.`` and divides
the output by 255): ``model.norm=none model.img_range=255`` is that computation exactly (the
layout of ``sr.models.rlfn.layout`` builds the official files so).

The 7x7 max pool of ESA needs inputs of at least 15 x 15 pixels (``sr.models.rlfn.MIN_SIZE``).
"""

from __future__ import annotations

import keras

from sr.models.layers import (
    LeakyReLU,
    PixelShuffle,
    ResizeLike,
    UpSampling2D,
    denormalized,
    float32_output,
    input_mean,
    normalized,
)


def esa(x, features: int, esa_channels: int = 16):
    """Enhanced spatial attention as RLFN uses it (no ``conv_max``, no ``conv3_``): ``x`` times a
    sigmoid gate of the same shape ``[B, h, w, features]``; h, w >= ``sr.models.rlfn.MIN_SIZE``."""
    f = esa_channels
    c1_ = keras.layers.Conv2D(f, 1)(x)
    c1 = keras.layers.Conv2D(f, 3, strides=2, padding="valid")(c1_)
    v_max = keras.layers.MaxPooling2D(7, strides=3, padding="valid")(c1)
    c3 = keras.layers.Conv2D(f, 3, padding="same")(v_max)
    c3 = ResizeLike()(c3, x)
    cf = keras.layers.Conv2D(f, 1)(c1_)
    c4 = keras.layers.Conv2D(features, 1)(keras.layers.Add()([c3, cf]))
    return keras.layers.Multiply()([x, keras.layers.Activation("sigmoid")(c4)])


def rlfb(x, features: int, mid_features: int, esa_channels: int = 16):
    """Residual local feature block: ``[B, h, w, features]`` to the same shape."""
    out = x
    for filters in (mid_features, mid_features, features):
        out = keras.layers.Conv2D(filters, 3, padding="same")(out)
        out = LeakyReLU(0.05)(out)
    out = keras.layers.Add()([out, x])
    out = keras.layers.Conv2D(features, 1)(out)
    return esa(out, features, esa_channels)


def build_rlfn(cfg, scale: int, channels: int) -> keras.Model:
    """Build RLFN; the defaults are the paper's RLFN (``conf/model/rlfn.yaml``).

    Args:
        cfg: its keys (``sr.models.rlfn.RLFNConfig``), each below as ``cfg.<key>``.
        scale: upscaling factor s (any integer >= 2: one pixel shuffle of s).
        channels: image channels C (1 for Y, 3 for RGB).
        features: channels between blocks (paper: 52 RLFN, 48 RLFN-S, 46 the challenge entry).
        mid_features: channels inside a block's first two convs (None: ``features``; 48 in the
            challenge entry).
        blocks: RLFBs (paper: 6; the challenge entry 4).
        esa_channels: channels of ESA (paper: 16).
        bicubic_skip: add the bicubic upscaling of the input to the output (as VDSR and our
            ``edsr_lite``), instead of the +0.5 shift; not in the paper.
        norm: the mean m the input loses and the output gets back (``sr.models.layers.NORMS``):
            ``centre`` 0.5, ``none`` (the reference), ``div2k_mean`` (RGB).
        img_range: R: the network sees ``(x - m) R`` and the output is ``y / R + m`` (the
            official release: 255, with ``norm=none``).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1] with h, w >= 15, output float32
        ``[B, s h, s w, C]``.
    """
    features = cfg.features
    mid_features = cfg.mid_features
    blocks = cfg.blocks
    esa_channels = cfg.esa_channels
    bicubic_skip = cfg.bicubic_skip
    norm = cfg.norm
    img_range = cfg.img_range
    mid = int(mid_features or features)
    mean = input_mean(norm, channels)
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = normalized(lr, mean, img_range)
    head = keras.layers.Conv2D(features, 3, padding="same")(x)
    x = head
    for _ in range(blocks):
        x = rlfb(x, features, mid, esa_channels)
    x = keras.layers.Conv2D(features, 3, padding="same")(x)
    x = keras.layers.Add()([x, head])
    x = keras.layers.Conv2D(channels * scale * scale, 3, padding="same")(x)
    x = PixelShuffle(scale)(x)
    if bicubic_skip:
        x = denormalized(x, (0.0,), img_range)
        x = keras.layers.Add()([x, UpSampling2D(scale, interpolation="bicubic")(lr)])
    else:
        x = denormalized(x, mean, img_range)
    return keras.Model(lr, float32_output(x), name=f"rlfn_x{scale}")
