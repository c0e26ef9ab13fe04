"""Window and channel attention pieces that DAT and OmniSR share (TensorFlow ops, NHWC).

Every function here takes dynamic heights and widths (``tf.shape``), reshapes and transposes of
at most five dimensions (TFLite's ``TRANSPOSE`` limit) and no ``tf.py_function``, so the models
convert to TFLite and ONNX. Softmax and L2 normalisation run in float32 under a mixed policy.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf


def windows(x, wh: int, ww: int):
    """``[B, H, W, c]`` (H, W multiples of ``wh``, ``ww``) to ``[B nW, wh ww, c]``, windows in
    row-major order of the grid (BasicSR's ``img2windows`` / ``window_partition``)."""
    c = x.shape[-1]
    s = tf.shape(x)
    nh, nw = s[1] // wh, s[2] // ww
    x = tf.reshape(x, [s[0] * nh, wh, nw, ww, c])
    x = tf.transpose(x, [0, 2, 1, 3, 4])
    return tf.reshape(x, [-1, wh * ww, c])


def unwindows(x, wh: int, ww: int, height, width):
    """The inverse of :func:`windows`: ``[B nW, wh ww, c]`` to ``[B, height, width, c]``."""
    c = x.shape[-1]
    nw = width // ww
    x = tf.reshape(x, [-1, nw, wh, ww, c])
    x = tf.transpose(x, [0, 2, 1, 3, 4])
    return tf.reshape(x, [-1, height, width, c])


def heads_first(x, heads: int):
    """``[N', n, heads d]`` to ``[N', heads, n, d]`` (channels head-major, as PyTorch's
    ``reshape(..., heads, d).permute(0, 2, 1, 3)``)."""
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


def l2_normalize(x, axis: int):
    """PyTorch's ``F.normalize(x, dim=axis)`` (eps 1e-12 on the norm), in float32, returned in
    ``x.dtype``."""
    y = tf.math.l2_normalize(tf.cast(x, tf.float32), axis=axis, epsilon=1e-24)
    return tf.cast(y, x.dtype)


def relative_index(wh: int, ww: int) -> np.ndarray:
    """Swin's relative position index of a ``wh x ww`` window: int32 ``[N, N]``, N = wh ww,
    ``(dh + wh - 1) (2 ww - 1) + dw + ww - 1`` for the offset (dh, dw) of token i from token
    j."""
    coords = np.stack(np.meshgrid(np.arange(wh), np.arange(ww), indexing="ij")).reshape(2, -1)
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0)
    return ((rel[..., 0] + wh - 1) * (2 * ww - 1) + rel[..., 1] + ww - 1).astype(np.int32)


def region_ids(length, size: int, shift: int):
    """Swin's region of each row (column) of a padded side of ``length`` for a window of
    ``size`` shifted by ``shift``: 0 before ``length - size``, 1 before ``length - shift``, else
    2 (int32 ``[length]``: the slices of ``calculate_mask``)."""
    pos = tf.range(length)
    return tf.cast(pos >= length - size, tf.int32) + tf.cast(pos >= length - shift, tf.int32)


def shift_mask(height, width, wh: int, ww: int, sh: int, sw: int):
    """The attention mask of shifted windows (Swin's / DAT's ``calculate_mask``) for a padded
    ``height x width`` map, windows ``wh x ww`` shifted by ``(sh, sw)``: float32
    ``[nW, N, N]``, -100 between tokens of different regions, else 0."""
    # expand_dims and reshape, not None indexing: TFLite lacks StridedSlice's new_axis_mask
    rows = tf.expand_dims(region_ids(height, wh, sh), 1)
    ids = rows * 3 + tf.expand_dims(region_ids(width, ww, sw), 0)
    ids = tf.reshape(windows(tf.reshape(ids, [1, height, width, 1]), wh, ww), [-1, wh * ww])
    return tf.where(tf.expand_dims(ids, 1) != tf.expand_dims(ids, 2), -100.0, 0.0)


def drop_path(x, rate: float, training, seed):
    """Stochastic depth: each sample's ``x`` zeroed with probability ``rate`` and the others
    scaled by ``1 / (1 - rate)`` in training (timm's ``DropPath``), ``x`` otherwise."""
    if not training or rate <= 0:
        return x
    keep = 1.0 - rate
    shape = [tf.shape(x)[0]] + [1] * (len(x.shape) - 1)
    mask = tf.floor(keep + keras.random.uniform(shape, seed=seed, dtype=x.dtype))
    return x * mask / keep
