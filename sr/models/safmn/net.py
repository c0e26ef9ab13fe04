"""SAFMN (Sun et al., ICCV 2023). Reference code: github.com/sunny2109/SAFMN
``basicsr/archs/safmn_arch.py``, as spandrel copies it (``spandrel/architectures/SAFMN/__arch/
safmn.py``).

A 3x3 conv (``to_feat``), attention blocks (``feats.<i>``) with a skip over them, a 3x3 conv to
``C s^2`` and a pixel shuffle (``to_img.0``). A block: ``x + SAFM(norm1(x))`` then ``x +
CCM(norm2(x))``, the norms channel LayerNorms (eps 1e-6, in float32). SAFM splits the channels
in four: level 0 a depthwise 3x3, level i > 0 a 2^i max pool, a depthwise 3x3 and a 2^i nearest
upsampling; a 1x1 conv of the four (``aggr``), GELU, times the block's input. CCM: a 3x3 conv to
``ffn_scale dim``, GELU, a 1x1 conv back.

Any input size: the reference's adaptive max pool and nearest interpolation are a 2^i pool and
repeat only on sides that are multiples of 8 (spandrel's ``SizeRequirements(multiple_of=8)``), so
the input is reflect-padded at the bottom and right to a multiple of 8 and the output cropped:
the official class's pixels on such sides, and near the padded border a padded input's pixels
otherwise.
"""

from __future__ import annotations

import keras

from sr.models.layers import PixelShuffle, UpSampling2D, float32_output
from sr.models.swinir import blocks
from sr.models.swinir.blocks import CropTo, WindowPad

LEVELS = 4


@keras.saving.register_keras_serializable(package="sr")
class GELU(keras.layers.Layer):
    """PyTorch's exact ``nn.GELU`` as ``sr.models.swinir.blocks.gelu`` writes it (erf, not the
    erfc of TensorFlow's own, which tf2onnx cannot convert)."""

    def call(self, x):
        return blocks.gelu(x)


def gelu(x):
    """:class:`GELU` of ``x`` (a functional-API tensor)."""
    return GELU()(x)


@keras.saving.register_keras_serializable(package="sr")
class Channels(keras.layers.Layer):
    """``x[..., start:stop]`` of ``[B, H, W, C]`` (the reference's ``chunk`` / ``split`` on
    channels), a layer of its own so that the model's config names it."""

    def __init__(self, start: int, stop: int, **kwargs):
        super().__init__(**kwargs)
        self.start, self.stop = int(start), int(stop)

    def call(self, x):
        return x[..., self.start : self.stop]

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.stop - self.start)

    def get_config(self):
        return {**super().get_config(), "start": self.start, "stop": self.stop}


def channel_norm(name: str):
    """The reference's channels-first ``LayerNorm`` (eps 1e-6), in float32."""
    return keras.layers.LayerNormalization(epsilon=1e-6, name=name, dtype="float32")


def safm(x, prefix: str, dim: int):
    """Spatially-adaptive feature modulation at ``prefix`` (``feats.<i>.safm``)."""
    chunk = dim // LEVELS
    out = []
    for i in range(LEVELS):
        s = Channels(i * chunk, (i + 1) * chunk)(x)
        if i:
            s = keras.layers.MaxPooling2D(2**i)(s)
        s = keras.layers.DepthwiseConv2D(3, padding="same", name=f"{prefix}.mfr.{i}")(s)
        if i:
            s = UpSampling2D(2**i, interpolation="nearest")(s)
        out.append(s)
    y = keras.layers.Conv2D(dim, 1, name=f"{prefix}.aggr")(keras.layers.Concatenate()(out))
    return keras.layers.Multiply()([gelu(y), x])


def att_block(x, prefix: str, dim: int, hidden: int):
    """One attention block at ``prefix`` (``feats.<i>``)."""
    y = safm(channel_norm(f"{prefix}.norm1")(x), f"{prefix}.safm", dim)
    x = keras.layers.Add()([y, x])
    y = keras.layers.Conv2D(hidden, 3, padding="same", name=f"{prefix}.ccm.ccm.0")(
        channel_norm(f"{prefix}.norm2")(x))  # fmt: skip
    y = keras.layers.Conv2D(dim, 1, name=f"{prefix}.ccm.ccm.2")(gelu(y))
    return keras.layers.Add()([y, x])


def build(cfg, scale: int, channels: int) -> keras.Model:
    """Build SAFMN; the defaults are the paper's (``conf/model/safmn.yaml``).

    Args:
        cfg: its keys (``sr.models.safmn.SAFMNConfig``): ``dim``, ``blocks``, ``ffn_scale``.
        scale: upscaling factor.
        channels: image channels (1 for Y: only the first and last convs differ).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1], output float32 ``[B, s h, s w, C]``.
    """
    dim, hidden = cfg.dim, int(cfg.dim * cfg.ffn_scale)
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = keras.layers.Conv2D(dim, 3, padding="same", name="to_feat")(WindowPad(8)(lr))
    feats = x
    for i in range(cfg.blocks):
        x = att_block(x, f"feats.{i}", dim, hidden)
    x = keras.layers.Add()([x, feats])
    x = keras.layers.Conv2D(channels * scale * scale, 3, padding="same", name="to_img.0")(x)
    x = CropTo(scale)([PixelShuffle(scale)(x), lr])
    return keras.Model(lr, float32_output(x), name="safmn")
