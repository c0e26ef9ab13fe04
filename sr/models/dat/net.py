"""DAT, the Dual Aggregation Transformer (Z. Chen, Y. Zhang, J. Gu, L. Kong, X. Yang and F. Yu,
"Dual Aggregation Transformer for Image Super-Resolution", ICCV 2023). Reference code:
github.com/zhengchen1999/DAT ``basicsr/archs/dat_arch.py``, as spandrel copies it
(``spandrel/architectures/DAT/__arch/DAT.py``).

A 3x3 conv to ``embed_dim`` channels, residual groups of dual aggregation Transformer blocks
(even blocks: spatial window attention on two halves of the channels, one in ``s0 x s1``
windows, the other in ``s1 x s0``, shifted in some blocks; odd blocks: channel attention over
the whole image), each block's attention joined to a depthwise conv branch by the adaptive
interaction module, and a spatial-gate feed-forward network; a conv after each group and after
the body, and BasicSR's upsamplers (``pixelshuffle``: conv, LeakyReLU, pixel shuffles of 2,
conv; ``pixelshuffledirect``: one conv and a pixel shuffle of the scale). The input loses the
DIV2K RGB mean (RGB; nothing on Y) and gains it back on the output, as the reference.

Any input size: each spatial attention pads its q, k, v with zeros at the bottom and right to a
multiple of the larger window side and crops its output back (the reference's own padding, in
every spatial block; there is no ``check_image_size``); the shifted windows' mask is computed for
the padded size, as the reference's ``calculate_mask``. The channel attention reads the whole
image: tiles differ from the whole image at their seams (``local=False``).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from sr.models.dat import blocks
from sr.models.layers import (
    LeakyReLU,
    PixelShuffle,
    denormalized,
    float32_output,
    input_mean,
    normalized,
)

EPS = 1e-5  # nn.LayerNorm's and nn.BatchNorm2d's


def layer_norm(name: str):
    """PyTorch's ``nn.LayerNorm`` over the last axis (eps 1e-5), in float32."""
    return keras.layers.LayerNormalization(epsilon=EPS, name=name, dtype="float32")


def batch_norm(name: str):
    """PyTorch's ``nn.BatchNorm2d`` (eps 1e-5, momentum 0.1 of the new statistics)."""
    return keras.layers.BatchNormalization(epsilon=EPS, momentum=0.9, name=name)


def gelu(x):
    """PyTorch's ``nn.GELU()`` (the erf form), written with ``erf``: TensorFlow's exact GELU
    computes ``erfc``, which tf2onnx cannot convert."""
    return 0.5 * x * (1.0 + tf.math.erf(x * 0.7071067811865476))


def rolled(x, dh: int, dw: int):
    """``torch.roll(x, (dh, dw), dims=(1, 2))`` for ``[B, H, W, c]`` by slicing and
    concatenation (no ``Roll`` op, which TFLite lacks); ``|dh| < H``, ``|dw| < W``."""
    if dh:
        x = tf.concat([x[:, -dh:], x[:, :-dh]], axis=1)
    if dw:
        x = tf.concat([x[:, :, -dw:], x[:, :, :-dw]], axis=2)
    return x


def shifted(group: int, block: int) -> bool:
    """Whether block ``block`` of residual group ``group`` shifts its windows (the reference's
    rule: blocks 2, 6, 10, ... of even groups; 0, 4, 8, ... of odd groups)."""
    if group % 2 == 0:
        return block > 0 and (block - 2) % 4 == 0
    return block % 4 == 0


