"""The LR operator: MATLAB-equivalent bicubic resize, the one owner of how LR images are made.

Training (``sr.data.pairs.make_pairs``), evaluation (``sr.evaluation.prepare``) and tests make
every LR image with :func:`make_lr` (= :func:`quantize` of :func:`bicubic_downscale`, the 8-bit
LR a saved image would hold); upscaling uses :func:`bicubic_upscale`. This module also owns the
geometry that follows from the kernel: :data:`KERNEL_RADIUS`, the HR margin a training crop needs
(:func:`crop_margin`) and the smallest sizes the operator accepts (:data:`MIN_LR_SIZE`,
:func:`min_hr_size`).

The operator. MATLAB ``imresize(x, 1/s, 'bicubic')`` convolves with the Keys cubic kernel
(a = -0.5) stretched by ``s`` when downscaling (antialiasing), samples at half-pixel centres,
normalises the weights and extends the image by mirror symmetry at the borders.
``tf.image.resize(..., "bicubic", antialias=True)`` computes the same sums but renormalises
truncated kernels at the borders instead of mirroring, so it differs near the edges. We pad the
input symmetrically (as MATLAB does) by a multiple of the scale wide enough for the kernel's
support, resize, and cut the padding away: the result is MATLAB's on every pixel, up to float32
rounding. For training batches (square crops with a margin, Y or RGB) :func:`make_lr` computes
the same operator as two matrix products (:func:`downscale_matrix`), with the random flips folded
into the matrices, which costs the training pair stage less CPU (``scripts/bench_data.py``).

Order of colour conversion and LR, per use (the two orders differ because 8-bit rounding and the
non-linear clipping sit between them; Y itself is affine, so without rounding they would agree):

- training makes the LR from the rounded uint8 Y of the HR (Y, then LR): images are decoded to Y
  only (``sr.core.images.load_y``), one channel instead of three, so 3x less memory in the
  decoded-image pool and in the shards, and 3x less work for the LR;
- evaluation follows the literature's MATLAB protocol (SRCNN, VDSR, EDSR, RCAN): ``imresize`` of
  the RGB HR, rounded to uint8 (a saved LR image), then ``rgb2ycbcr`` (LR, then Y), so that the
  published bicubic figures (28.42 dB on Set5 x4) are reproduced;
- inference (``sr.inference``, ``scripts/upscale.py``, the exported SavedModel) makes no LR at
  all: its input is the LR.

What the difference costs, measured on Set5 x4 by ``benchmarks/lr_order.py`` (the same upscaler fed
the LR Y made each way, Y PSNR with the protocol of ``sr.evaluation``), for bicubic (upscaling the
LR Y) and for the default ESPCN trained 3000 steps on the demo photos
(``python train.py train.steps=3000 hydra.run.dir=/tmp/lr_order_run``)::

    python benchmarks/lr_order.py /tmp/lr_order_run --folder ../shared/datasets/Set5

                              RGB, then Y   Y, then LR   difference (per image)
    LR Y, |diff| mean / max                              0.284 / 1.18 grey levels
    bicubic                   28.426 dB     28.425 dB    -0.001 dB (-0.006 .. +0.002)
    ESPCN (3000 steps)        29.147 dB     29.140 dB    -0.007 dB (-0.012 .. -0.001)

The LR Y differ by about a quarter of a grey level, the size of the 8-bit rounding (evaluation
rounds R, G, B; training rounds Y), and the PSNR by less than 0.01 dB, below the precision of
published tables: the mismatch between the LR a model is trained on and the LR it is scored on
costs nothing measurable, so evaluation keeps the literature's order. (The protocol's bicubic
baseline, which upscales the RGB LR and then takes Y, gives 28.431 dB; published: 28.42.)

Training in the evaluation's order is ``data.lr_from=rgb`` (``sr.data.pairs.rgb_pairs``: RGB
crops, ``make_lr`` of R, G and B, then Y). Trained both ways at equal steps (``python
benchmarks/recipe_study.py lr_order``: the former 20-minute recipe of ``docs/results.md``, 16
blocks of 48 features at batch 16, at 600 steps, seeds 0, 1, 2), the RGB order scores +0.019 dB
on Set5 (+0.009 to +0.025) and +0.010 dB on Set14 (+0.007 to +0.012): the same sign for every
seed, and one or two hundredths of a decibel, the last digit of published tables. Y stays the
default: three times less shard disk, pool memory and LR work for those hundredths.

References: R. Keys, "Cubic convolution interpolation for digital image processing", IEEE TASSP
1981; MATLAB ``imresize`` (``contributions``/``cubic``); Dong et al. (SRCNN, 2014) for the LR
protocol of the SR literature.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

KERNEL_RADIUS = 2
"""Reach of Keys' cubic kernel (support [-2, 2]), in input pixels when upscaling; stretched by
``s`` when downscaling, it reaches ``2 s`` HR pixels on each side of an LR pixel's centre."""

