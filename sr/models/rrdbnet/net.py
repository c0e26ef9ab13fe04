"""RRDBNet, the generator of ESRGAN and Real-ESRGAN: X. Wang, K. Yu, S. Wu, J. Gu, Y. Liu, C. Dong,
Y. Qiao and C. C. Loy, "ESRGAN: Enhanced Super-Resolution Generative Adversarial Networks", ECCV
Workshops 2018; X. Wang, L. Xie, C. Dong and Y. Shan, "Real-ESRGAN: Training Real-World Blind
Super-Resolution with Pure Synthetic Data", ICCV Workshops 2021. Reference code:
github.com/XPixelGroup/BasicSR (``basicsr/archs/rrdbnet_arch.py``).

A 3x3 head, residual-in-residual dense blocks (RRDB: three residual dense blocks, each five 3x3
convs densely connected, growth 32, leaky ReLU 0.2 after the first four, its residual scaled by
0.2; the RRDB's own residual scaled by 0.2 again), a 3x3 conv with a skip to the head, then
upsampling stages (nearest-neighbour x2, 3x3 conv, leaky ReLU), a 3x3 conv with leaky ReLU and a
3x3 conv to the image channels. The input in [0, 1] goes in as is and the output is not clipped,
as in the reference.

``conf/model/rrdbnet.yaml`` is Real-ESRGAN's ``RRDBNet_x4plus``: 23 blocks, 64 features, growth
32: 16,697,987 parameters on RGB at x4 (16.70 M; ``tests/test_rrdbnet.py``). For small CPU runs:
``model.blocks``, ``model.features``, ``model.growth``.

Scales (``data.scale``): 4 is the paper's (two nearest x2 stages); 2 and 8 use one and three x2
stages, and 3 one nearest x3 stage, as the 2018 ESRGAN code in BasicSR did (``log2(scale)``
upconv stages, one of x3 for x3). Today's BasicSR makes its x2 and x1 models by pixel-unshuffling
the input by 2 or 4 before the x4 network: that needs LR sizes divisible by 2 or 4 and ties the
output to a grid anchored at the image corner, so tiles would not equal the whole image; it is
not offered here. Other scales are refused.

The convolutions are named as the reference's modules, ``.`` written ``_`` (``conv_first``,
``body_0_rdb1_conv1``, ``conv_body``, ``conv_up1``, ``conv_hr``, ``conv_last``), so that
``sr.models.rrdbnet.layout`` moves BasicSR's state dict in and out by name; the
computation is the reference's at x4 (``tests/test_pytorch_rrdbnet.py``: within 1e-4 of
BasicSR's and spandrel's).

The RDB convs start as in the reference (``default_init_weights(..., 0.1)``): He-normal (fan in)
scaled by 0.1, zero bias; the other convs have Keras's default (Glorot uniform, zero bias).
"""

from __future__ import annotations

import keras

from sr.models.layers import LeakyReLU, UpSampling2D, float32_output

SLOPE = 0.2  # leaky ReLU's negative slope (paper)
RES_SCALE = 0.2  # residual scaling of every RDB and RRDB (paper)
STAGES = {2: [2], 3: [3], 4: [2, 2], 8: [2, 2, 2]}  # data.scale -> nearest upsampling stages


def _rdb_conv(filters: int, name: str | None = None) -> keras.layers.Conv2D:
    """A 3x3 conv of a residual dense block, initialised as the reference: He normal x 0.1
    (std ``0.1 sqrt(2 / fan_in)``), zero bias."""
    init = keras.initializers.VarianceScaling(0.02, "fan_in", "untruncated_normal")
    return keras.layers.Conv2D(filters, 3, padding="same", kernel_initializer=init, name=name)


def _conv(filters: int, name: str) -> keras.layers.Conv2D:
    return keras.layers.Conv2D(filters, 3, padding="same", name=name)


def residual_dense_block(x, features: int, growth: int, name: str | None = None):
    """Residual dense block: five 3x3 convs, each reading ``x`` and every earlier conv's output
    (``features + k growth`` channels), leaky ReLU 0.2 after the first four; returns
    ``x + 0.2 conv5``, ``[B, h, w, features]``. With ``name``, the convs are ``<name>_conv1``
    to ``<name>_conv5``."""
    named = (lambda k: f"{name}_conv{k}") if name else (lambda k: None)  # noqa: E731
    dense = [x]
    for k in range(1, 5):
        inputs = dense[0] if len(dense) == 1 else keras.layers.Concatenate()(dense)
        dense.append(LeakyReLU(SLOPE)(_rdb_conv(growth, named(k))(inputs)))
    out = _rdb_conv(features, named(5))(keras.layers.Concatenate()(dense))
    return keras.layers.Add()([x, keras.layers.Rescaling(RES_SCALE)(out)])


def rrdb(x, features: int, growth: int, name: str | None = None):
    """Residual in residual dense block: three RDBs, ``x + 0.2 rdb3(rdb2(rdb1(x)))`` (with
    ``name``, the RDBs are ``<name>_rdb1`` to ``<name>_rdb3``)."""
    out = x
    for k in range(1, 4):
        out = residual_dense_block(out, features, growth, f"{name}_rdb{k}" if name else None)
    return keras.layers.Add()([x, keras.layers.Rescaling(RES_SCALE)(out)])


def build_rrdbnet(cfg, scale: int, channels: int) -> keras.Model:
    """Build RRDBNet; the defaults are the architecture of Real-ESRGAN's ``RRDBNet_x4plus``
    (``conf/model/rrdbnet.yaml``; that model is RGB: ``channels=3``).

    Args:
        cfg: its keys (``sr.models.rrdbnet.RRDBNetConfig``), each below as ``cfg.<key>``.
        scale: upscaling factor s: 2, 3, 4 (the paper's) or 8 (``data.scale``).
        channels: image channels C (1 for Y, 3 for RGB).
        features: channels of the trunk (paper: 64).
        blocks: RRDBs (paper: 23; Real-ESRGAN's anime model: 6).
        growth: channels each dense conv adds (paper: 32).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1] (any h, w), output float32
        ``[B, s h, s w, C]`` (unclipped).
    """
    features = cfg.features
    blocks = cfg.blocks
    growth = cfg.growth
    lr = keras.Input(shape=(None, None, channels), name="lr")
    head = _conv(features, "conv_first")(lr)
    x = head
    for i in range(blocks):
        x = rrdb(x, features, growth, f"body_{i}")
    x = _conv(features, "conv_body")(x)
    x = keras.layers.Add()([head, x])
    for n, factor in enumerate(STAGES[scale], start=1):
        x = UpSampling2D(factor, interpolation="nearest")(x)
        x = LeakyReLU(SLOPE)(_conv(features, f"conv_up{n}")(x))
    x = LeakyReLU(SLOPE)(_conv(features, "conv_hr")(x))
    x = _conv(channels, "conv_last")(x)
    return keras.Model(lr, float32_output(x), name=f"rrdbnet_x{scale}")
