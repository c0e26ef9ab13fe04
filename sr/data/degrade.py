"""The LR operator: MATLAB-equivalent bicubic resize, used by training, evaluation and tests.

MATLAB ``imresize(x, 1/s, 'bicubic')`` convolves with the Keys cubic kernel (a = -0.5) stretched by
``s`` when downscaling (antialiasing), samples at half-pixel centres, normalises the weights and
extends the image by mirror symmetry at the borders. ``tf.image.resize(..., "bicubic",
antialias=True)`` computes the same sums but renormalises truncated kernels at the borders instead
of mirroring, so it differs near the edges. We pad the input symmetrically (as MATLAB does) by a
multiple of the scale wide enough for the kernel's support, resize, and cut the padding away: the
result is MATLAB's on every pixel, up to float32 rounding.

References: R. Keys, "Cubic convolution interpolation for digital image processing", IEEE TASSP
1981; MATLAB ``imresize`` (``contributions``/``cubic``); Dong et al. (SRCNN, 2014) for the LR
protocol of the SR literature.
"""

from __future__ import annotations

import tensorflow as tf

# Keys' cubic has support [-2, 2]; stretched by s for downscaling it covers 2s input pixels on
# each side of an output centre, of which at most 2s - 1 lie outside the image. Padding 2s (a
# multiple of s, so that the output grid stays aligned) is enough.
_KERNEL_RADIUS = 2


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

    Args:
        hr: ``[H, W, C]`` or ``[B, H, W, C]``, any real dtype, any value range (the operator is
            linear); H and W must be multiples of ``scale`` (the SR protocol crops HR first).
        scale: integer downscaling factor s (2, 3, 4, ...).
        margin: 0 for a whole image, whose borders are mirrored as MATLAB does. A positive
            multiple of ``scale`` when ``hr`` is an HR crop with ``margin`` extra real pixels on
            every side: the result is then the LR of the centre only, free of any border effect
            (identical to cutting it from the LR of the whole image). Use ``margin >= 2 * scale``.

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
    pad = 0 if margin else _KERNEL_RADIUS * s
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
        lr: ``[h, w, C]`` or ``[B, h, w, C]``, any real dtype and value range; h, w >= 3.
        scale: integer factor s.

    Returns:
        float32 ``[..., s h, s w, C]``, not rounded or clipped (bicubic overshoots).

    Raises:
        ValueError: on a non-integer scale or an image smaller than 3x3.
    """
    s = _check_scale(scale)
    x, squeeze = _as_batch(lr)
    x = tf.cast(x, tf.float32)
    pad = _KERNEL_RADIUS + 1
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
