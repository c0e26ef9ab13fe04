"""SwinIR (J. Liang, J. Cao, G. Sun, K. Zhang, L. Van Gool and R. Timofte, "SwinIR: Image
Restoration Using Swin Transformer", ICCV Workshops 2021). Reference code:
github.com/JingyunLiang/SwinIR ``models/network_swinir.py`` (BasicSR's
``basicsr/archs/swinir_arch.py`` is the same network), as spandrel copies it
(``spandrel/architectures/SwinIR/__arch/SwinIR.py``).

A 3x3 conv to ``embed_dim`` channels, a layer norm (``patch_norm``), residual Swin Transformer
groups (``depths[i]`` blocks of window self-attention with a relative position bias, every odd
block's windows shifted by half a window, and an MLP; a conv after each group, added to its
input), a layer norm, a conv after the body added to the first conv, and one of the reference's
upsamplers: ``pixelshuffle`` (classical), ``pixelshuffledirect`` (lightweight), ``nearest+conv``
(real-world). RGB loses the DIV2K mean on the way in and gets it back (``img_range`` 1).

Any input size: the input is reflect-padded at the bottom and right to a multiple of the window
(the reference's ``check_image_size``), the shifted windows' mask is computed for the padded
size in the graph (the reference's ``calculate_mask``), and the output is cropped to ``s h x
s w``. Attention reaches across a whole window and the padding depends on the image size, so a
tile's pixels differ slightly from the whole image's at its seams (``local=False``).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from sr.models.layers import denormalized, float32_output, input_mean, normalized
from sr.models.swinir import blocks


@keras.saving.register_keras_serializable(package="sr")
class SwinBlock(keras.layers.Layer):
    """One Swin Transformer block on ``[B, H, W, dim]`` (H, W multiples of ``window``):
    ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))`` (SwinIR's ``SwinTransformerBlock``).

    Its weights are the sublayers of :attr:`parts`, keyed by the reference's names under the
    block (``norm1``, ``attn.qkv``, ``mlp.fc1``, ...), and ``attn.relative_position_bias_table``
    ``[(2 window - 1)^2, heads]`` (:meth:`torch_tensors`).

    Args:
        dim: channels.
        heads: attention heads (``dim`` a multiple of it).
        window: window side.
        shift: windows shifted by ``window // 2`` (odd blocks).
        mlp_ratio: the MLP's hidden channels over ``dim`` (``int(dim * mlp_ratio)``).
        qkv_bias: the q, k, v projection has a bias.
        drop_path: stochastic depth rate in training.
    """

    def __init__(self, dim, heads, window, shift, mlp_ratio, qkv_bias=True, drop_path=0.0,
                 **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        self.dim, self.heads, self.window = int(dim), int(heads), int(window)
        self.shift, self.mlp_ratio = bool(shift), float(mlp_ratio)
        self.qkv_bias, self.drop_path = bool(qkv_bias), float(drop_path)
        self.seed = keras.random.SeedGenerator(0)
        self.index = blocks.relative_index(self.window).reshape(-1).astype(np.int32)
        self.parts = dict(self.part_list())
        self.table = self.add_weight(
            name="relative_position_bias_table",
            shape=((2 * self.window - 1) ** 2, self.heads),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        )

    def _dense(self, units, key, bias=True):
        return key, keras.layers.Dense(units, use_bias=bias, name=f"{self.name}.{key}")

    def part_list(self) -> list:
        """``(reference suffix, sublayer)`` pairs of the block, in the reference's order."""
        c, hidden = self.dim, int(self.dim * self.mlp_ratio)
        return [
            ("norm1", blocks.layer_norm(f"{self.name}.norm1")),
            self._dense(3 * c, "attn.qkv", self.qkv_bias),
            self._dense(c, "attn.proj"),
            ("norm2", blocks.layer_norm(f"{self.name}.norm2")),
            self._dense(hidden, "mlp.fc1"),
            self._dense(c, "mlp.fc2"),
        ]

    def build(self, input_shape):
        c, hidden = self.dim, int(self.dim * self.mlp_ratio)
        for key, part in self.parts.items():
            part.build((None, None, hidden if key == "mlp.fc2" else c))

    def torch_tensors(self) -> dict:
        """The block's own variables by reference suffix."""
        return {"attn.relative_position_bias_table": self.table}

    def position_bias(self):
        """``[heads, N, N]`` float32: the table at the relative position index."""
        n = self.window**2
        bias = tf.gather(self.table, tf.constant(self.index))
        return tf.transpose(tf.reshape(bias, [n, n, self.heads]), [2, 0, 1])

    def attention(self, x):
        """Window self-attention of ``x`` ``[B, H, W, dim]`` (normalised): the same shape."""
        p, c, w = self.parts, self.dim, self.window
        s = tf.shape(x)
        half = w // 2 if self.shift else 0
        if half:
            x = blocks.rolled(x, -half, -half)
        qkv = p["attn.qkv"](blocks.windows(x, w, w))
        q, k, v = (blocks.heads_first(qkv[..., j * c : (j + 1) * c], self.heads)
                   for j in range(3))  # fmt: skip
        q = q * ((c // self.heads) ** -0.5)
        mask = blocks.shift_mask(s[1], s[2], w, half) if half else None
        out = blocks.attend(q, k, v, self.position_bias(), mask)
        out = blocks.unwindows(p["attn.proj"](blocks.heads_last(out)), w, w, s[1], s[2])
        return blocks.rolled(out, half, half) if half else out

    def mlp(self, x):
        p = self.parts
        return p["mlp.fc2"](blocks.gelu(p["mlp.fc1"](x)))

    def call(self, x, training=None):
        p = self.parts
        y = self.attention(tf.cast(p["norm1"](x), x.dtype))
        x = x + blocks.drop_path(y, self.drop_path, training, self.seed)
        y = self.mlp(tf.cast(p["norm2"](x), x.dtype))
        return x + blocks.drop_path(y, self.drop_path, training, self.seed)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(), "dim": self.dim, "heads": self.heads, "window": self.window,
            "shift": self.shift, "mlp_ratio": self.mlp_ratio, "qkv_bias": self.qkv_bias,
            "drop_path": self.drop_path,
        }  # fmt: skip


def drop_rates(depths: list[int], rate: float) -> list[float]:
    """The reference's stochastic depth per block: ``linspace(0, rate, sum(depths))``."""
    total = sum(depths)
    return [float(r) for r in np.linspace(0, rate, total)] if total > 1 else [0.0]


def body(x, cfg, group, name: str = "norm"):
    """The residual groups and the final norm on ``x`` ``[B, H, W, dim]`` (after the patch
    norm): ``group(t, i, rates)`` makes group i's blocks (its residual conv included)."""
    rates = drop_rates(list(cfg.depths), cfg.drop_path_rate)
    t, n = x, 0
    for i, depth in enumerate(cfg.depths):
        t = keras.layers.Add()([t, group(t, i, rates[n : n + depth])])
        n += depth
    return blocks.layer_norm(name)(t)


def build(cfg, scale: int, channels: int) -> keras.Model:
    """Build SwinIR (``conf/model/swinir.yaml``: classical x4, 11,900,199 parameters at RGB).

    Args:
        cfg: its keys (``sr.models.swinir.SwinIRConfig``): ``embed_dim``, ``depths`` (blocks
            per group), ``heads`` (per group), ``window``, ``mlp_ratio``, ``qkv_bias``,
            ``patch_norm``, ``resi_connection`` (``1conv`` | ``3conv``), ``upsampler``
            (``pixelshuffle`` | ``pixelshuffledirect`` | ``nearest+conv``), ``img_range``,
            ``drop_path_rate`` (training only), ``img_size`` (only the reference's mask buffer
            shape, for the layout).
        scale: upscaling factor (pixelshuffle: 2^n or 3; nearest+conv: 2, 4, 8; direct: any).
        channels: image channels C (1 for Y, 3 for RGB; RGB loses the DIV2K mean).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1] (any h, w of at least half a
        window), output float32 ``[B, s h, s w, C]``.
    """
    dim, window = cfg.embed_dim, cfg.window
    mean = input_mean("div2k_mean" if channels == 3 else "none", channels)
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = normalized(blocks.WindowPad(window)(lr), mean, cfg.img_range)
    first = blocks.conv(dim, 3, "conv_first")(x)
    t = blocks.layer_norm("patch_embed.norm")(first) if cfg.patch_norm else first

    def group(t, i, rates):
        for b, rate in enumerate(rates):
            t = SwinBlock(dim, cfg.heads[i], window, b % 2 == 1, cfg.mlp_ratio, cfg.qkv_bias,
                          rate, name=f"layers.{i}.residual_group.blocks.{b}")(t)  # fmt: skip
        return blocks.resi_conv(t, dim, cfg.resi_connection, f"layers.{i}.conv")

    t = body(t, cfg, group)
    x = keras.layers.Add()([blocks.resi_conv(t, dim, cfg.resi_connection, "conv_after_body"),
                            first])  # fmt: skip
    x = blocks.upsampled(x, cfg.upsampler, scale, channels)
    x = blocks.CropTo(scale)([denormalized(x, mean, cfg.img_range), lr])
    return keras.Model(lr, float32_output(x), name=f"swinir_x{scale}")
