"""PyTorch's ``torch.nn.functional.interpolate`` in TensorFlow ops, for whole batches: the
random resizes of Real-ESRGAN's degradation (``sr.degradations.realesrgan``) as the official code
runs
them.

Source: PyTorch ``aten/src/ATen/native/UpSample.h`` (``area_pixel_compute_scale``,
``area_pixel_compute_source_index``), ``UpSampleBicubic2d.cpp`` (Keys' cubic convolution with
a = -0.75, taps clamped at the border), ``UpSampleBilinear2d.cpp`` and
``AdaptiveAveragePooling.cpp`` (``mode="area"`` is ``adaptive_avg_pool2d``). All three with
``align_corners=False`` and no antialiasing, as ``F.interpolate`` defaults.

Each resize along one axis is a matrix ``[out, in]`` built from the two sizes (and the scale
factor, when one was given), so a batch of any size is resized by two matrix products, on any
device, with the sizes known only at run time. ``tf.image.resize`` differs from PyTorch in its
bicubic (a = -0.5) and its area (pixels weighted by overlap, not whole pixels averaged).
"""

from __future__ import annotations

import tensorflow as tf

MODES = ("area", "bilinear", "bicubic")
"""The interpolations, in the order of the int index that :func:`resize` takes."""

CUBIC_A = -0.75
"""Keys' cubic convolution parameter of PyTorch's (and OpenCV's) bicubic."""


def _cubic(t: tf.Tensor) -> tf.Tensor:
    """Keys' cubic convolution kernel with a = -0.75 at distances ``|t|`` <= 2."""
    a, t = CUBIC_A, tf.abs(t)
    near = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    far = ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
    return tf.where(t <= 1.0, near, tf.where(t < 2.0, far, 0.0))


def _source(n_out, coord_scale, clamp: bool) -> tf.Tensor:
    """Source coordinate of each output pixel, ``scale (i + 0.5) - 0.5`` (float32 ``[out]``),
    clamped at 0 for bilinear as PyTorch does (not for bicubic)."""
    x = coord_scale * (tf.range(n_out, dtype=tf.float32) + 0.5) - 0.5
    return tf.maximum(x, 0.0) if clamp else x


def _taps(index, weights, n_in) -> tf.Tensor:
    """Sum of one-hot rows ``[out, in]``: ``weights[k]`` at column ``index[k]`` (clamped)."""
    matrix = 0.0
    for i, w in zip(index, weights):
        matrix += tf.one_hot(tf.clip_by_value(i, 0, n_in - 1), n_in) * w[:, tf.newaxis]
    return matrix


def resize_matrix(n_in, n_out, mode: str, factor=None) -> tf.Tensor:
    """The ``[n_out, n_in]`` float32 matrix of PyTorch's ``interpolate`` along one axis.

    Args:
        n_in, n_out: int32 scalar sizes (tensors or ints).
        mode: one of :data:`MODES`.
        factor: the ``scale_factor`` given to ``interpolate`` (float scalar), or None when it was
            given a ``size``: bilinear and bicubic then map coordinates by ``n_in / n_out``,
            else by ``1 / factor`` (PyTorch's ``recompute_scale_factor=None``). Area uses the
            sizes only.
    """
    n_in, n_out = tf.cast(n_in, tf.int32), tf.cast(n_out, tf.int32)
    ratio = tf.cast(n_in, tf.float32) / tf.cast(n_out, tf.float32)
    if mode == "area":  # adaptive average pooling: [floor(i in/out), ceil((i+1) in/out))
        i = tf.range(n_out)
        start = (i * n_in) // n_out
        end = ((i + 1) * n_in + n_out - 1) // n_out
        j = tf.range(n_in)[tf.newaxis, :]
        inside = tf.logical_and(j >= start[:, tf.newaxis], j < end[:, tf.newaxis])
        return tf.cast(inside, tf.float32) / tf.cast(end - start, tf.float32)[:, tf.newaxis]
    coord_scale = ratio if factor is None else 1.0 / tf.cast(factor, tf.float32)
    x = _source(n_out, coord_scale, clamp=mode == "bilinear")
    left = tf.floor(x)
    t = x - left
    left = tf.cast(left, tf.int32)
    if mode == "bilinear":
        return _taps([left, left + 1], [1.0 - t, t], n_in)
    if mode == "bicubic":
        weights = [_cubic(t + 1.0), _cubic(t), _cubic(1.0 - t), _cubic(2.0 - t)]
        return _taps([left - 1, left, left + 1, left + 2], weights, n_in)
    raise ValueError(f"unknown interpolation {mode!r}: one of {', '.join(MODES)}")


def separable(images: tf.Tensor, rows: tf.Tensor, cols: tf.Tensor) -> tf.Tensor:
    """``rows @ image @ cols^T`` for every channel of every image: a separable linear map (a
    resize, a separable blur with its border rule folded in) as two plain matrix products over
    the whole batch (one GEMM per axis, where ``tf.einsum`` transposes per product).

    Args:
        images: float32 ``[B, H, W, C]``.
        rows: float32 ``[H', H]``; cols: float32 ``[W', W]``.

    Returns:
        float32 ``[B, H', W', C]``.
    """
    shape = tf.shape(images)
    b, h, w, c = shape[0], shape[1], shape[2], shape[3]
    x = tf.reshape(tf.transpose(images, [1, 0, 2, 3]), tf.stack([h, -1]))  # [H, B W C]
    x = tf.reshape(tf.matmul(rows, x), tf.stack([-1, b, w, c]))  # [H', B, W, C]
    x = tf.transpose(x, [2, 1, 0, 3])  # [W, B, H', C]
    h_out = tf.shape(x)[2]
    x = tf.matmul(cols, tf.reshape(x, tf.stack([w, -1])))  # [W', B H' C]
    x = tf.reshape(x, tf.stack([-1, b, h_out, c]))
    return tf.transpose(x, [1, 2, 0, 3])  # [B, H', W', C]


def resize(images: tf.Tensor, size, mode, factor=None) -> tf.Tensor:
    """``F.interpolate(images, size, mode=MODES[mode], align_corners=False)`` of a batch.

    Args:
        images: float32 ``[B, H, W, C]``.
        size: int32 ``[2]`` (height, width) of the output.
        mode: int32 scalar tensor (or int), the index in :data:`MODES`, drawn at run time.
        factor: the scale factor the sizes came from (``interpolate(scale_factor=f)``): a
            float scalar, or ``[2]`` (height, width); or None.

    Returns:
        float32 ``[B, size[0], size[1], C]``; no clipping (bicubic overshoots, as PyTorch's).
    """
    images = tf.convert_to_tensor(images, tf.float32)
    shape = tf.shape(images)
    size = tf.cast(size, tf.int32)

    factors = (None, None) if factor is None else tf.unstack(tf.broadcast_to(factor, [2]))
    index = tf.cast(mode, tf.int32)

    def matrix(n_in, n_out, axis_factor):  # every mode's matrix (small), the drawn one taken
        every = [resize_matrix(n_in, n_out, m, axis_factor) for m in MODES]
        return tf.gather(tf.stack(every), index)

    # one product per axis with the drawn mode's matrices: a smaller graph than one branch per
    # mode (tf.switch_case), traced and instantiated faster; the same matrices, the same pixels
    rows = matrix(shape[1], size[0], factors[0])
    cols = matrix(shape[2], size[1], factors[1])
    out = separable(images, rows, cols)
    return tf.ensure_shape(out, [images.shape[0], None, None, images.shape[-1]])
