"""Unsharp masking of the HR target as Real-ESRGAN trains with it (``gt_usm``), in TensorFlow ops.

Source: X. Wang, L. Xie, C. Dong, Y. Shan, "Real-ESRGAN: Training Real-World Blind
Super-Resolution with Pure Synthetic Data", ICCV Workshops 2021 (section 4.1: the ground truth
is sharpened); BasicSR ``basicsr/utils/img_process_util.py``: ``USMSharp(radius=50, sigma=0)``
(the PyTorch module every official option file uses) and ``usm_sharp`` (its NumPy/OpenCV twin).

For an image ``I`` and a Gaussian blur ``G`` (side 51 for radius 50, sigma 8 by OpenCV's rule):

    residual = I - G(I)
    mask = 1 where |residual| * 255 > threshold, else 0
    soft_mask = G(mask)
    out = soft_mask * clip(I + weight * residual, 0, 1) + (1 - soft_mask) * I

``G`` pads by reflection without repeating the edge (PyTorch ``reflect``, OpenCV
``BORDER_REFLECT_101``), as BasicSR's ``filter2D``. Its kernel is ``cv2.getGaussianKernel``'s
outer product, which is separable: two 1-D blurs here, each a product by a banded matrix with
the padding folded in, the same values within float32 rounding (measured < 1e-6 against
``cv2.filter2D``, ``tests/test_usm.py``). On GPUs with TensorFloat-32 (Ampere and later),
TensorFlow rounds a float32 matmul's inputs to 10 mantissa bits unless
``tf.config.experimental.enable_tensor_float_32_execution(False)``: the blur is then only
within about 1e-3 of OpenCV's.

Minimum size: the reflection pads ``side // 2`` = 25 pixels, which needs ``H, W >= 26`` (PyTorch
refuses smaller images too): :func:`usm_sharp` raises ``ValueError`` for a smaller static
shape; a smaller dynamic shape is not detected (its border would be blurred wrongly).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from sr.degradations.interpolate import separable

# cv2.getGaussianKernel's fixed weights for sigma <= 0, sides 1..9 (OpenCV 4 smooth.dispatch.cpp).
_SMALL_KERNELS = {
    1: [1.0],
    3: [0.25, 0.5, 0.25],
    5: [0.0625, 0.25, 0.375, 0.25, 0.0625],
    7: [0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125],
    9: [0.015625, 0.05078125, 0.1171875, 0.19921875, 0.234375]
    + [0.19921875, 0.1171875, 0.05078125, 0.015625],
}


def kernel_side(radius: int) -> int:
    """BasicSR's kernel side for ``radius``: the radius itself, made odd (50 -> 51)."""
    return radius + 1 if radius % 2 == 0 else radius


def gaussian_kernel_1d(side: int, sigma: float = 0.0) -> np.ndarray:
    """``cv2.getGaussianKernel(side, sigma)`` for float32, as a 1-D array of ``side`` weights.

    Args:
        side: odd kernel side (pixels).
        sigma: standard deviation (pixels); 0 or less takes OpenCV's rule
            ``0.3 * ((side - 1) * 0.5 - 1) + 0.8`` (8.0 for side 51).

    Returns:
        float32 ``[side]``, summing to 1. OpenCV computes it in float64 and normalises it
        there, then converts; so does this. For ``sigma <= 0`` and the smallest sides OpenCV
        returns fixed weights instead (sides 1 to 9); so does this.
    """
    if sigma <= 0 and side in _SMALL_KERNELS:
        return np.array(_SMALL_KERNELS[side], np.float32)
    if sigma <= 0:
        sigma = 0.3 * ((side - 1) * 0.5 - 1) + 0.8
    x = np.arange(side, dtype=np.float64) - (side - 1) / 2
    weights = np.exp(-(x**2) / (2 * sigma**2))
    return (weights / weights.sum()).astype(np.float32)


