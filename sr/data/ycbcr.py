"""Chroma (Cb, Cr) of ITU-R BT.601 as MATLAB ``rgb2ycbcr`` computes it, and the way back to RGB.

Only upscaling needs the chroma: the model super-resolves Y (:func:`sr.data.color.rgb_to_y`, the
one Y conversion of the project) and Cb, Cr are upscaled by bicubic, as in SRCNN and its
successors.

MATLAB ``rgb2ycbcr`` for R, G, B in [0, 1]: Cb = 128 - 37.797 R - 74.203 G + 112.0 B and
Cr = 128 + 112.0 R - 93.786 G - 18.214 B (studio range 16..240). Source: ITU-R BT.601-7,
section 2.5. The inverse is the inverse of the full 3x3 matrix (Y row from ``sr.data.color``).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from sr.data.color import Y_OFFSET, Y_WEIGHTS, rgb_to_y

C_OFFSET = 128.0
CB_WEIGHTS = (-37.797, -74.203, 112.0)
CR_WEIGHTS = (112.0, -93.786, -18.214)

# [Y, Cb, Cr] = OFFSETS + M @ [R, G, B] for R, G, B in [0, 255].
_M = np.array([Y_WEIGHTS, CB_WEIGHTS, CR_WEIGHTS], dtype=np.float64) / 255.0
_OFFSETS = (Y_OFFSET, C_OFFSET, C_OFFSET)
_M_INV = tuple(tuple(float(v) for v in row) for row in np.linalg.inv(_M))


def _float(x):
    if isinstance(x, np.ndarray):
        return x.astype(np.float64) if x.dtype.kind in "ui" else x
    x = tf.convert_to_tensor(x)
    return tf.cast(x, tf.float32) if x.dtype.is_integer else x


def _concat(parts):
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, axis=-1)
    return tf.concat(parts, axis=-1)


def _check(x, name: str):
    if x.shape[-1] != 3:
        raise ValueError(f"{name} needs [..., 3] input, got shape {tuple(x.shape)}")


def rgb_to_ycbcr(rgb):
    """Y, Cb, Cr of BT.601 (MATLAB ``rgb2ycbcr``) from RGB in [0, 255].

    Works the same on NumPy arrays and TensorFlow tensors (plain arithmetic).

    Args:
        rgb: ``[..., 3]``, float or integer, values in [0, 255].

    Returns:
        ``[..., 3]`` float (float64 for NumPy integer input, float32 for integer tensors, else the
        input's dtype): Y in [16, 235], Cb and Cr in [16, 240]; not rounded.

    Raises:
        ValueError: if the last axis is not 3.
    """
    _check(rgb, "rgb_to_ycbcr")
    rgb = _float(rgb)
    r, g, b = rgb[..., 0:1], rgb[..., 1:2], rgb[..., 2:3]
    chroma = [
        C_OFFSET + (wr * r + wg * g + wb * b) / 255.0 for wr, wg, wb in (CB_WEIGHTS, CR_WEIGHTS)
    ]
    return _concat([rgb_to_y(rgb), *chroma])


def ycbcr_to_rgb(ycbcr):
    """RGB in [0, 255] from BT.601 Y, Cb, Cr (the exact inverse of :func:`rgb_to_ycbcr`).

    Args:
        ycbcr: ``[..., 3]`` float NumPy array or tensor (Y 16..235, Cb and Cr 16..240 for
            in-gamut colours; other values are converted all the same).

    Returns:
        ``[..., 3]`` RGB of the input's float dtype, nominally in [0, 255]; not rounded or
        clipped (an SR Y with chroma from bicubic may fall slightly outside).

    Raises:
        ValueError: if the last axis is not 3.
    """
    _check(ycbcr, "ycbcr_to_rgb")
    ycbcr = _float(ycbcr)
    centred = [ycbcr[..., k : k + 1] - _OFFSETS[k] for k in range(3)]
    rgb = [sum(w * c for w, c in zip(row, centred, strict=True)) for row in _M_INV]
    return _concat(rgb)
