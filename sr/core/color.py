"""Colour of ITU-R BT.601 as MATLAB ``rgb2ycbcr`` computes it: the project's one Y conversion.

The SR literature (SRCNN, VDSR, EDSR, RCAN) trains and scores on this Y, in the studio range
16..235. Full-range conversions (``tf.image.rgb_to_yuv``, PIL ``"L"``, OpenCV) differ from it by a
gain of 219/255 and an offset of 16, which shifts PSNR by about 1.32 dB; do not use them.

Two operations, one name each:

- :func:`y_channel`: Y of a decoded image of any layout (gray, gray + alpha, RGB, RGBA), keeping
  its class as MATLAB's ``rgb2ycbcr`` does: uint8 in, rounded uint8 out (decoding for training,
  ``sr.core.images.load_y``); float in, unrounded float64 out (scoring, ``sr.evaluation``).
- :func:`rgb_to_ycbcr` / :func:`ycbcr_to_rgb`: the three channels and the way back, on NumPy
  arrays or TensorFlow tensors, for upscaling (``sr.inference``: Y by the model, Cb and Cr by
  bicubic, as in SRCNN).

MATLAB ``rgb2ycbcr`` for R, G, B in [0, 1] (source: ITU-R BT.601-7, section 2.5)::

    Y  =  16 +  65.481 R + 128.553 G +  24.966 B    (16..235)
    Cb = 128 -  37.797 R -  74.203 G + 112.0   B    (16..240)
    Cr = 128 + 112.0   R -  93.786 G -  18.214 B    (16..240)

Each row is evaluated by one expression (:func:`_row`), on R, G, B in [0, 255]; the uint8 path of
:func:`y_channel` is the Y row in exact integer arithmetic.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

# The rows of MATLAB rgb2ycbcr's matrix, for R, G, B in [0, 1]; the offsets of Y, Cb, Cr.
Y_OFFSET, C_OFFSET = 16.0, 128.0
Y_WEIGHTS = (65.481, 128.553, 24.966)
CB_WEIGHTS = (-37.797, -74.203, 112.0)
CR_WEIGHTS = (112.0, -93.786, -18.214)
Y_MIN, Y_MAX = 16.0, 235.0

# [Y, Cb, Cr] = OFFSETS + M @ [R, G, B] for R, G, B in [0, 255]; the inverse for ycbcr_to_rgb.
_OFFSETS = (Y_OFFSET, C_OFFSET, C_OFFSET)
_WEIGHTS = (Y_WEIGHTS, CB_WEIGHTS, CR_WEIGHTS)
_M = np.array(_WEIGHTS, dtype=np.float64) / 255.0
_M_INV = tuple(tuple(float(v) for v in row) for row in np.linalg.inv(_M))

# The Y row in integers: Y = 16 + (65481 R + 128553 G + 24966 B) / 255000 exactly.
_Y_WEIGHTS_INT = tuple(round(1000 * w) for w in Y_WEIGHTS)  # 65481, 128553, 24966
_Y_DENOMINATOR = 255_000


def _row(rgb, offset: float, weights: tuple[float, float, float]):
    """One row of the matrix: ``offset + (wr R + wg G + wb B) / 255`` of float RGB ``[..., 3]``
    (NumPy or TF) in [0, 255]; returns ``[..., 1]``."""
    r, g, b = rgb[..., 0:1], rgb[..., 1:2], rgb[..., 2:3]
    wr, wg, wb = weights
    return offset + (wr * r + wg * g + wb * b) / 255.0


def _y_uint8(rgb: np.ndarray) -> np.ndarray:
    """Y of uint8 ``[..., C]`` (C >= 3: R, G, B first) rounded to uint8, in exact integer
    arithmetic.

    ``floor(Y + 0.5) = 16 + (65481 R + 128553 G + 24966 B + 127500) // 255000``: no float rounding
    at all, exact halves round up as MATLAB's ``uint8`` does. An image ``[H, W, C]`` is done in
    bands of rows of about 64K pixels, in place on two int32 buffers that stay in the CPU cache
    (no full-size temporaries, whose allocation and page faults cost more than the arithmetic),
    which matters when decoding 2K images.
    """
    wr, wg, wb = (np.int32(v) for v in _Y_WEIGHTS_INT)
    offset = _Y_DENOMINATOR // 2 + int(Y_OFFSET) * _Y_DENOMINATOR  # + 0.5, then + 16 after //
    if rgb.ndim != 3:  # any other layout: one pass
        acc = wr * rgb[..., 0].astype(np.int32)
        acc += wg * rgb[..., 1].astype(np.int32)
        acc += wb * rgb[..., 2].astype(np.int32)
        acc += offset
        return (acc // _Y_DENOMINATOR).astype(np.uint8)
    h, w = rgb.shape[:2]
    rows = max(1, (1 << 16) // max(w, 1))
    out = np.empty((h, w), np.uint8)
    acc_buf = np.empty((min(rows, h), w), np.int32)
    tmp_buf = np.empty_like(acc_buf)
    for top in range(0, h, rows):
        band = rgb[top : top + rows]
        acc, tmp = acc_buf[: len(band)], tmp_buf[: len(band)]
        np.multiply(band[..., 0], wr, out=acc, dtype=np.int32)
        np.multiply(band[..., 1], wg, out=tmp, dtype=np.int32)
        acc += tmp
        np.multiply(band[..., 2], wb, out=tmp, dtype=np.int32)
        acc += tmp
        acc += offset
        acc //= _Y_DENOMINATOR
        out[top : top + rows] = acc  # 16..235
    return out


def y_rounded(rgb: tf.Tensor) -> tf.Tensor:
    """Rounded Y of uint8 RGB tensors, in the graph: exactly :func:`y_channel` of uint8 input.

    ``16 + (65481 R + 128553 G + 24966 B + 127500) // 255000`` in int32 (the largest sum,
    56,103,000, fits), so exact halves round up as MATLAB's ``uint8`` does, with no float
    rounding.

    Args:
        rgb: uint8 tensor ``[..., 3]`` (R, G, B).

    Returns:
        uint8 tensor ``[..., 1]`` in 16..235.
    """
    _check(rgb, "y_rounded")
    x = tf.cast(rgb, tf.int32)
    wr, wg, wb = _Y_WEIGHTS_INT
    acc = wr * x[..., 0:1] + wg * x[..., 1:2] + wb * x[..., 2:3]
    offset = _Y_DENOMINATOR // 2 + int(Y_OFFSET) * _Y_DENOMINATOR
    return tf.cast((acc + offset) // _Y_DENOMINATOR, tf.uint8)


def y_of(rgb):
    """Unrounded Y of float RGB ``[..., 3]`` on the [0, 255] scale (NumPy or TF), ``[..., 1]``:
    the Y row of :func:`rgb_to_ycbcr` alone (what ``sr.evaluation`` feeds a model, times 255)."""
    _check(rgb, "y_of")
    return _row(_float(rgb), Y_OFFSET, Y_WEIGHTS)


def gray_of(rgb):
    """The gray of RGB: the value whose replication to R, G and B has the same Y (BT.601,
    :func:`y_of`), ``(Y - 16) 255 / 219`` = ``0.299 R + 0.587 G + 0.114 B``; exact on gray
    pixels (``gray_of([g, g, g]) = g``). The one gray of the project: an RGB model's output
    for a gray image, a gray image's degraded LR, a gray crop's LR in training.

    Args:
        rgb: float ``[..., 3]`` on the [0, 255] scale (NumPy or TensorFlow).

    Returns:
        ``[..., 1]`` of the same kind, not rounded.
    """
    return (y_of(rgb) - Y_OFFSET) * (255.0 / (Y_MAX - Y_MIN))


def y_channel(image) -> np.ndarray:
    """Y of BT.601 (MATLAB ``rgb2ycbcr``, first channel) of an image of any layout.

    The class is kept as MATLAB's ``rgb2ycbcr`` keeps it: a uint8 image gives the uint8 Y rounded
    half up (exactly, by integer arithmetic); a float image gives the unrounded float64 Y. A gray
    image (with or without alpha) is its own Y; an alpha channel is ignored.

    Args:
        image: NumPy ``[H, W]`` or ``[H, W, C]``: C = 1 (gray), 2 (gray + alpha), 3 (RGB) or
            4 (RGBA); uint8, or float with values on the [0, 255] scale.

    Returns:
        ``[H, W]``: uint8 for uint8 input (16..235 for RGB), float64 otherwise ([16, 235] for RGB
        in [0, 255]); for gray input the gray values themselves (a view for uint8).

    Raises:
        ValueError: for any other shape (names it).
        TypeError: for an integer dtype other than uint8 (names it).
    """
    x = np.asarray(image)
    if not (x.ndim == 2 or (x.ndim == 3 and 1 <= x.shape[-1] <= 4)):
        raise ValueError(
            f"y_channel needs an image [H, W] or [H, W, C] with C = 1 (gray), 2 (gray + alpha), "
            f"3 (RGB) or 4 (RGBA), got shape {x.shape}"
        )
    if x.dtype == np.uint8:
        if x.ndim == 2:
            return x
        return x[..., 0] if x.shape[-1] <= 2 else _y_uint8(x)
    if x.dtype.kind != "f":
        raise TypeError(
            f"y_channel needs uint8 or float pixels (0..255), got {x.dtype}: convert the image "
            "with .astype(np.uint8) or .astype(np.float64)"
        )
    x = x.astype(np.float64, copy=False)
    if x.ndim == 2:
        return x
    if x.shape[-1] <= 2:
        return x[..., 0]
    return _row(x, Y_OFFSET, Y_WEIGHTS)[..., 0]


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

    Works the same on NumPy arrays and TensorFlow tensors (plain arithmetic, no library call), so
    that it can run inside the upscaling graph. Channel 0 is the float Y of :func:`y_channel`.

    Args:
        rgb: ``[..., 3]`` NumPy array or tensor, float or integer, values in [0, 255].

    Returns:
        ``[..., 3]`` float (float64 for NumPy integer input, float32 for integer tensors, else the
        input's dtype): Y in [16, 235], Cb and Cr in [16, 240]; not rounded.

    Raises:
        ValueError: if the last axis is not 3.
    """
    _check(rgb, "rgb_to_ycbcr")
    rgb = _float(rgb)
    return _concat([_row(rgb, o, w) for o, w in zip(_OFFSETS, _WEIGHTS, strict=True)])


def ycbcr_to_rgb(ycbcr):
    """RGB in [0, 255] from BT.601 Y, Cb, Cr (the exact inverse of :func:`rgb_to_ycbcr`).

    Args:
        ycbcr: ``[..., 3]`` NumPy array or tensor (Y 16..235, Cb and Cr 16..240 for in-gamut
            colours; other values are converted all the same).

    Returns:
        ``[..., 3]`` RGB of the input's float dtype (float64 for NumPy integers, float32 for
        integer tensors), nominally in [0, 255]; not rounded or clipped (an SR Y with chroma
        from bicubic may fall slightly outside).

    Raises:
        ValueError: if the last axis is not 3.
    """
    _check(ycbcr, "ycbcr_to_rgb")
    ycbcr = _float(ycbcr)
    centred = [ycbcr[..., k : k + 1] - _OFFSETS[k] for k in range(3)]
    rgb = [sum(w * c for w, c in zip(row, centred, strict=True)) for row in _M_INV]
    return _concat(rgb)