def reflect_blur_matrix(size, kernel: np.ndarray) -> tf.Tensor:
    """The ``[size, size]`` float32 matrix ``A`` of a 1-D blur with reflect-101 padding.

    ``(x @ A)[v] = sum_k kernel[k] x[reflect(v + k - pad)]``, ``pad = len(kernel) // 2``, where
    ``reflect`` mirrors about the edge samples without repeating them (PyTorch ``reflect``,
    OpenCV ``BORDER_REFLECT_101``). Each position reflects at most once for ``size > pad``:
    ``A[s, v]`` sums the tap that reads ``s`` directly, mirrored at the left edge (``s >= 1``)
    and mirrored at the right edge (``s <= size - 2``).

    Args:
        size: the side, ``> len(kernel) // 2`` (int or scalar int32 tensor).
        kernel: float32 ``[k]``, k odd.

    Returns:
        float32 ``[size, size]``, deterministic (no scatter), for static or dynamic sizes.
    """
    taps, pad = len(kernel), len(kernel) // 2
    s = tf.range(size)[:, None]
    v = tf.range(size)[None, :]
    g = tf.constant(kernel, tf.float32)

    def tap(k, valid):
        inside = valid & (k >= 0) & (k < taps)
        return tf.where(inside, tf.gather(g, tf.clip_by_value(k, 0, taps - 1)), 0.0)

    last = size - 1
    direct = tap(s - v + pad, tf.ones_like(s + v, tf.bool))
    left = tap(pad - s - v, s >= 1)
    right = tap(2 * last - s - v + pad, s <= last - 1)
    return direct + left + right


def gaussian_blur(images: tf.Tensor, kernel: np.ndarray) -> tf.Tensor:
    """BasicSR's ``filter2D`` by the outer product of ``kernel``: reflect-101 padding of
    ``k // 2``, then the separable blur, as two matrix products (:func:`reflect_blur_matrix`).

    Products by banded matrices rather than 51-tap depthwise convolutions, which cost more on a
    CPU (in the graph and under XLA); the same within float32 rounding (3.6e-7).

    Args:
        images: float32 ``[B, H, W, C]``, ``H, W > len(kernel) // 2``.
        kernel: float32 ``[k]``, k odd.

    Returns:
        float32 ``[B, H, W, C]``.
    """
    shape = tf.shape(images)
    rows = tf.transpose(reflect_blur_matrix(shape[1], kernel))  # [out, in]
    cols = tf.transpose(reflect_blur_matrix(shape[2], kernel))
    return separable(images, rows, cols)  # one GEMM per axis: 2x tf.einsum's speed on a CPU


def usm_mask(images: tf.Tensor, blurred: tf.Tensor, threshold: float = 10.0) -> tf.Tensor:
    """The hard mask of USM: 1.0 where ``|images - blurred| * 255 > threshold``, else 0.0.

    Args:
        images, blurred: float32 ``[B, H, W, C]`` in [0, 1].
        threshold: in 8-bit levels (0..255).

    Returns:
        float32 ``[B, H, W, C]`` of 0.0 and 1.0.
    """
    return tf.cast(tf.abs(images - blurred) * 255.0 > threshold, tf.float32)


def usm_sharp(images, weight: float = 0.5, radius: int = 50, threshold: float = 10.0) -> tf.Tensor:
    """Sharpen a batch by unsharp masking with a soft mask: BasicSR's ``USMSharp``.

    The formula and the source are in the module docstring. Used as Real-ESRGAN's sharpened
    ground truth (``gt_usm``): the LR is made from ``usm_sharp(hr)``, which is also the target.

    Args:
        images: float32 ``[B, H, W, C]`` in [0, 1], any static C; ``H, W >=
            kernel_side(radius) // 2 + 1`` (26 for radius 50).
        weight: sharpening strength (BasicSR: 0.5); 0 returns ``images``.
        radius: BasicSR's radius, the Gaussian kernel's side (made odd: 50 -> 51).
        threshold: the least residual, in 8-bit levels, that the mask keeps (BasicSR: 10).

    Returns:
        float32 ``[B, H, W, C]`` in [0, 1].

    Raises:
        ValueError: a static ``H`` or ``W`` too small for the reflect padding of the kernel,
            naming the shape and the least side.
    """
    images = tf.cast(images, tf.float32)
    side = kernel_side(int(radius))
    least = side // 2 + 1
    h, w = images.shape[1], images.shape[2]
    if (h is not None and h < least) or (w is not None and w < least):
        raise ValueError(
            f"usm_sharp: images of {h}x{w} pixels are smaller than {least}x{least}, the least "
            f"that reflect padding of the {side}x{side} kernel (radius {radius}) allows; "
            f"use larger crops or a smaller radius"
        )
    kernel = gaussian_kernel_1d(side)
    blurred = gaussian_blur(images, kernel)
    residual = images - blurred
    soft_mask = gaussian_blur(usm_mask(images, blurred, threshold), kernel)
    sharp = tf.clip_by_value(images + weight * residual, 0.0, 1.0)
    return soft_mask * sharp + (1.0 - soft_mask) * images
