"""OmniSR (H. Wang, X. Chen, B. Ni, Y. Liu and J. Liu, "Omni Aggregation Networks for
Lightweight Image Super-Resolution", CVPR 2023). Reference code: github.com/Francis0625/Omni-SR
``components/OmniSR.py``, ``ops/OSAG.py``, ``ops/OSA.py``, ``ops/esa.py``, as spandrel copies them
(``spandrel/architectures/OmniSR/__arch/``).

A 3x3 conv, omni self-attention groups (OSAG: OSA blocks, a 1x1 conv, the group's skip and
enhanced spatial attention, ESA), a 3x3 conv with a skip to the head, and one conv to ``C s^2``
channels and a pixel shuffle. An OSA block: an MBConv (1x1, GELU, depthwise 3x3, GELU,
squeeze-excitation, 1x1, residual), then window ("block") attention with a relative position
bias, a gated conv feed-forward, channel attention within each window, a feed-forward, grid
attention (windows of pixels ``H / w`` apart), a feed-forward, channel attention across windows
(one group per position within the window) and a feed-forward, each with a pre-norm and a
residual.

Any input size: the input is padded with zeros at the bottom and right to a multiple of the
window and the output cropped, as the reference's ``check_image_size`` (its
``F.pad(..., 'constant', 0)``); ESA then needs at least 16 x 16 padded pixels, so sides >= 9.
The grid attentions and ESA read the whole image (``local=False``).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from sr.models.dat import blocks
from sr.models.dat.net import gelu
from sr.models.layers import PixelShuffle, ResizeLike, float32_output


def layer_norm(name: str, eps: float):
    """A LayerNorm over channels in float32 (``nn.LayerNorm``: 1e-5; ``LayerNorm2d``: 1e-6)."""
    return keras.layers.LayerNormalization(epsilon=eps, name=name, dtype="float32")


def grid_windows(x, w: int):
    """``[B, H, W, c]`` to the reference's grid windows ``[B nW, w w, c]``: window (x, y)
    holds the pixels ``(w1 H / w + x, w2 W / w + y)`` (its ``(w1 x) (w2 y)`` rearrangement), in
    reshapes and transposes of at most five dimensions."""
    c = x.shape[-1]
    s = tf.shape(x)
    gx, gy = s[1] // w, s[2] // w
    x = tf.transpose(tf.reshape(x, [-1, gx, w, gy, c]), [0, 1, 3, 2, 4])  # [B w, X, Y, w2, c]
    x = tf.transpose(tf.reshape(x, [s[0], w, gx * gy, w * c]), [0, 2, 1, 3])
    return tf.reshape(x, [-1, w * w, c])


def grid_unwindows(x, w: int, height, width):
    """The inverse of :func:`grid_windows`: ``[B nW, w w, c]`` to ``[B, height, width, c]``."""
    c = x.shape[-1]
    gx, gy = height // w, width // w
    x = tf.transpose(tf.reshape(x, [-1, gx * gy, w, w * c]), [0, 2, 1, 3])
    x = tf.transpose(tf.reshape(x, [-1, gx, gy, w, c]), [0, 1, 3, 2, 4])
    return tf.reshape(x, [-1, height, width, c])


@keras.saving.register_keras_serializable(package="sr")
class OSABlock(keras.layers.Layer):
    """One omni self-attention block, ``[B, H, W, F] -> [B, H, W, F]`` (H, W multiples of the
    window). Its weights are the sublayers of :attr:`parts` keyed by the reference's names
    under the block (``layer.0.fn.0``, ``layer.2.fn.to_qkv``, ...) and the channel attentions'
    temperatures (``layer.5.fn.temperature``, ``layer.11.fn.temperature``).

    Args:
        features: F (a multiple of 4: four heads everywhere).
        window: the window side w.
        pe: the window and grid attentions add a relative position bias.
    """

    HEADS = 4

    def __init__(self, features, window, pe, **kwargs):
        super().__init__(**kwargs)
        self.features, self.window, self.pe = int(features), int(window), bool(pe)
        self.parts = self._parts()
        self.temperature = {  # string keys: TF's checkpoints and SavedModel need them
            str(i): self.add_weight(name=f"temperature_{i}", shape=(self.HEADS, 1, 1),
                                    initializer="ones")
            for i in (5, 11)
        }  # fmt: skip
        self.index = blocks.relative_index(self.window, self.window)

    def _parts(self) -> dict:
        f, name = self.features, self.name

        def conv(units, key, bias=False):
            return key, keras.layers.Conv2D(units, 1, use_bias=bias, name=f"{name}.{key}")

        def dw(key, bias=False):
            return key, keras.layers.DepthwiseConv2D(3, padding="same", use_bias=bias,
                                                     name=f"{name}.{key}")  # fmt: skip

        def dense(units, key):
            return key, keras.layers.Dense(units, use_bias=False, name=f"{name}.{key}")

        parts = [conv(f, "layer.0.fn.0", True), dw("layer.0.fn.2", True)]
        parts += [dense(int(f * 0.25), "layer.0.fn.4.gate.1"), dense(f, "layer.0.fn.4.gate.3")]
        parts += [conv(f, "layer.0.fn.5", True)]
        for i in (2, 8):
            parts += [(f"layer.{i}.norm", layer_norm(f"{name}.layer.{i}.norm", 1e-5))]
            parts += [dense(3 * f, f"layer.{i}.fn.to_qkv"), dense(f, f"layer.{i}.fn.to_out.0")]
            if self.pe:
                table = (2 * self.window - 1) ** 2
                parts += [(f"layer.{i}.fn.rel_pos_bias", keras.layers.Embedding(
                    table, self.HEADS, name=f"{name}.layer.{i}.fn.rel_pos_bias"))]  # fmt: skip
        for i in (4, 5, 6, 10, 11, 12):
            parts += [(f"layer.{i}.norm", layer_norm(f"{name}.layer.{i}.norm", 1e-6))]
        for i in (4, 6, 10, 12):
            parts += [conv(2 * f, f"layer.{i}.fn.project_in"), dw(f"layer.{i}.fn.dwconv")]
            parts += [conv(f, f"layer.{i}.fn.project_out")]
        for i in (5, 11):
            parts += [conv(3 * f, f"layer.{i}.fn.qkv"), dw(f"layer.{i}.fn.qkv_dwconv")]
            parts += [conv(f, f"layer.{i}.fn.project_out")]
        return dict(parts)

    def build(self, input_shape):
        f, image = self.features, (None, None, None)
        widths = {"layer.0.fn.4.gate.3": int(f * 0.25), "layer.4.fn.dwconv": 2 * f,
                  "layer.6.fn.dwconv": 2 * f, "layer.10.fn.dwconv": 2 * f,
                  "layer.12.fn.dwconv": 2 * f, "layer.5.fn.qkv_dwconv": 3 * f,
                  "layer.11.fn.qkv_dwconv": 3 * f}  # fmt: skip
        for key, part in self.parts.items():
            if key.endswith("rel_pos_bias"):
                part.build((None,))
            else:
                part.build(image + (widths.get(key, f),))

    def torch_tensors(self) -> dict:
        """The channel attentions' temperatures by reference suffix."""
        return {f"layer.{i}.fn.temperature": t for i, t in self.temperature.items()}

    def mbconv(self, x):
        p = self.parts
        y = gelu(p["layer.0.fn.2"](gelu(p["layer.0.fn.0"](x))))
        g = tf.reduce_mean(y, axis=[1, 2], keepdims=True)
        g = tf.sigmoid(p["layer.0.fn.4.gate.3"](tf.nn.silu(p["layer.0.fn.4.gate.1"](g))))
        return x + p["layer.0.fn.5"](y * g)

    def attention(self, x, i: int, grid: bool):
        """Window (``grid`` False) or grid self-attention ``layer.<i>`` with its pre-norm and
        residual."""
        p, w, f, heads = self.parts, self.window, self.features, self.HEADS
        s = tf.shape(x)
        t = tf.cast(p[f"layer.{i}.norm"](x), x.dtype)
        t = grid_windows(t, w) if grid else blocks.windows(t, w, w)
        qkv = p[f"layer.{i}.fn.to_qkv"](t)
        q, k, v = (blocks.heads_first(qkv[..., j * f : (j + 1) * f], heads) for j in range(3))
        sim = tf.matmul(q * ((f // heads) ** -0.5), k, transpose_b=True)
        if self.pe:
            bias = p[f"layer.{i}.fn.rel_pos_bias"](tf.constant(self.index))  # [N, N, heads]
            sim = sim + tf.cast(tf.transpose(bias, [2, 0, 1]), sim.dtype)
        out = blocks.heads_last(tf.matmul(blocks.softmax32(sim, q.dtype), v))
        out = p[f"layer.{i}.fn.to_out.0"](out)
        if grid:
            return x + grid_unwindows(out, w, s[1], s[2])
        return x + blocks.unwindows(out, w, w, s[1], s[2])

    def feed_forward(self, x, i: int):
        p = self.parts
        t = tf.cast(p[f"layer.{i}.norm"](x), x.dtype)
        t = p[f"layer.{i}.fn.dwconv"](p[f"layer.{i}.fn.project_in"](t))
        t1, t2 = tf.split(t, 2, axis=-1)
        return x + p[f"layer.{i}.fn.project_out"](gelu(t1) * t2)

    def channel_attention(self, x, i: int, grid: bool):
        """Channel attention ``layer.<i>``: within each window (``grid`` False: d x d over
        its w^2 pixels) or per position within the window (over the windows)."""
        p, w, f, heads = self.parts, self.window, self.features, self.HEADS
        d = f // heads
        s = tf.shape(x)
        t = tf.cast(p[f"layer.{i}.norm"](x), x.dtype)
        qkv = blocks.windows(p[f"layer.{i}.fn.qkv_dwconv"](p[f"layer.{i}.fn.qkv"](t)), w, w)
        n = w * w
        # grid: per part [B, n, heads, d, nW]; else [B nW, heads, d, n]
        shape = [s[0], -1, n, heads, d] if grid else [-1, n, heads, d]
        order = [0, 2, 3, 4, 1] if grid else [0, 2, 3, 1]
        parts = [tf.transpose(tf.reshape(qkv[..., j * f : (j + 1) * f], shape), order)
                 for j in range(3)]  # fmt: skip
        q, k, v = parts
        q, k = blocks.l2_normalize(q, -1), blocks.l2_normalize(k, -1)
        attn = tf.matmul(q, k, transpose_b=True) * tf.cast(self.temperature[str(i)], q.dtype)
        out = tf.matmul(blocks.softmax32(attn, q.dtype), v)
        out = tf.transpose(out, [0, 4, 1, 2, 3] if grid else [0, 3, 1, 2])
        out = blocks.unwindows(tf.reshape(out, [-1, n, f]), w, w, s[1], s[2])
        return x + p[f"layer.{i}.fn.project_out"](out)

    def call(self, x):
        x = self.mbconv(x)
        x = self.attention(x, 2, grid=False)
        x = self.channel_attention(self.feed_forward(x, 4), 5, grid=False)
        x = self.feed_forward(x, 6)
        x = self.attention(x, 8, grid=True)
        x = self.channel_attention(self.feed_forward(x, 10), 11, grid=True)
        return self.feed_forward(x, 12)

    def deployed_parameters(self) -> int:
        """Its weights (``sr.models.complexity.parameters``)."""
        return int(sum(np.prod(w.shape) for w in self.weights))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "features": self.features, "window": self.window,
                "pe": self.pe}  # fmt: skip


def esa(x, features: int, name: str):
    """OmniSR's ESA (RFANet's, without ``conv_max`` and ``conv3_``; ``max(F / 4, 16)``
    channels): ``x`` times a sigmoid gate; sides >= 15."""
    f = max(features // 4, 16)
    c1_ = keras.layers.Conv2D(f, 1, name=f"{name}.conv1")(x)
    c1 = keras.layers.Conv2D(f, 3, strides=2, padding="valid", name=f"{name}.conv2")(c1_)
    v_max = keras.layers.MaxPooling2D(7, strides=3, padding="valid")(c1)
    c3 = keras.layers.Conv2D(f, 3, padding="same", name=f"{name}.conv3")(v_max)
    c3 = ResizeLike()(c3, x)
    cf = keras.layers.Conv2D(f, 1, name=f"{name}.conv_f")(c1_)
    c4 = keras.layers.Conv2D(features, 1, name=f"{name}.conv4")(keras.layers.Add()([c3, cf]))
    return keras.layers.Multiply()([x, keras.layers.Activation("sigmoid")(c4)])


@keras.saving.register_keras_serializable(package="sr")
class PadTo(keras.layers.Layer):
    """Zero padding at the bottom and right to a multiple of ``multiple`` (the reference's
    ``check_image_size``): ``[B, h, w, C] -> [B, h', w', C]``."""

    def __init__(self, multiple: int, **kwargs):
        super().__init__(**kwargs)
        self.multiple = int(multiple)

    def call(self, x):
        m, s = self.multiple, tf.shape(x)
        ph, pw = (m - s[1] % m) % m, (m - s[2] % m) % m
        y = tf.pad(x, [[0, 0], [0, ph], [0, pw], [0, 0]])
        # the channels stated again: a pad by computed amounts loses every static dimension,
        # and LiteRT's converter cannot make CONV_2D of a conv whose input channels are unknown
        return tf.reshape(y, [s[0], s[1] + ph, s[2] + pw, x.shape[-1]])

    def get_config(self):
        return {**super().get_config(), "multiple": self.multiple}


@keras.saving.register_keras_serializable(package="sr")
class CropLike(keras.layers.Layer):
    """``x[:, :scale h, :scale w]`` for ``like`` of ``[B, h, w, C]`` (the reference's crop)."""

    def __init__(self, scale: int, **kwargs):
        super().__init__(**kwargs)
        self.scale = int(scale)

    def call(self, x, like):
        s = tf.shape(like)
        return x[:, : s[1] * self.scale, : s[2] * self.scale]

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


def build(cfg, scale: int, channels: int) -> keras.Model:
    """Build OmniSR (``conf/model/omnisr.yaml``: the paper's x4 model, 805,376 parameters RGB).

    Args:
        cfg: its keys (``sr.models.omnisr.OmniSRConfig``): ``features`` (F, a multiple of 4),
            ``groups`` (OSAGs, the reference's ``res_num``), ``blocks`` (OSA blocks per group,
            ``block_num``), ``window_size``, ``pe`` (relative position bias), ``bias`` (of the
            head, body, group and upsampler convs).
        scale: upscaling factor s (one pixel shuffle of s).
        channels: image channels C (1 for Y, 3 for RGB).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1] (h, w >= 9), output float32
        ``[B, s h, s w, C]``. The reference has no input normalisation.
    """
    f, bias = cfg.features, cfg.bias
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = PadTo(cfg.window_size)(lr)
    head = keras.layers.Conv2D(f, 3, padding="same", use_bias=bias, name="input")(x)
    out = head
    for g in range(cfg.groups):
        name = f"residual_layer.{g}"
        t = out
        for b in range(cfg.blocks):
            t = OSABlock(f, cfg.window_size, cfg.pe, name=f"{name}.residual_layer.{b}")(t)
        t = keras.layers.Conv2D(f, 1, use_bias=bias, name=f"{name}.residual_layer.{cfg.blocks}")(t)
        out = esa(keras.layers.Add()([t, out]), f, f"{name}.esa")
    out = keras.layers.Conv2D(f, 3, padding="same", use_bias=bias, name="output")(out)
    out = keras.layers.Add()([out, head])
    out = keras.layers.Conv2D(channels * scale * scale, 3, padding="same", use_bias=bias,
                              name="up.0")(out)  # fmt: skip
    out = CropLike(scale)(PixelShuffle(scale)(out), lr)
    return keras.Model(lr, float32_output(out), name=f"omnisr_x{scale}")
