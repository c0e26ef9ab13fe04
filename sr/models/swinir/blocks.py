"""Swin pieces that SwinIR and HAT share (TensorFlow ops, NHWC): window partition, relative
position index, the shifted windows' mask, reflect padding to the window, the window attention
block, and the heads of the network (its convs, upsamplers and final crop).

Every function takes dynamic heights and widths (``tf.shape``) and uses reshapes and transposes
of at most five dimensions, slices and concatenations (no ``Roll``, no ``ExtractImagePatches``,
no ``tf.py_function``), so the models convert to TFLite and ONNX. Layer norms and softmax run
in float32 under a mixed policy.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from sr.models.layers import LeakyReLU, PixelShuffle, UpSampling2D

EPS = 1e-5  # nn.LayerNorm's


def layer_norm(name: str):
    """PyTorch's ``nn.LayerNorm`` over the last axis (eps 1e-5), computed in float32."""
    return keras.layers.LayerNormalization(epsilon=EPS, name=name, dtype="float32")


def gelu(x):
    """PyTorch's ``nn.GELU()``, the erf form: ``x (1 + erf(x / sqrt 2)) / 2`` (written so, as
    TensorFlow's own exact GELU computes ``erfc``, which tf2onnx cannot convert)."""
    return 0.5 * x * (1.0 + tf.math.erf(x * 0.7071067811865476))


def windows(x, wh: int, ww: int):
    """``[B, H, W, c]`` (H, W multiples of ``wh``, ``ww``) to ``[B nW, wh ww, c]``, windows in
    row-major order of the grid (Swin's ``window_partition``)."""
    c = x.shape[-1]
    s = tf.shape(x)
    nh, nw = s[1] // wh, s[2] // ww
    x = tf.reshape(x, [s[0] * nh, wh, nw, ww, c])
    x = tf.transpose(x, [0, 2, 1, 3, 4])
    return tf.reshape(x, [-1, wh * ww, c])


def unwindows(x, wh: int, ww: int, height, width):
    """The inverse of :func:`windows`: ``[B nW, wh ww, c]`` to ``[B, height, width, c]``."""
    c = x.shape[-1]
    x = tf.reshape(x, [-1, width // ww, wh, ww, c])
    x = tf.transpose(x, [0, 2, 1, 3, 4])
    return tf.reshape(x, [-1, height, width, c])


def heads_first(x, heads: int):
    """``[N', n, heads d]`` to ``[N', heads, n, d]`` (PyTorch's ``reshape(..., heads, d)
    .permute(0, 2, 1, 3)``)."""
    d = x.shape[-1] // heads
    s = tf.shape(x)
    return tf.transpose(tf.reshape(x, [s[0], s[1], heads, d]), [0, 2, 1, 3])


def heads_last(x):
    """The inverse of :func:`heads_first`: ``[N', heads, n, d]`` to ``[N', n, heads d]``."""
    heads, d = x.shape[1], x.shape[-1]
    s = tf.shape(x)
    return tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [s[0], s[2], heads * d])


def softmax32(logits, dtype):
    """Softmax over the last axis in float32, returned in ``dtype``."""
    return tf.cast(tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1), dtype)


def rolled(x, dh: int, dw: int):
    """``torch.roll(x, (dh, dw), dims=(1, 2))`` for ``[B, H, W, c]`` by slicing and
    concatenation (TFLite has no ``Roll``); ``|dh| < H``, ``|dw| < W``."""
    if dh:
        x = tf.concat([x[:, -dh:], x[:, :-dh]], axis=1)
    if dw:
        x = tf.concat([x[:, :, -dw:], x[:, :, :-dw]], axis=2)
    return x


