"""RCAN (Zhang et al., ECCV 2018). Reference code: github.com/yulunzhang/RCAN
``RCAN_TrainCode/code/model/rcan.py``, as spandrel copies it
(``spandrel/architectures/RCAN/__arch/rcan_arch.py``).

``x * rgb_range`` less the DIV2K RGB mean (``sub_mean``, a fixed 1x1 conv), a conv (``head.0``),
residual groups (``body.<g>``: RCABs, a conv, the group's skip), a conv (``body.<groups>``) with
a skip to the head, the upsampler (``tail.0``: x2 conv + pixel shuffle stages, or one x3), a
conv to the image (``tail.1``), the mean back on (``add_mean``) and ``/ rgb_range``. An RCAB:
conv, ReLU, conv, channel attention (global average pool, 1x1 conv to ``F / reduction``, ReLU,
1x1 conv, sigmoid, product), skip. The reference's ``res_scale`` is unused in its RCAB (the
product is commented out), so it is not a key here.

Every weight-bearing layer is named by its PyTorch prefix (``body.0.body.3.body.3.conv_du.0``),
so the layout pairs them by name (``sr.models.dat.slots.model_slots``). The mean shifts are
non-trainable 1x1 convs (the reference freezes them), counted as the reference counts its
parameters. Any input size (convs only; no padding needed).
"""

from __future__ import annotations

import math

import keras
import numpy as np

from sr.models.layers import PixelShuffle, float32_output

DIV2K_MEAN = (0.4488, 0.4371, 0.4040)  # the reference's rgb_mean (std 1)
DIV2K_Y_MEAN = (16 + 65.481 * 0.4488 + 128.553 * 0.4371 + 24.966 * 0.4040) / 255  # BT.601: 0.4379


def conv(name: str, filters: int, kernel: int, activation=None):
    """A conv with the reference's ``kernel_size // 2`` zero padding, named ``name``."""
    return keras.layers.Conv2D(filters, kernel, padding="same", activation=activation, name=name)


def mean_shift(name: str, rgb_range: float, sign: float, channels: int):
    """The reference's ``MeanShift``: a frozen 1x1 conv, identity weight, bias ``sign *
    rgb_range * mean`` (on Y, which the reference lacks: the DIV2K mean's Y, BT.601)."""
    eye = np.eye(channels, dtype=np.float32).reshape(1, 1, channels, channels)
    mean = DIV2K_MEAN if channels == 3 else (DIV2K_Y_MEAN,)
    bias = np.asarray(mean, np.float32) * sign * rgb_range
    return keras.layers.Conv2D(
        channels, 1, name=name, trainable=False,
        kernel_initializer=keras.initializers.Constant(eye),
        bias_initializer=keras.initializers.Constant(bias),
    )  # fmt: skip


def rcab(x, prefix: str, features: int, kernel: int, reduction: int):
    """One residual channel attention block at ``prefix`` (``body.<g>.body.<b>``)."""
    r = conv(f"{prefix}.body.0", features, kernel, "relu")(x)
    r = conv(f"{prefix}.body.2", features, kernel)(r)
    y = keras.layers.GlobalAveragePooling2D(keepdims=True)(r)
    y = conv(f"{prefix}.body.3.conv_du.0", features // reduction, 1, "relu")(y)
    y = conv(f"{prefix}.body.3.conv_du.2", features, 1, "sigmoid")(y)
    return keras.layers.Add()([keras.layers.Multiply()([r, y]), x])


def upsample(x, scale: int, features: int, kernel: int):
    """The reference's ``Upsampler`` (``tail.0.<i>``): x2 stages for 2^n, one x3 stage."""
    factors = [2] * int(math.log2(scale)) if scale & (scale - 1) == 0 else [3]
    for i, r in enumerate(factors):
        x = keras.layers.Conv2D(features * r * r, 3, padding="same", name=f"tail.0.{2 * i}")(x)
        x = PixelShuffle(r)(x)
    return x


def build(cfg, scale: int, channels: int) -> keras.Model:
    """Build RCAN; the defaults are the paper's (``conf/model/rcan.yaml``).

    Args:
        cfg: its keys (``sr.models.rcan.RCANConfig``): ``features``, ``groups``, ``blocks``,
            ``reduction``, ``kernel_size``, ``norm`` (the DIV2K mean shifts; on Y its BT.601 Y),
            ``rgb_range`` (the factor inside; 1 without ``norm``, as the reference).
        scale: upscaling factor (2^n or 3).
        channels: image channels (1 for Y: the official class has no Y mean shift, so a Y
            model with ``norm`` is not written back: ``sr.models.rcan.layout.dump``).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1], output float32 ``[B, s h, s w, C]``.
    """
    f, k = cfg.features, cfg.kernel_size
    rgb_range = float(cfg.rgb_range) if cfg.norm else 1.0
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = lr
    if rgb_range != 1.0:
        x = keras.layers.Rescaling(rgb_range)(x)
    if cfg.norm:
        x = mean_shift("sub_mean", rgb_range, -1.0, channels)(x)
    head = conv("head.0", f, k)(x)
    x = head
    for g in range(cfg.groups):
        r = x
        for b in range(cfg.blocks):
            r = rcab(r, f"body.{g}.body.{b}", f, k, cfg.reduction)
        r = conv(f"body.{g}.body.{cfg.blocks}", f, k)(r)
        x = keras.layers.Add()([r, x])
    x = conv(f"body.{cfg.groups}", f, k)(x)
    x = keras.layers.Add()([x, head])
    x = upsample(x, scale, f, k)
    x = conv("tail.1", channels, k)(x)
    if cfg.norm:
        x = mean_shift("add_mean", rgb_range, 1.0, channels)(x)
    if rgb_range != 1.0:
        x = keras.layers.Rescaling(1.0 / rgb_range)(x)
    return keras.Model(lr, float32_output(x), name="rcan")
