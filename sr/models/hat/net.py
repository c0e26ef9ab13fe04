"""HAT, the Hybrid Attention Transformer (X. Chen, X. Wang, J. Zhou, Y. Qiao and C. Dong,
"Activating More Pixels in Image Super-Resolution Transformer", CVPR 2023). Reference code:
github.com/XPixelGroup/HAT ``hat/archs/hat_arch.py``, as spandrel copies it
(``spandrel/architectures/HAT/__arch/HAT.py``).

SwinIR's frame (a conv, a patch norm, residual groups with a conv each, a norm, a conv after the
body, BasicSR's pixelshuffle upsampler; :mod:`sr.models.swinir.blocks`) whose groups hold hybrid
attention blocks (HAB: Swin window attention, shifted in odd blocks, plus a channel attention
conv block scaled by ``conv_scale``, and an MLP) and end with an overlapping cross-attention
block (OCAB: queries in ``w x w`` windows attend to keys and values in overlapping windows of
``w + int(w * overlap_ratio)``, zero-padded at the border, as the reference's ``nn.Unfold``).

Any input size: reflect padding to a multiple of the window (the reference's
``check_image_size``), the shifted windows' mask computed for the padded size in the graph
(``calculate_mask``), the output cropped. The overlapping windows are made by reshapes, slices
and concatenations (no ``ExtractImagePatches``, which TFLite lacks).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from sr.models.layers import denormalized, float32_output, input_mean, normalized
from sr.models.swinir import blocks
from sr.models.swinir.net import SwinBlock, body


def overlap_size(window: int, ratio: float) -> int:
    """The side of OCAB's key/value windows: ``int(window * ratio) + window``."""
    return int(window * ratio) + window


def overlap_index(window: int, ratio: float) -> np.ndarray:
    """HAT's ``calculate_rpi_oca``: int64 ``[w^2, o^2]`` (o = :func:`overlap_size`), the index
    into the ``[(w + o - 1)^2, heads]`` table of query i's offset to key j. The reference's
    shift ``w - o + 1`` does not start it from 0: its negative entries index the table from its
    end (PyTorch's indexing), as :class:`OCAB` reads them."""
    o = overlap_size(window, ratio)

    def grid(n):
        return np.stack(np.meshgrid(np.arange(n), np.arange(n), indexing="ij")).reshape(2, -1)

    rel = grid(o)[:, None, :] - grid(window)[:, :, None] + window - o + 1
    return (rel[0] * (window + o - 1) + rel[1]).astype(np.int64)


def overlap_windows(x, window: int, size: int):
    """``nn.Unfold(size, stride=window, padding=(size - window) // 2)`` of ``[B, H, W, c]``
    (H, W multiples of ``window``; ``size - window`` even and at most ``window``), as
    ``[B nW, size^2, c]``: windows in row-major order, pixels row-major in each."""
    p, e, c = (size - window) // 2, size - window, x.shape[-1]
    x = tf.pad(x, [[0, 0], [p, window - p], [p, window - p], [0, 0]])
    s = tf.shape(x)
    nh, nw = s[1] // window - 1, s[2] // window - 1
    x = tf.reshape(x, [s[0], nh + 1, window, s[2], c])
    x = tf.concat([x[:, :-1], x[:, 1:, :e]], axis=2)  # [B, nh, size, Wp, c]
    x = tf.reshape(x, [s[0] * nh, size, nw + 1, window, c])
    x = tf.concat([x[:, :, :-1], x[:, :, 1:, :e]], axis=3)  # [B nh, size, nw, size, c]
    x = tf.transpose(x, [0, 2, 1, 3, 4])
    return tf.reshape(x, [-1, size * size, c])