def relative_index(size: int) -> np.ndarray:
    """Swin's ``relative_position_index`` of a ``size x size`` window: int64 ``[N, N]``,
    N = size^2, ``(dh + size - 1) (2 size - 1) + dw + size - 1`` for token i's offset (dh, dw)
    from token j (SwinIR's ``WindowAttention``, HAT's ``calculate_rpi_sa``)."""
    coords = np.stack(np.meshgrid(np.arange(size), np.arange(size), indexing="ij")).reshape(2, -1)
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0) + size - 1
    return (rel[..., 0] * (2 * size - 1) + rel[..., 1]).astype(np.int64)


def region_ids(length, size: int, shift: int):
    """The region of each row (column) of a side of ``length`` for windows of ``size``
    shifted by ``shift``: 0 before ``length - size``, 1 before ``length - shift``, else 2
    (int32 ``[length]``; the slices of Swin's ``calculate_mask``)."""
    pos = tf.range(length)
    return tf.cast(pos >= length - size, tf.int32) + tf.cast(pos >= length - shift, tf.int32)


def shift_mask(height, width, size: int, shift: int):
    """The attention mask of shifted windows (Swin's ``calculate_mask``) for a
    ``height x width`` map (multiples of ``size``): float32 ``[nW, N, N]``, -100 between tokens
    of different regions, else 0."""
    ids = region_ids(height, size, shift)[:, None] * 3 + region_ids(width, size, shift)[None, :]
    ids = windows(tf.expand_dims(tf.expand_dims(ids, 0), -1), size, size)  # [nW, N, 1]
    ids = tf.squeeze(ids, -1)
    return tf.where(ids[:, None, :] != ids[:, :, None], -100.0, 0.0)


def shift_mask_np(height: int, width: int, size: int, shift: int) -> np.ndarray:
    """:func:`shift_mask` in NumPy (the reference's ``attn_mask`` buffer), float32."""

    def ids(n):
        pos = np.arange(n)
        return (pos >= n - size).astype(int) + (pos >= n - shift).astype(int)

    grid = ids(height)[:, None] * 3 + ids(width)[None, :]
    grid = grid.reshape(height // size, size, width // size, size).transpose(0, 2, 1, 3)
    grid = grid.reshape(-1, size * size)
    return np.where(grid[:, None, :] != grid[:, :, None], -100.0, 0.0).astype(np.float32)


def drop_path(x, rate: float, training, seed):
    """Stochastic depth: each sample's ``x`` zeroed with probability ``rate`` and the others
    scaled by ``1 / (1 - rate)`` in training (timm's ``DropPath``), ``x`` otherwise."""
    if not training or rate <= 0:
        return x
    keep = 1.0 - rate
    shape = [tf.shape(x)[0]] + [1] * (len(x.shape) - 1)
    mask = tf.floor(keep + keras.random.uniform(shape, seed=seed, dtype=x.dtype))
    return x * mask / keep


def attend(q, k, v, bias, mask=None):
    """Multi-head attention of ``q`` ``[N', heads, n, d]`` (already scaled) on ``k``, ``v``
    ``[N', heads, m, d]`` with the position bias ``[heads, n, m]`` and, for shifted windows,
    ``mask`` ``[nW, n, m]`` (N' = B nW): ``[N', heads, n, d]``."""
    attn = tf.matmul(q, k, transpose_b=True) + tf.cast(bias, q.dtype)[None]
    if mask is not None:
        heads, n, m = attn.shape[1], tf.shape(attn)[2], tf.shape(attn)[3]
        attn = tf.reshape(attn, [-1, tf.shape(mask)[0], heads, n, m])
        attn = tf.reshape(attn + tf.cast(mask[None, :, None], attn.dtype), [-1, heads, n, m])
    return tf.matmul(softmax32(attn, q.dtype), v)


@keras.saving.register_keras_serializable(package="sr")
class WindowPad(keras.layers.Layer):
    """Reflect-pad ``[B, h, w, C]`` at the bottom and right to multiples of ``size`` (SwinIR's
    and HAT's ``check_image_size``: ``F.pad(x, (0, pw, 0, ph), 'reflect')``); a side shorter
    than its padding cannot be reflected (as in PyTorch)."""

    def __init__(self, size: int, **kwargs):
        super().__init__(**kwargs)
        self.size = int(size)

    def call(self, x):
        s, n = tf.shape(x), self.size
        ph, pw = (n - s[1] % n) % n, (n - s[2] % n) % n
        # reflection by slices, a reverse and a concatenation (LiteRT's MIRROR_PAD of a
        # run-time padding loses the channels, and the next conv is then not converted): the
        # rows h-2, h-3, ... (a slice clamped at row 0 for a side shorter than the window)
        x = tf.concat([x, tf.reverse(x[:, -(n + 1) : -1], [1])[:, :ph]], axis=1)
        return tf.concat([x, tf.reverse(x[:, :, -(n + 1) : -1], [2])[:, :, :pw]], axis=2)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], None, None, input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "size": self.size}