@keras.saving.register_keras_serializable(package="sr")
class DATBlock(keras.layers.Layer):
    """One dual aggregation Transformer block, ``[B, H, W, dim] -> [B, H, W, dim]``:
    ``x + attn(norm1(x))``, then ``x + ffn(norm2(x))`` (the reference's ``DATB``).

    Its weights are the sublayers of :attr:`parts`, keyed by the reference's names under the
    block (``attn.qkv``, ``ffn.sg.conv``, ...), and for a channel block ``attn.temperature``.

    Args:
        dim: channels.
        heads: attention heads (a spatial block gives half of them to each window shape).
        split: the window ``(s0, s1)``; shifts are half of it.
        expansion: the feed-forward network's hidden channels over ``dim``.
        qkv_bias: the q, k, v projection has a bias.
        spatial: spatial window attention (even blocks), else channel attention.
        shift: the spatial windows are shifted (:func:`shifted`).
        drop_path: stochastic depth rate in training.
    """

    def __init__(self, dim, heads, split, expansion, qkv_bias, spatial, shift, drop_path=0.0,
                 **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        self.dim, self.heads, self.split = int(dim), int(heads), tuple(int(s) for s in split)
        self.expansion, self.qkv_bias = float(expansion), bool(qkv_bias)
        self.spatial, self.shift, self.drop_path = bool(spatial), bool(shift), float(drop_path)
        self.seed = keras.random.SeedGenerator(0)
        self.parts = self._parts()
        if not self.spatial:
            self.temperature = self.add_weight(
                name="temperature", shape=(self.heads, 1, 1), initializer="ones"
            )
        if self.spatial:
            s0, s1 = self.split
            self.index = [blocks.relative_index(s0, s1), blocks.relative_index(s1, s0)]
            self.biases = [rpe_biases(s0, s1), rpe_biases(s1, s0)]

    def _parts(self) -> dict:
        c, hidden = self.dim, int(self.dim * self.expansion)

        def dense(units, key, bias=True):
            return key, keras.layers.Dense(units, use_bias=bias, name=f"{self.name}.{key}")

        def conv(units, key):
            return key, keras.layers.Conv2D(units, 1, name=f"{self.name}.{key}")

        def dw(key):
            return key, keras.layers.DepthwiseConv2D(3, padding="same", name=f"{self.name}.{key}")

        def ln(key):
            return key, layer_norm(f"{self.name}.{key}")

        def bn(key):
            return key, batch_norm(f"{self.name}.{key}")

        ci, si = "attn.channel_interaction", "attn.spatial_interaction"
        parts = [ln("norm1"), ln("norm2"), dense(3 * c, "attn.qkv", self.qkv_bias)]
        parts += [dense(c, "attn.proj"), dw("attn.dwconv.0"), bn("attn.dwconv.1")]
        parts += [conv(c // 8, f"{ci}.1"), bn(f"{ci}.2"), conv(c, f"{ci}.4")]
        parts += [conv(c // 16, f"{si}.0"), bn(f"{si}.1"), conv(1, f"{si}.3")]
        parts += [dense(hidden, "ffn.fc1"), ln("ffn.sg.norm"), dw("ffn.sg.conv")]
        parts += [dense(c, "ffn.fc2")]
        if self.spatial:
            pos_dim = (c // 2 // 4) // 4
            for i in (0, 1):
                p = f"attn.attns.{i}.pos"
                parts += [dense(pos_dim, f"{p}.pos_proj")]
                for j, units in ((1, pos_dim), (2, pos_dim), (3, self.heads // 2)):
                    parts += [ln(f"{p}.pos{j}.0"), dense(units, f"{p}.pos{j}.2")]
        return dict(parts)

    def build(self, input_shape):
        c, hidden = self.dim, int(self.dim * self.expansion)
        p = self.parts
        image = (None, None, None)
        for key in (
            "norm1",
            "norm2",
            "attn.qkv",
            "attn.dwconv.0",
            "attn.dwconv.1",
            "attn.channel_interaction.1",
            "attn.spatial_interaction.0",
            "ffn.fc1",
        ):
            p[key].build(image + (c,))  # fmt: skip
        p["attn.proj"].build(image + (c,))
        p["attn.channel_interaction.2"].build(image + (c // 8,))
        p["attn.channel_interaction.4"].build(image + (c // 8,))
        p["attn.spatial_interaction.1"].build(image + (c // 16,))
        p["attn.spatial_interaction.3"].build(image + (c // 16,))
        for key in ("ffn.sg.norm", "ffn.sg.conv", "ffn.fc2"):
            p[key].build(image + (hidden // 2,))
        if self.spatial:
            pos_dim = (c // 2 // 4) // 4
            for i in (0, 1):
                p[f"attn.attns.{i}.pos.pos_proj"].build((None, 2))
                for j in (1, 2, 3):
                    p[f"attn.attns.{i}.pos.pos{j}.0"].build((None, pos_dim))
                    p[f"attn.attns.{i}.pos.pos{j}.2"].build((None, pos_dim))

    def deployed_parameters(self) -> int:
        """Its trainable weights (``sr.models.complexity.parameters``): the BatchNorm statistics
        are buffers in PyTorch's count and the paper's."""
        return int(sum(np.prod(w.shape) for w in self.trainable_weights))

    def torch_tensors(self) -> dict:
        """The block's own variables by reference suffix: a channel block's temperature."""
        return {} if self.spatial else {"attn.temperature": self.temperature}

    def position_bias(self, i: int, dtype):
        """Branch ``i``'s dynamic relative position bias: ``[heads/2, N, N]``."""
        p, key = self.parts, f"attn.attns.{i}.pos"
        pos = p[f"{key}.pos_proj"](tf.constant(self.biases[i]))
        for j in (1, 2, 3):
            pos = p[f"{key}.pos{j}.2"](tf.nn.relu(p[f"{key}.pos{j}.0"](pos)))
        n = self.index[i].shape[0]
        bias = tf.gather(pos, tf.constant(self.index[i].reshape(-1)))
        return tf.cast(tf.transpose(tf.reshape(bias, [n, n, -1]), [2, 0, 1]), dtype)

    def window_attention(self, qkv, i: int, height, width):
        """Branch ``i`` on ``qkv`` ``[B, Hp, Wp, 3 c]`` (q, k, v of its ``c = dim / 2``
        channels, sides multiples of its windows): ``[B, Hp, Wp, c]``."""
        s0, s1 = self.split
        wh, ww = (s0, s1) if i == 0 else (s1, s0)
        heads, c = self.heads // 2, self.dim // 2
        win = blocks.windows(qkv, wh, ww)  # [B nW, N, 3c]
        q, k, v = (blocks.heads_first(win[..., j * c : (j + 1) * c], heads) for j in range(3))
        q = q * ((c // heads) ** -0.5)
        attn = tf.matmul(q, k, transpose_b=True) + self.position_bias(i, q.dtype)
        if self.shift:
            n = wh * ww
            mask = blocks.shift_mask(height, width, wh, ww, wh // 2, ww // 2)
            attn = tf.reshape(attn, [-1, tf.shape(mask)[0], heads, n, n])
            mask = tf.cast(tf.reshape(mask, [1, -1, 1, n, n]), attn.dtype)
            attn = tf.reshape(attn + mask, [-1, heads, n, n])
        out = blocks.heads_last(tf.matmul(blocks.softmax32(attn, q.dtype), v))
        return blocks.unwindows(out, wh, ww, height, width)

    def spatial_attention(self, qkv):
        """The two window branches on ``qkv`` ``[B, H, W, 3 dim]``: ``[B, H, W, dim]``."""
        s = tf.shape(qkv)
        h, w = s[1], s[2]
        m = max(self.split)
        qkv = tf.pad(qkv, [[0, 0], [0, (m - h % m) % m], [0, (m - w % m) % m], [0, 0]])
        hp, wp = tf.shape(qkv)[1], tf.shape(qkv)[2]
        c, half = self.dim, self.dim // 2
        outs = []
        for i in (0, 1):
            part = tf.concat([qkv[..., j * c + i * half : j * c + (i + 1) * half]
                              for j in range(3)], axis=-1)  # fmt: skip
            sh, sw = (self.split[0] // 2, self.split[1] // 2)
            sh, sw = (sh, sw) if i == 0 else (sw, sh)
            if self.shift:
                part = rolled(part, -sh, -sw)
            out = self.window_attention(part, i, hp, wp)
            if self.shift:
                out = rolled(out, sh, sw)
            outs.append(out[:, :h, :w])
        return tf.concat(outs, axis=-1)

    def channel_attention(self, qkv):
        """XCiT's channel attention on ``qkv`` ``[B, H, W, 3 dim]``: ``[B, H, W, dim]``."""
        s = tf.shape(qkv)
        c, heads = self.dim, self.heads
        d = c // heads
        flat = tf.reshape(qkv, [s[0], -1, 3 * c])

        def split(j):  # [B, heads, d, N]
            t = tf.reshape(flat[..., j * c : (j + 1) * c], [s[0], -1, heads, d])
            return tf.transpose(t, [0, 2, 3, 1])

        q, k, v = split(0), split(1), split(2)
        q, k = blocks.l2_normalize(q, -1), blocks.l2_normalize(k, -1)
        attn = tf.matmul(q, k, transpose_b=True) * tf.cast(self.temperature, q.dtype)
        out = tf.matmul(blocks.softmax32(attn, q.dtype), v)  # [B, heads, d, N]
        out = tf.transpose(out, [0, 3, 1, 2])
        return tf.reshape(out, [s[0], s[1], s[2], c])

    def interaction(self, key, x, training):
        p = self.parts
        if key == "channel":
            t = tf.reduce_mean(x, axis=[1, 2], keepdims=True)
            t = p["attn.channel_interaction.1"](t)
            t = gelu(p["attn.channel_interaction.2"](t, training=training))
            return p["attn.channel_interaction.4"](t)
        t = p["attn.spatial_interaction.0"](x)
        t = gelu(p["attn.spatial_interaction.1"](t, training=training))
        return p["attn.spatial_interaction.3"](t)

    def attention(self, x, training):
        p, c = self.parts, self.dim
        qkv = p["attn.qkv"](x)
        v = qkv[..., 2 * c :]
        conv_x = gelu(p["attn.dwconv.1"](p["attn.dwconv.0"](v), training=training))
        if self.spatial:
            att = self.spatial_attention(qkv)
            cmap = self.interaction("channel", conv_x, training)
            smap = self.interaction("spatial", att, training)
        else:
            att = self.channel_attention(qkv)
            cmap = self.interaction("channel", att, training)
            smap = self.interaction("spatial", conv_x, training)
        att_gate, conv_gate = (cmap, smap) if self.spatial else (smap, cmap)
        x = att * tf.sigmoid(att_gate) + conv_x * tf.sigmoid(conv_gate)
        return p["attn.proj"](x)

    def ffn(self, x):
        """The spatial-gate feed-forward network (SGFN)."""
        p = self.parts
        x = gelu(p["ffn.fc1"](x))
        x1, x2 = tf.split(x, 2, axis=-1)
        x2 = p["ffn.sg.conv"](tf.cast(p["ffn.sg.norm"](x2), x1.dtype))
        return p["ffn.fc2"](x1 * x2)

    def call(self, x, training=None):
        p = self.parts
        y = self.attention(tf.cast(p["norm1"](x), x.dtype), training)
        x = x + blocks.drop_path(y, self.drop_path, training, self.seed)
        y = self.ffn(tf.cast(p["norm2"](x), x.dtype))
        return x + blocks.drop_path(y, self.drop_path, training, self.seed)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(), "dim": self.dim, "heads": self.heads,
            "split": list(self.split), "expansion": self.expansion, "qkv_bias": self.qkv_bias,
            "spatial": self.spatial, "shift": self.shift, "drop_path": self.drop_path,
        }  # fmt: skip


def rpe_biases(wh: int, ww: int) -> np.ndarray:
    """The reference's ``rpe_biases``: float32 ``[(2 wh - 1)(2 ww - 1), 2]``, every relative
    offset (dh, dw), dh outer."""
    grid = np.meshgrid(np.arange(1 - wh, wh), np.arange(1 - ww, ww), indexing="ij")
    return np.ascontiguousarray(np.stack(grid).reshape(2, -1).T, dtype=np.float32)


def resi_conv(x, dim: int, kind: str, name: str):
    """The conv after a residual group or the body: ``1conv`` (3x3) or ``3conv`` (3x3 to
    dim/4, LeakyReLU 0.2, 1x1, LeakyReLU 0.2, 3x3 back to dim)."""
    if kind == "1conv":
        return keras.layers.Conv2D(dim, 3, padding="same", name=name)(x)
    x = keras.layers.Conv2D(dim // 4, 3, padding="same", name=f"{name}.0")(x)
    x = keras.layers.Conv2D(dim // 4, 1, name=f"{name}.2")(LeakyReLU(0.2)(x))
    return keras.layers.Conv2D(dim, 3, padding="same", name=f"{name}.4")(LeakyReLU(0.2)(x))


def upsampled(x, upsampler: str, scale: int, channels: int):
    """BasicSR's reconstruction: ``pixelshuffle`` (conv to 64, LeakyReLU 0.01, conv and pixel
    shuffle of 2 per factor 2, conv to C) or ``pixelshuffledirect`` (conv to C s^2, pixel
    shuffle of s)."""
    if upsampler == "pixelshuffledirect":
        x = keras.layers.Conv2D(channels * scale * scale, 3, padding="same", name="upsample.0")(x)
        return PixelShuffle(scale)(x)
    x = keras.layers.Conv2D(64, 3, padding="same", name="conv_before_upsample.0")(x)
    x = LeakyReLU(0.01)(x)
    factors = [3] if scale == 3 else [2] * (scale.bit_length() - 1)
    for i, f in enumerate(factors):
        x = keras.layers.Conv2D(64 * f * f, 3, padding="same", name=f"upsample.{2 * i}")(x)
        x = PixelShuffle(f)(x)
    return keras.layers.Conv2D(channels, 3, padding="same", name="conv_last")(x)


def build(cfg, scale: int, channels: int) -> keras.Model:
    """Build DAT (``conf/model/dat.yaml``: the paper's DAT, 14.8 M parameters at x4 RGB).

    Args:
        cfg: its keys (``sr.models.dat.DATConfig``): ``embed_dim``, ``depths`` (blocks per
            residual group), ``heads`` (per group), ``split`` (window ``[s0, s1]``),
            ``expansion`` (feed-forward hidden over embed), ``qkv_bias``, ``resi_connection``
            (``1conv`` | ``3conv``), ``upsampler`` (``pixelshuffle`` | ``pixelshuffledirect``),
            ``img_range`` (factor on the centred input), ``drop_path_rate`` (stochastic depth,
            training only), ``img_size`` (not used here: the shape of the reference's mask
            buffers, for the layout).
        scale: upscaling factor (2, 3 or 4; pixelshuffledirect any).
        channels: image channels C (1 for Y, 3 for RGB; RGB loses the DIV2K mean).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1] (any h, w), output float32
        ``[B, s h, s w, C]``.
    """
    dim, depths = cfg.embed_dim, list(cfg.depths)
    mean = input_mean("div2k_mean" if channels == 3 else "none", channels)
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = normalized(lr, mean, cfg.img_range)
    first = keras.layers.Conv2D(dim, 3, padding="same", name="conv_first")(x)
    t = layer_norm("before_RG.1")(first)
    rates = np.linspace(0, cfg.drop_path_rate, sum(depths)) if sum(depths) > 1 else [0.0]
    n = 0
    for g, depth in enumerate(depths):
        res = t
        for b in range(depth):
            t = DATBlock(
                dim, cfg.heads[g], cfg.split, cfg.expansion, cfg.qkv_bias, spatial=b % 2 == 0,
                shift=b % 2 == 0 and shifted(g, b), drop_path=float(rates[n]),
                name=f"layers.{g}.blocks.{b}",
            )(t)  # fmt: skip
            n += 1
        t = keras.layers.Add()([res, resi_conv(t, dim, cfg.resi_connection, f"layers.{g}.conv")])
    t = layer_norm("norm")(t)
    x = keras.layers.Add()([resi_conv(t, dim, cfg.resi_connection, "conv_after_body"), first])
    x = upsampled(x, cfg.upsampler, scale, channels)
    x = denormalized(x, mean, cfg.img_range)
    return keras.Model(lr, float32_output(x), name=f"dat_x{scale}")