MIN_LR_SIZE = KERNEL_RADIUS + 1
"""Smallest side (pixels) of an image :func:`bicubic_upscale` accepts, so of an upscaler's input:
it mirrors ``KERNEL_RADIUS + 1`` pixels at each border, and a mirror cannot be wider than the
image."""


def keys_cubic(x, a: float = -0.5) -> np.ndarray:
    """Keys' cubic convolution kernel (R. Keys, IEEE TASSP 1981) at offsets ``x`` (pixels), zero
    from :data:`KERNEL_RADIUS` on: with a = -0.5 the kernel of MATLAB ``imresize`` and of
    ``tf.image.resize(..., "bicubic")``, which this module's operator resamples with
    (``sr.models.layers.bicubic_upscale_graph`` computes it from these weights). float64."""
    t = np.abs(x)
    near = (a + 2) * t**3 - (a + 3) * t**2 + 1
    far = a * t**3 - 5 * a * t**2 + 8 * a * t - 4 * a
    return np.where(t <= 1, near, np.where(t < KERNEL_RADIUS, far, 0.0))


def crop_margin(scale: int) -> int:
    """HR pixels an HR crop needs on every side for its LR to be free of border effects.

    The downscaling kernel reaches ``KERNEL_RADIUS * s`` HR pixels on each side of an LR pixel's
    centre, so with that many real pixels around the patch every LR pixel of the patch is
    computed from real pixels only, and equals the LR cut from the LR of the whole image. The
    margin is also a multiple of ``s``, so that the LR grid of the crop stays aligned with the
    patch. Training crops ``P + 2 crop_margin(s)`` pixels and cuts the margin away after the LR.

    Args:
        scale: integer factor s.

    Returns:
        ``2 s`` (pixels).

    Raises:
        ValueError: on a non-integer or non-positive scale.
    """
    return KERNEL_RADIUS * _check_scale(scale)


def min_hr_size(scale: int) -> int:
    """Smallest HR side (pixels, after the crop to a multiple of ``s``) evaluation accepts.

    Its LR must be at least :data:`MIN_LR_SIZE` pixels for the bicubic baseline (and any
    upscaler) to upscale it, hence ``MIN_LR_SIZE * s`` (also enough for the ``2 s`` mirror of
    :func:`bicubic_downscale` on a whole image).

    Raises:
        ValueError: on a non-integer or non-positive scale.
    """
    return MIN_LR_SIZE * _check_scale(scale)


def _check_scale(scale: int) -> int:
    if int(scale) != scale or scale < 1:
        raise ValueError(f"scale must be a positive integer, got {scale!r}")
    return int(scale)


def _as_batch(x: tf.Tensor) -> tuple[tf.Tensor, bool]:
    x = tf.convert_to_tensor(x)
    if x.shape.rank == 3:
        return x[tf.newaxis], True
    if x.shape.rank != 4:
        raise ValueError(f"expected an image [H, W, C] or a batch [B, H, W, C], got {x.shape}")
    return x, False


def _resize(x: tf.Tensor, height, width) -> tf.Tensor:
    return tf.image.resize(x, [height, width], method="bicubic", antialias=True)