@keras.saving.register_keras_serializable(package="sr")
class CropTo(keras.layers.Layer):
    """``[y, lr]`` to ``y[:, :s h, :s w]`` for ``lr`` ``[B, h, w, C]`` (the reference's final
    crop of the padded output)."""

    def __init__(self, scale: int, **kwargs):
        super().__init__(**kwargs)
        self.scale = int(scale)

    def call(self, inputs):
        y, lr = inputs
        s = tf.shape(lr)
        return y[:, : s[1] * self.scale, : s[2] * self.scale]

    def compute_output_shape(self, input_shapes):
        return (input_shapes[0][0], None, None, input_shapes[0][-1])

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


def conv(filters: int, size: int, name: str):
    """PyTorch's ``nn.Conv2d(.., size, 1, size // 2)``: a 'same' Keras conv named ``name``."""
    return keras.layers.Conv2D(filters, size, padding="same", name=name)


def resi_conv(x, dim: int, kind: str, name: str):
    """The conv after a residual group or the body: ``1conv`` (3x3), ``3conv`` (3x3 to dim/4,
    LeakyReLU 0.2, 1x1, LeakyReLU 0.2, 3x3 back to dim) or ``identity`` (HAT's)."""
    if kind == "identity":
        return x
    if kind == "1conv":
        return conv(dim, 3, name)(x)
    x = conv(dim // 4, 3, f"{name}.0")(x)
    x = conv(dim // 4, 1, f"{name}.2")(LeakyReLU(0.2)(x))
    return conv(dim, 3, f"{name}.4")(LeakyReLU(0.2)(x))


def upsampled(x, upsampler: str, scale: int, channels: int, feat: int = 64):
    """SwinIR's and HAT's reconstruction: ``pixelshuffle`` (conv to ``feat``, LeakyReLU 0.01,
    conv and pixel shuffle of 2 per factor 2 (3: one of 3), conv to C), ``pixelshuffledirect``
    (conv to C s^2, pixel shuffle of s) or ``nearest+conv`` (conv to ``feat``, LeakyReLU 0.01,
    per factor 2 a nearest x2 and a conv with LeakyReLU 0.2, conv, LeakyReLU 0.2, conv to C)."""
    if upsampler == "pixelshuffledirect":
        return PixelShuffle(scale)(conv(channels * scale * scale, 3, "upsample.0")(x))
    x = LeakyReLU(0.01)(conv(feat, 3, "conv_before_upsample.0")(x))
    if upsampler == "nearest+conv":
        for i in range(scale.bit_length() - 1):
            x = UpSampling2D(2, interpolation="nearest")(x)
            x = LeakyReLU(0.2)(conv(feat, 3, f"conv_up{i + 1}")(x))
        x = LeakyReLU(0.2)(conv(feat, 3, "conv_hr")(x))
        return conv(channels, 3, "conv_last")(x)
    factors = [3] if scale == 3 else [2] * (scale.bit_length() - 1)
    for i, f in enumerate(factors):
        x = PixelShuffle(f)(conv(feat * f * f, 3, f"upsample.{2 * i}")(x))
    return conv(channels, 3, "conv_last")(x)
