"""SRVGGNetCompact, Real-ESRGAN's compact model: X. Wang, L. Xie, C. Dong and Y. Shan,
"Real-ESRGAN: Training Real-World Blind Super-Resolution with Pure Synthetic Data", ICCV
Workshops 2021, and the models released after it (``realesr-animevideov3``,
``realesr-general-x4v3``). Reference code: github.com/xinntao/Real-ESRGAN
(``realesrgan/archs/srvgg_arch.py``; the same class in BasicSR's ``basicsr/archs/srvgg_arch.py``
and spandrel's ``Compact``).

A VGG-style plain network that works at LR resolution only: a 3x3 conv from the image channels to
``features``, an activation, ``convs`` times (3x3 conv, activation), a 3x3 conv to ``C s^2``
channels, a pixel shuffle, and the nearest-neighbour upscaling of the input added, so that the
network learns the residual. No normalisation, no skip inside the body, nothing at HR but the
shuffle and the sum. The input in [0, 1] goes in as is and the output is not clipped, as in the
reference.

``conf/model/compact.yaml`` is ``realesr-general-x4v3``: 64 features, 32 convs, PReLU: 1,213,296
parameters on RGB at x4 (``tests/test_compact.py``); ``realesr-animevideov3`` is
``model.convs=16``. The layers are named as the reference's ``body`` list (``body_0`` is
``body.0``, the first conv; ``body_1`` its activation; ...), which
``sr.models.compact.layout`` reads and writes. Convs start as Keras's default (Glorot
uniform, zero bias; the reference keeps PyTorch's), PReLU slopes at 0.25 as PyTorch's.
"""

from __future__ import annotations

import keras

from sr.models.compact import ACTIVATIONS  # noqa: F401  (compact_activation's choices)
from sr.models.layers import LeakyReLU, PixelShuffle, UpSampling2D, float32_output

LEAKY_SLOPE = 0.1  # the reference's negative slope for act_type='leakyrelu'
PRELU_INIT = 0.25  # PyTorch's nn.PReLU init


def compact_activation(activation: str, name: str) -> keras.layers.Layer:
    """The reference's activation ``activation`` as a Keras layer named ``name``: PReLU with one
    slope per channel (``alpha`` ``[1, 1, C]``, shared over height and width, as
    ``nn.PReLU(num_parameters=C)``), ReLU, or leaky ReLU of slope 0.1."""
    if activation == "prelu":
        init = keras.initializers.Constant(PRELU_INIT)
        return keras.layers.PReLU(alpha_initializer=init, shared_axes=[1, 2], name=name)
    if activation == "relu":
        return keras.layers.ReLU(name=name)
    return LeakyReLU(LEAKY_SLOPE, name=name)


def build_compact(cfg, scale: int, channels: int) -> keras.Model:
    """Build SRVGGNetCompact; the defaults are the reference class's (``realesr-animevideov3``'s
    body on Y); ``conf/model/compact.yaml`` is ``realesr-general-x4v3`` (32 convs, RGB with
    ``data.channels=rgb``).

    Args:
        cfg: its keys (``sr.models.compact.CompactConfig``), each below as ``cfg.<key>``.
        scale: upscaling factor s, an integer >= 1 (``data.scale``; the released models are x4).
        channels: image channels C (1 for Y, 3 for RGB), in and out.
        features: channels of every body conv (``num_feat``; released models: 64).
        convs: 3x3 convs between the first and the last (``num_conv``; 16 or 32), >= 0.
        activation: ``prelu`` (the released models), ``relu`` or ``leakyrelu`` (slope 0.1).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1], output float32 ``[B, s h, s w, C]``.
        Its layers ``body_0`` ... ``body_{2 convs + 2}`` are the reference's ``body`` list.
    """
    features = cfg.features
    convs = cfg.convs
    activation = cfg.activation
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x, index = lr, 0
    for _ in range(convs + 1):
        x = keras.layers.Conv2D(features, 3, padding="same", name=f"body_{index}")(x)
        x = compact_activation(activation, f"body_{index + 1}")(x)
        index += 2
    x = keras.layers.Conv2D(channels * scale * scale, 3, padding="same", name=f"body_{index}")(x)
    x = PixelShuffle(scale, name="upsampler")(x)
    base = UpSampling2D(scale, interpolation="nearest", name="base")(lr)
    x = keras.layers.Add(name="residual")([x, base])
    return keras.Model(lr, float32_output(x), name=f"compact_x{scale}")