def bicubic_downscale(hr, scale: int, margin: int = 0) -> tf.Tensor:
    """Downscale by ``1/scale`` exactly as MATLAB ``imresize(hr, 1/scale, 'bicubic')``.

    Not rounded: the 8-bit LR of the project is :func:`make_lr`.

    Args:
        hr: ``[H, W, C]`` or ``[B, H, W, C]``, any real dtype, any value range (the operator is
            linear); H and W must be multiples of ``scale`` (the SR protocol crops HR first).
        scale: integer downscaling factor s (2, 3, 4, ...).
        margin: 0 for a whole image, whose borders are mirrored as MATLAB does. A positive
            multiple of ``scale`` when ``hr`` is an HR crop with ``margin`` extra real pixels on
            every side: the result is then the LR of the centre only, free of any border effect
            (identical to cutting it from the LR of the whole image) when
            ``margin >= crop_margin(scale)``.

    Returns:
        float32 ``[..., (H - 2 margin) / s, (W - 2 margin) / s, C]``, not rounded or clipped.

    Raises:
        ValueError: on a non-integer scale, a margin that is not a multiple of ``scale``, or sizes
            that are not multiples of ``scale``.
    """
    s = _check_scale(scale)
    if margin % s:
        raise ValueError(f"margin {margin} must be a multiple of scale {s}")
    x, squeeze = _as_batch(hr)
    x = tf.cast(x, tf.float32)
    h, w = x.shape[1], x.shape[2]
    if h is not None and w is not None and (h % s or w % s):
        raise ValueError(f"HR size {h}x{w} is not a multiple of scale {s}: crop it first")
    pad = 0 if margin else crop_margin(s)
    if pad:
        x = tf.pad(x, [[0, 0], [pad, pad], [pad, pad], [0, 0]], mode="SYMMETRIC")
    shape = tf.shape(x)
    lr = _resize(x, shape[1] // s, shape[2] // s)
    cut = (pad + margin) // s
    if cut:
        lr = lr[:, cut:-cut, cut:-cut, :]
    return lr[0] if squeeze else lr


def bicubic_upscale(lr, scale: int) -> tf.Tensor:
    """Upscale by ``scale`` exactly as MATLAB ``imresize(lr, scale, 'bicubic')``.

    Args:
        lr: ``[h, w, C]`` or ``[B, h, w, C]``, any real dtype and value range;
            h, w >= :data:`MIN_LR_SIZE` (3).
        scale: integer factor s.

    Returns:
        float32 ``[..., s h, s w, C]``, not rounded or clipped (bicubic overshoots).

    Raises:
        ValueError: on a non-integer scale or an image smaller than 3x3.
    """
    s = _check_scale(scale)
    x, squeeze = _as_batch(lr)
    x = tf.cast(x, tf.float32)
    pad = MIN_LR_SIZE
    h, w = x.shape[1], x.shape[2]
    if h is not None and w is not None and min(h, w) < pad:
        raise ValueError(f"bicubic_upscale needs at least {pad}x{pad} pixels, got {h}x{w}")
    x = tf.pad(x, [[0, 0], [pad, pad], [pad, pad], [0, 0]], mode="SYMMETRIC")
    shape = tf.shape(x)
    sr = _resize(x, shape[1] * s, shape[2] * s)
    sr = sr[:, pad * s : -pad * s, pad * s : -pad * s, :]
    return sr[0] if squeeze else sr


def quantize(x, peak: float = 255.0) -> tf.Tensor:
    """Round to the 8-bit grid as MATLAB's ``uint8`` cast does (half away from zero), clipped.

    Args:
        x: float tensor with values meant in [0, ``peak``].
        peak: 255 for [0, 255] data, 1 for [0, 1] data (then the grid is k / 255).

    Returns:
        float32 tensor of the same shape on the grid {0, 1, ..., 255} * peak / 255.
    """
    x = tf.cast(x, tf.float32) * (255.0 / peak)
    return tf.clip_by_value(tf.floor(x + 0.5), 0.0, 255.0) * (peak / 255.0)


def flip_batch(x: tf.Tensor, flips) -> tf.Tensor:
    """Per-sample vertical flip, horizontal flip, then transpose of a batch ``[B, H, W, C]``.

    With the three, the 8 rotations and reflections of a square patch. The LR operator commutes
    with them when the crop is square and its margin a multiple of the scale, which is what lets
    :func:`make_lr` fold the flips into its matrices.

    Args:
        x: ``[B, H, W, C]`` of any dtype (``H == W`` if any transpose is on).
        flips: ``(flip_v, flip_h, transpose)``, boolean ``[B]`` each, or None to skip that one.

    Returns:
        ``[B, H, W, C]`` (``[B, W, H, C]`` when transposing), same dtype.
    """

    if x.shape.rank == 4 and x.shape[-1] is not None and x.shape[-1] > 1:
        return _flip_channels(x, flips)
    one_channel = x.shape.rank == 4 and x.shape[-1] == 1
    if one_channel:  # a [B, 1, 1] select on [B, H, W] is cheaper than on [B, H, W, 1]
        x = x[..., 0]
    rank = x.shape.rank

    def where(mask, a, b):
        return tf.where(tf.reshape(mask, [-1] + [1] * (rank - 1)), a, b)

    flip_v, flip_h, transpose = flips
    if flip_v is not None:
        x = where(flip_v, tf.reverse(x, [1]), x)
    if flip_h is not None:
        x = where(flip_h, tf.reverse(x, [2]), x)
    if transpose is not None:
        x = where(transpose, tf.transpose(x, [0, 2, 1, *range(3, rank)]), x)
    return x[..., tf.newaxis] if one_channel else x


def _flip_channels(x: tf.Tensor, flips) -> tf.Tensor:
    """:func:`flip_batch` of a batch with several interleaved channels ``[B, H, W, C]`` (RGB).

    A ``tf.where`` of a ``[B, 1, 1, 1]`` mask on such a batch broadcasts element by element, on
    both the flipped and the unflipped copy, which cost more than the whole Y pair stage. Here the
    samples are split by their combination of flips (``tf.dynamic_partition``), each group gets
    its one reverse (and transpose) and the groups are put back in order
    (``tf.dynamic_stitch``). The same values: only the copying differs."""
    code = tf.zeros(tf.shape(x)[:1], tf.int32)
    for bit, mask in enumerate(flips):  # bit 0: vertical flip, 1: horizontal, 2: transpose
        if mask is not None:
            code += tf.cast(mask, tf.int32) * (1 << bit)
    n = 8 if flips[2] is not None else 4  # no transposed group (of another shape) without one
    groups = tf.dynamic_partition(x, code, n)
    where = tf.dynamic_partition(tf.range(tf.shape(x)[0]), code, n)
    done = []
    for combination, group in enumerate(groups):
        axes = [axis for bit, axis in ((0, 1), (1, 2)) if combination >> bit & 1]
        if axes:
            group = tf.reverse(group, axes)
        if combination >> 2 & 1:
            group = tf.transpose(group, [0, 2, 1, 3])
        done.append(group)
    return tf.dynamic_stitch(where, done)


@functools.lru_cache(maxsize=16)
def downscale_matrix(size: int, scale: int, margin: int) -> np.ndarray:
    """The 1-D weights of ``bicubic_downscale(., scale, margin)`` on a square ``size`` crop.

    The operator is linear and separable, so for a fixed crop it is a matrix ``W`` and
    ``LR = W X W^T``. Row ``i`` of the result is the LR response to an HR image whose row ``i`` is
    1 and all else 0 (the kernel's weights are normalised, so the other axis contributes a factor
    1): ``W`` is read off :func:`bicubic_downscale` itself, which keeps the operator the same.

    Args:
        size: side of the HR crop, ``P + 2 margin`` (pixels).
        scale: s.
        margin: m, a positive multiple of s.

    Returns:
        float32 ``[(size - 2 margin) / scale, size]``.
    """
    with tf.init_scope():  # eager even when called while tracing a tf.data function
        basis = np.zeros((size, size, size, 1), np.float32)
        basis[np.arange(size), np.arange(size), :, 0] = 1.0
        out = bicubic_downscale(tf.constant(basis), scale, margin=margin).numpy()
    return np.ascontiguousarray(out[:, :, 0, 0].T)


def _lr_by_matrix(hr: tf.Tensor, scale: int, margin: int, flips) -> tf.Tensor:
    """:func:`make_lr` of square crops ``[B, C, C, K]`` as ``W X W^T`` (each channel's X; K > 1:
    :func:`_channels_by_matrix`).

    A vertical flip J of the crop turns ``W X W^T`` into ``(W J) X W^T``, and ``W J`` is ``W``
    with its columns reversed, so the LR of the flipped crop comes from per-sample matrices at no
    extra cost, and the whole pair stage costs less CPU than ``tf.image.resize(antialias=True)``
    with flips on uint8 (``scripts/bench_data.py``); only the float32 summation order differs
    from :func:`bicubic_downscale` (at most one grey level, on rare rounding ties)."""
    flip_v, flip_h, transpose = flips
    n = tf.shape(hr)[0]
    no = tf.zeros([n], tf.bool)
    flip_v = no if flip_v is None else flip_v
    flip_h = no if flip_h is None else flip_h
    w = downscale_matrix(hr.shape[1], scale, margin)
    w, w_rev = tf.constant(w), tf.constant(np.ascontiguousarray(w[:, ::-1]))
    wv = tf.where(flip_v[:, tf.newaxis, tf.newaxis], w_rev, w)  # [B, p, C]
    wh = tf.where(flip_h[:, tf.newaxis, tf.newaxis], w_rev, w)
    if hr.shape[3] > 1:
        return _channels_by_matrix(hr, wv, wh, transpose)
    x = tf.cast(hr[..., 0], tf.float32)
    lr = quantize(tf.matmul(tf.matmul(wv, x), wh, transpose_b=True))
    if transpose is not None:
        lr = tf.where(transpose[:, tf.newaxis, tf.newaxis], tf.transpose(lr, [0, 2, 1]), lr)
    return lr[..., tf.newaxis]


def _channels_by_matrix(hr: tf.Tensor, wv: tf.Tensor, wh: tf.Tensor, transpose) -> tf.Tensor:
    """:func:`_lr_by_matrix` of crops with K > 1 interleaved channels ``[B, C, C, K]`` (RGB),
    given the per-sample matrices ``wv``, ``wh`` ``[B, p, C]``: ``W_v X_k W_h^T`` for each k.

    The first product takes the crop as stored, ``[B, C, C K]`` (each row holds the K channels
    interleaved, and ``W_v`` mixes rows only), so no transpose of the crop into planes (which
    cost more than half of the LR's CPU); only its result, p / C of the crop, is reordered for the
    second product. Each LR value
    is the same two dot products as on that channel alone (``[B, C, C, 1]``), so the same float32
    value (measured equal to the bit on 1.1 million values; a BLAS that summed
    ``[p, C] x [C, C K]`` in another order than ``[p, C] x [C, C]`` could differ by one grey
    level on a rounding tie)."""
    c, k, p = hr.shape[1], hr.shape[3], wv.shape[1]
    x = tf.cast(tf.reshape(hr, [-1, c, c * k]), tf.float32)
    rows = tf.matmul(wv, x)  # [B, p, C K]
    rows = tf.transpose(tf.reshape(rows, [-1, p, c, k]), [0, 3, 1, 2])  # [B, K, p, C]
    lr = quantize(tf.matmul(rows, wh[:, tf.newaxis], transpose_b=True))  # [B, K, p, p]
    if transpose is not None:
        swapped = tf.transpose(lr, [0, 1, 3, 2])
        lr = tf.where(transpose[:, tf.newaxis, tf.newaxis, tf.newaxis], swapped, lr)
    return tf.transpose(lr, [0, 2, 3, 1])


def make_lr(hr, scale: int, margin: int = 0, flips=None) -> tf.Tensor:
    """The 8-bit LR of an HR image or crop: ``quantize(bicubic_downscale(hr, scale, margin))``.

    The one function that makes LR images, for training, evaluation and tests (see the module
    docstring for which colour order each takes). A batch of square crops with a margin (the
    training case: one channel, Y, or RGB) is computed as ``W X W^T`` of each channel
    (:func:`downscale_matrix`), which differs from the direct form by float32 summation order
    only: at most one grey level on rare rounding ties.

    Args:
        hr: ``[H, W, C]`` or ``[B, H, W, C]``, any real dtype, values in [0, 255] (uint8 Y or RGB,
            or float); H, W multiples of ``scale``.
        scale: integer factor s.
        margin: m, HR pixels around the patch cut away after the LR (see
            :func:`bicubic_downscale`); ``crop_margin(scale)`` for training crops, 0 for a whole
            image (borders mirrored as MATLAB does).
        flips: optional ``(flip_v, flip_h, transpose)`` boolean ``[B]`` masks (each may be None)
            for a batch: the result is then the LR of ``flip_batch(hr, flips)``, and for the
            matrix form the flips cost nothing.

    Returns:
        float32 ``[..., (H - 2m) / s, (W - 2m) / s, C]`` on the 8-bit grid 0, 1, ..., 255.

    Raises:
        ValueError: as :func:`bicubic_downscale`.
    """
    hr = tf.convert_to_tensor(hr)
    shape = hr.shape
    by_matrix = (
        margin
        and shape.rank == 4
        and shape[1] is not None
        and shape[1] == shape[2]
        and shape[3] is not None
        and not margin % _check_scale(scale)
    )
    if by_matrix:
        return _lr_by_matrix(hr, scale, margin, flips or (None, None, None))
    if flips is not None:
        hr = flip_batch(hr, flips)
    return quantize(bicubic_downscale(hr, scale, margin=margin))