@keras.saving.register_keras_serializable(package="sr")
class HAB(SwinBlock):
    """The hybrid attention block on ``[B, H, W, dim]``: ``x + attn(n) + conv_scale cab(n)``
    with ``n = norm1(x)``, then ``x + mlp(norm2(x))``; ``cab`` is a 3x3 conv to
    ``dim // compress``, GELU, a 3x3 conv back, and channel attention (mean, 1x1 conv to
    ``dim // squeeze``, ReLU, 1x1 conv back, sigmoid, product). Other args: :class:`SwinBlock`.
    """

    def __init__(self, *args, compress=3, squeeze=30, conv_scale=0.01, **kwargs):
        self.compress, self.squeeze = int(compress), int(squeeze)
        self.conv_scale = float(conv_scale)
        super().__init__(*args, **kwargs)

    def part_list(self) -> list:
        c, name = self.dim, self.name
        cab = "conv_block.cab"
        parts = super().part_list()
        parts[3:3] = [
            (f"{cab}.0", blocks.conv(c // self.compress, 3, f"{name}.{cab}.0")),
            (f"{cab}.2", blocks.conv(c, 3, f"{name}.{cab}.2")),
            (f"{cab}.3.attention.1", blocks.conv(c // self.squeeze, 1,
                                                 f"{name}.{cab}.3.attention.1")),
            (f"{cab}.3.attention.3", blocks.conv(c, 1, f"{name}.{cab}.3.attention.3")),
        ]  # fmt: skip
        return parts

    def build(self, input_shape):
        c, cab = self.dim, "conv_block.cab"
        inner = {f"{cab}.2": c // self.compress, f"{cab}.3.attention.3": c // self.squeeze}
        for key, part in self.parts.items():
            width = inner.get(key, int(c * self.mlp_ratio) if key == "mlp.fc2" else c)
            part.build((None, None, None, width))

    def cab(self, x):
        p, cab = self.parts, "conv_block.cab"
        y = p[f"{cab}.2"](blocks.gelu(p[f"{cab}.0"](x)))
        a = tf.reduce_mean(y, axis=[1, 2], keepdims=True)
        a = p[f"{cab}.3.attention.3"](tf.nn.relu(p[f"{cab}.3.attention.1"](a)))
        return y * tf.sigmoid(a)

    def call(self, x, training=None):
        p = self.parts
        n = tf.cast(p["norm1"](x), x.dtype)
        y = blocks.drop_path(self.attention(n), self.drop_path, training, self.seed)
        x = x + y + self.cab(n) * self.conv_scale
        y = self.mlp(tf.cast(p["norm2"](x), x.dtype))
        return x + blocks.drop_path(y, self.drop_path, training, self.seed)

    def get_config(self):
        return {**super().get_config(), "compress": self.compress, "squeeze": self.squeeze,
                "conv_scale": self.conv_scale}  # fmt: skip


@keras.saving.register_keras_serializable(package="sr")
class OCAB(keras.layers.Layer):
    """The overlapping cross-attention block on ``[B, H, W, dim]`` (H, W multiples of
    ``window``): ``x + proj(attn(norm1(x)))``, then ``x + mlp(norm2(x))``; queries in
    ``window``-windows, keys and values in the overlapping windows of :func:`overlap_windows`,
    the relative position bias of :func:`overlap_index` (``relative_position_bias_table``
    ``[(w + o - 1)^2, heads]``)."""

    def __init__(self, dim, heads, window, overlap_ratio, mlp_ratio, qkv_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.heads, self.window = int(dim), int(heads), int(window)
        self.overlap_ratio, self.mlp_ratio = float(overlap_ratio), float(mlp_ratio)
        self.qkv_bias = bool(qkv_bias)
        self.size = overlap_size(self.window, self.overlap_ratio)
        rows = (self.window + self.size - 1) ** 2
        index = overlap_index(self.window, self.overlap_ratio).reshape(-1)
        self.index = np.mod(index, rows).astype(np.int32)  # PyTorch's negative indexing
        c, hidden, n = self.dim, int(self.dim * self.mlp_ratio), self.name

        def dense(units, key, bias=True):
            return key, keras.layers.Dense(units, use_bias=bias, name=f"{n}.{key}")

        self.parts = dict([
            ("norm1", blocks.layer_norm(f"{n}.norm1")), dense(3 * c, "qkv", self.qkv_bias),
            dense(c, "proj"), ("norm2", blocks.layer_norm(f"{n}.norm2")),
            dense(hidden, "mlp.fc1"), dense(c, "mlp.fc2"),
        ])  # fmt: skip
        self.table = self.add_weight(
            name="relative_position_bias_table",
            shape=((self.window + self.size - 1) ** 2, self.heads),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        )

    def build(self, input_shape):
        hidden = int(self.dim * self.mlp_ratio)
        for key, part in self.parts.items():
            part.build((None, None, hidden if key == "mlp.fc2" else self.dim))

    def torch_tensors(self) -> dict:
        return {"relative_position_bias_table": self.table}

    def attention(self, x):
        p, c, w = self.parts, self.dim, self.window
        s = tf.shape(x)
        qkv = p["qkv"](x)
        q = blocks.heads_first(blocks.windows(qkv[..., :c], w, w), self.heads)
        kv = overlap_windows(qkv[..., c:], w, self.size)
        k, v = (blocks.heads_first(kv[..., j * c : (j + 1) * c], self.heads) for j in (0, 1))
        q = q * ((c // self.heads) ** -0.5)
        bias = tf.gather(self.table, tf.constant(self.index))
        bias = tf.transpose(tf.reshape(bias, [w * w, self.size**2, self.heads]), [2, 0, 1])
        out = blocks.heads_last(blocks.attend(q, k, v, bias))
        return blocks.unwindows(out, w, w, s[1], s[2])

    def call(self, x):
        p = self.parts
        x = p["proj"](self.attention(tf.cast(p["norm1"](x), x.dtype))) + x
        return x + p["mlp.fc2"](blocks.gelu(p["mlp.fc1"](tf.cast(p["norm2"](x), x.dtype))))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(), "dim": self.dim, "heads": self.heads, "window": self.window,
            "overlap_ratio": self.overlap_ratio, "mlp_ratio": self.mlp_ratio,
            "qkv_bias": self.qkv_bias,
        }  # fmt: skip


def build(cfg, scale: int, channels: int) -> keras.Model:
    """Build HAT (``conf/model/hat.yaml``: HAT x4, 20,772,507 parameters at RGB).

    Args:
        cfg: its keys (``sr.models.hat.HATConfig``): SwinIR's (``embed_dim``, ``depths``,
            ``heads``, ``window``, ``mlp_ratio``, ``qkv_bias``, ``patch_norm``,
            ``resi_connection`` (``1conv`` | ``identity``), ``img_range``,
            ``drop_path_rate``, ``img_size``) and ``compress_ratio``, ``squeeze_factor``,
            ``conv_scale`` (the conv block's), ``overlap_ratio`` (OCAB's), ``num_feat`` (the
            upsampler's channels).
        scale: upscaling factor (2^n or 3).
        channels: image channels C (1 for Y, 3 for RGB; RGB loses the DIV2K mean).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1] (any h, w of at least half a
        window), output float32 ``[B, s h, s w, C]``.
    """
    dim, window = cfg.embed_dim, cfg.window
    mean = input_mean("div2k_mean" if channels == 3 else "none", channels)
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = blocks.WindowPad(window)(normalized(lr, mean, cfg.img_range))
    first = blocks.conv(dim, 3, "conv_first")(x)
    t = blocks.layer_norm("patch_embed.norm")(first) if cfg.patch_norm else first

    def group(t, i, rates):
        name = f"layers.{i}.residual_group"
        for b, rate in enumerate(rates):
            t = HAB(dim, cfg.heads[i], window, b % 2 == 1, cfg.mlp_ratio, cfg.qkv_bias, rate,
                    compress=cfg.compress_ratio, squeeze=cfg.squeeze_factor,
                    conv_scale=cfg.conv_scale, name=f"{name}.blocks.{b}")(t)  # fmt: skip
        t = OCAB(dim, cfg.heads[i], window, cfg.overlap_ratio, cfg.mlp_ratio, cfg.qkv_bias,
                 name=f"{name}.overlap_attn")(t)  # fmt: skip
        return blocks.resi_conv(t, dim, cfg.resi_connection, f"layers.{i}.conv")

    t = body(t, cfg, group)
    x = keras.layers.Add()([blocks.resi_conv(t, dim, cfg.resi_connection, "conv_after_body"),
                            first])  # fmt: skip
    x = blocks.upsampled(x, "pixelshuffle", scale, channels, cfg.num_feat)
    x = blocks.CropTo(scale)([denormalized(x, mean, cfg.img_range), lr])
    return keras.Model(lr, float32_output(x), name=f"hat_x{scale}")
