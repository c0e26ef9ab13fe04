"""Luminance (Y channel) of ITU-R BT.601, as MATLAB ``rgb2ycbcr`` computes it.

The SR literature (SRCNN, VDSR, EDSR, RCAN) scores and trains on this Y, in the studio range
16..235. Full-range conversions (``tf.image.rgb_to_yuv``, PIL ``"L"``, OpenCV) differ from it by
a gain of 219/255 and an offset of 16, which shifts PSNR by about 1.32 dB; do not use them.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

# MATLAB rgb2ycbcr, first row of its matrix (for R, G, B in [0, 1]): Y = 16 + 65.481 R + 128.553 G
# + 24.966 B. Source: ITU-R BT.601-7, section 2.5.
Y_OFFSET = 16.0
Y_WEIGHTS = (65.481, 128.553, 24.966)
Y_MIN, Y_MAX = 16.0, 235.0


def rgb_to_y(rgb):
    """Y of BT.601 (MATLAB ``rgb2ycbcr``) from RGB in [0, 255].

    Works the same on NumPy arrays and TensorFlow tensors (plain arithmetic, no library call), so
    that training, evaluation and tests share this one conversion.

    Args:
        rgb: array or tensor ``[..., 3]``, float or integer, values in [0, 255].

    Returns:
        ``[..., 1]``, float (float64 for NumPy integer input, else the input's float dtype),
        values in [16, 235]; not rounded.

    Raises:
        ValueError: if the last axis is not 3.
    """
    if rgb.shape[-1] != 3:
        raise ValueError(f"rgb_to_y needs [..., 3] RGB input, got shape {tuple(rgb.shape)}")
    if isinstance(rgb, np.ndarray):
        if rgb.dtype.kind in "ui":
            rgb = rgb.astype(np.float64)
    elif rgb.dtype.is_integer:
        rgb = tf.cast(rgb, tf.float32)
    r, g, b = rgb[..., 0:1], rgb[..., 1:2], rgb[..., 2:3]
    wr, wg, wb = Y_WEIGHTS
    return Y_OFFSET + (wr * r + wg * g + wb * b) / 255.0
