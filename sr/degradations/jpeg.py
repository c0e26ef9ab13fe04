"""A batched JPEG round trip in TensorFlow ops: libjpeg's baseline codec, on the accelerator.

Real-ESRGAN (X. Wang et al., ICCV Workshops 2021) compresses whole batches on the GPU inside
its training step with DiffJPEG (BasicSR ``basicsr/utils/diffjpeg.py``: float DCT, float
tables, no chroma rounding). :func:`jpeg_batch` does the same job as libjpeg (IJG 6b and
libjpeg-turbo, the codec of Pillow, OpenCV and ``tf.io``) does with their defaults, step by
step in integer arithmetic, so that its output is libjpeg's decoded file, bit for bit:

1. round to the 8-bit grid; RGB -> YCbCr of JFIF (full range) in libjpeg's 16-bit fixed point
   (``jccolor.c``: Y = (19595 R + 38470 G + 7471 B + 2^15) >> 16, Cb and Cr likewise);
2. 4:2:0 chroma: each row padded to a multiple of 16 columns and the image to an even number
   of rows by repeating the last column and row, then ``h2v2_downsample`` (``jcsample.c``):
   the sum of each 2x2 block plus a bias alternating 1, 2, 1, 2 along the row, shifted by 2;
3. every plane padded to whole 8x8 blocks by repeating its last row and column (``jcprepct.c``);
4. level shift -128, the accurate integer DCT ``jpeg_fdct_islow`` (``jfdctint.c``: the
   Loeffler-Ligtenberg-Moschytz DCT-II of ITU-T T.81 A.3.3 in 13-bit fixed point);
5. quantisation by the IJG standard tables (T.81 Annex K.1) scaled by ``jpeg_quality_scaling``:
   ``5000 // q`` below 50, else ``200 - 2 q``; each entry ``(t * scale + 50) // 100`` clamped
   to 1..255 (baseline); each coefficient divided with rounding half away from zero
   (``jcdctmgr.c`` ``quantize``);
6. dequantisation, the accurate integer inverse DCT ``jpeg_idct_islow`` (``jidctint.c``),
   +128, clamped to 0..255;
7. the default "fancy" chroma upsampling (``jdsample.c`` ``h2v2_fancy_upsample``): a triangle
   filter, 3/4 nearer + 1/4 farther sample in each direction, rounding biases 8 and 7, the
   edge samples repeated (at the chroma plane's real size, ``ceil(H / 2) x ceil(W / 2)``);
   libjpeg repeats each sample instead when the chroma plane is 1 or 2 samples wide;
8. YCbCr -> RGB in libjpeg's fixed point (``jdcolor.c``), clamped to 0..255.

Measured against Pillow 13 (libjpeg-turbo 3.2, quality q, default 4:2:0, ISLOW): identical
pixels at every quality 1..100 and every size tried (1x1 to 11x11, odd sides, 112-pixel photo
crops), see ``tests/test_jpeg.py``. What differs from libjpeg:

- the quality is a float per image, rounded down to an integer and clamped to 1..100 (libjpeg
  takes an int);
- no entropy coding (Huffman coding is lossless: the decoded pixels do not depend on it);
- an inverse DCT sample far outside 0..255 (from hand-made coefficients, not from this
  encoder's) is clamped, where libjpeg's masked ``range_limit`` table may wrap it;
- it is not differentiable (DiffJPEG is): a degradation needs no gradient.

Where Real-ESRGAN's DiffJPEG (``DiffJPEG(differentiable=False)`` in ``feed_data``) differs from
libjpeg, and so from this: it pads to a multiple of 16 with zeros (black), not by repeating
edges; keeps floats throughout (no 8-bit input, YCbCr, chroma or output rounding); subsamples
chroma by a plain 2x2 mean and upsamples by repeating samples; scales the tables by a float
factor, unrounded and unclamped (quality 100 divides by zero); and its tables are transposed
(``y_table = ... .T`` against its DCT's [vertical, horizontal] frequency order).

Every stage is one op over the whole batch (any quality per image), integer arithmetic carried
exactly by float64 (CPU, GPU) or int32 (TPU), no CPU-only op: it runs on the accelerator inside
a training step and compiles with XLA (``tf.function(jit_compile=True)``). No float rounding
enters, so no device's rounding can change a pixel (tested on CPU: eager, graph and XLA, both
carriers, the same pixels).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

# T.81 Annex K.1, as IJG's jcparam.c lists them (natural order, row by row).
LUMA_TABLE = np.array(
    [
        [16, 11, 10, 16, 24, 40, 51, 61],
        [12, 12, 14, 19, 26, 58, 60, 55],
        [14, 13, 16, 24, 40, 57, 69, 56],
        [14, 17, 22, 29, 51, 87, 80, 62],
        [18, 22, 37, 56, 68, 109, 103, 77],
        [24, 35, 55, 64, 81, 104, 113, 92],
        [49, 64, 78, 87, 103, 121, 120, 101],
        [72, 92, 95, 98, 112, 100, 103, 99],
    ],
    np.int32,
)
CHROMA_TABLE = np.full((8, 8), 99, np.int32)
CHROMA_TABLE[:4, :4] = [[17, 18, 24, 47], [18, 21, 26, 66], [24, 26, 56, 99], [47, 66, 99, 99]]

# libjpeg's fixed point: SCALEBITS = 16, FIX(x) = round(x * 2^16), ONE_HALF = 2^15.
_SCALEBITS = 16
_ONE_HALF = 1 << (_SCALEBITS - 1)


# The 8-bit grid as float32, k / 255 correctly rounded, for k = 0..255.
_GRID = np.arange(256, dtype=np.float32) / np.float32(255)


def _fix(x: float) -> int:
    return int(x * (1 << _SCALEBITS) + 0.5)


def _shr(x: tf.Tensor, bits: int) -> tf.Tensor:
    """libjpeg's ``RIGHT_SHIFT``, floor of x / 2^bits: an arithmetic shift of int32, or an exact
    floor of float64 (integers below 2^53, times a power of two)."""
    if x.dtype.is_integer:
        return tf.bitwise.right_shift(x, tf.cast(bits, x.dtype))
    return tf.floor(x * 0.5**bits)


def _divide(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """floor(a / b) of integer values a >= 0, b > 0, exact in int32 and float64 (a float64
    quotient off by one ulp, as a division compiled to a reciprocal may give, is corrected)."""
    if a.dtype.is_integer:
        return a // b
    n = tf.floor(a / b)
    n = tf.where((n + 1) * b <= a, n + 1, n)
    return tf.where(n * b > a, n - 1, n)


# libjpeg's ISLOW DCT (jfdctint.c, jidctint.c): CONST_BITS = 13, PASS1_BITS = 2, FIX(x) for 2^13.
_CONST_BITS, _PASS1_BITS = 13, 2
_C0298, _C0390, _C0541, _C0765, _C0899, _C1175 = 2446, 3196, 4433, 6270, 7373, 9633
_C1501, _C1847, _C1961, _C2053, _C2562, _C3072 = 12299, 15137, 16069, 16819, 20995, 25172


def _descale(x: tf.Tensor, bits: int) -> tf.Tensor:
    """libjpeg's ``DESCALE``: x / 2^bits rounded half up."""
    return _shr(x + (1 << (bits - 1)), bits)


def _even_rotation(x, y):
    """The even part's rotator (sqrt(2) c6): ``(z + 0.765 x, z - 1.848 y)``, z = 0.541 (x + y)."""
    z1 = (x + y) * _C0541
    return z1 + x * _C0765, z1 - y * _C1847


def _odd_part(t4, t5, t6, t7):
    """The odd part of the ISLOW DCT, shared by the forward and inverse transform (figure 8
    of Loeffler, Ligtenberg and Moschytz; its matrix is orthogonal)."""
    z1, z2 = (t4 + t7) * -_C0899, (t5 + t6) * -_C2562
    z5 = (t4 + t5 + t6 + t7) * _C1175
    z3, z4 = (t4 + t6) * -_C1961 + z5, (t5 + t7) * -_C0390 + z5
    return (
        t4 * _C0298 + z1 + z3,
        t5 * _C2053 + z2 + z4,
        t6 * _C3072 + z2 + z3,
        t7 * _C1501 + z1 + z4,
    )


def _fdct_pass(d: list) -> list:
    """One pass of ``jpeg_fdct_islow`` (``jfdctint.c``) on 8 inputs, before its ``DESCALE``.

    libjpeg shifts the DC terms by ``PASS1_BITS`` (pass 1) or descales them by it (pass 2);
    scaled here by ``2^CONST_BITS`` they take the same ``DESCALE`` as the others, exactly.
    """
    tmp0, tmp7, tmp1, tmp6 = d[0] + d[7], d[0] - d[7], d[1] + d[6], d[1] - d[6]
    tmp2, tmp5, tmp3, tmp4 = d[2] + d[5], d[2] - d[5], d[3] + d[4], d[3] - d[4]
    tmp10, tmp13, tmp11, tmp12 = tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2
    dc0, dc4 = (tmp10 + tmp11) * (1 << _CONST_BITS), (tmp10 - tmp11) * (1 << _CONST_BITS)
    e2, e6 = _even_rotation(tmp13, tmp12)
    o7, o5, o3, o1 = _odd_part(tmp4, tmp5, tmp6, tmp7)
    return [dc0, o1, e2, o3, dc4, o5, e6, o7]


def _idct_pass(d: list) -> list:
    """One pass of ``jpeg_idct_islow`` (``jidctint.c``) on 8 inputs, before its ``DESCALE``."""
    tmp3, tmp2 = _even_rotation(d[2], d[6])
    tmp0, tmp1 = (d[0] + d[4]) * (1 << _CONST_BITS), (d[0] - d[4]) * (1 << _CONST_BITS)
    tmp10, tmp13, tmp11, tmp12 = tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2
    o0, o1, o2, o3 = _odd_part(d[7], d[5], d[3], d[1])
    out = [tmp10 + o3, tmp11 + o2, tmp12 + o1, tmp13 + o0]
    return out + [tmp13 - o0, tmp12 - o1, tmp11 - o2, tmp10 - o3]


def _pass_matrix(butterfly) -> np.ndarray:
    """The integer matrix ``M`` of a pass: between its input and its ``DESCALE`` a pass is
    additions and multiplications by integers only, so it is ``M @ d`` exactly."""
    return np.stack(butterfly(list(np.eye(8, dtype=np.int64)))).astype(np.int32)


FDCT_PASS, IDCT_PASS = _pass_matrix(_fdct_pass), _pass_matrix(_idct_pass)


def _along(blocks: tf.Tensor, axis: int, matrix: np.ndarray, bits: int) -> tf.Tensor:
    """``DESCALE(M @ x, bits)`` along ``axis`` (-1: rows, -2: columns) of ``[..., 8, 8]``.

    float64: a matmul, exact (every sum is an integer below 2^40). int32: a broadcast product
    and sum, as TensorFlow's GPU kernels have no int32 matmul.
    """
    m = tf.constant(matrix, blocks.dtype)
    if blocks.dtype.is_floating:
        out = tf.matmul(blocks, m, transpose_b=True) if axis == -1 else tf.matmul(m, blocks)
    elif axis == -1:
        out = tf.reduce_sum(blocks[..., None, :] * m, axis=-1)
    else:
        out = tf.reduce_sum(m[:, :, None] * blocks[..., None, :, :], axis=-2)
    return _descale(out, bits)


def fdct_islow(blocks: tf.Tensor) -> tf.Tensor:
    """libjpeg's ``jpeg_fdct_islow``: ``[..., 8, 8]`` samples -128..127 -> 8x the DCT
    (int32, or float64 holding integers)."""
    rows = _along(blocks, -1, FDCT_PASS, _CONST_BITS - _PASS1_BITS)
    return _along(rows, -2, FDCT_PASS, _CONST_BITS + _PASS1_BITS)


def idct_islow(coef: tf.Tensor) -> tf.Tensor:
    """libjpeg's ``jpeg_idct_islow``: ``[..., 8, 8]`` dequantised DCT -> samples 0..255
    (int32, or float64 holding integers)."""
    cols = _along(coef, -2, IDCT_PASS, _CONST_BITS - _PASS1_BITS)
    out = _along(cols, -1, IDCT_PASS, _CONST_BITS + _PASS1_BITS + 3)
    return tf.clip_by_value(out + 128, 0, 255)


def quality_tables(quality) -> tuple[tf.Tensor, tf.Tensor]:
    """IJG's quantisation tables scaled for each quality (libjpeg ``jpeg_set_quality``, baseline).

    Args:
        quality: ``[B]`` float or int, 1..100 (values outside are clamped, floats rounded down).

    Returns:
        ``(luma, chroma)``, each int32 ``[B, 8, 8]`` in 1..255, natural (not zigzag) order.
    """
    q = tf.clip_by_value(tf.cast(tf.floor(tf.cast(quality, tf.float32)), tf.int32), 1, 100)
    scale = tf.where(q < 50, 5000 // q, 200 - 2 * q)[:, None, None]

    def scaled(table):
        return tf.clip_by_value((tf.constant(table)[None] * scale + 50) // 100, 1, 255)

    return scaled(LUMA_TABLE), scaled(CHROMA_TABLE)


def _affine(x: tf.Tensor, matrix, offsets) -> tf.Tensor:
    """``x @ matrix^T + offsets`` over the last axis of integer values, exactly: a float64
    matmul (integers below 2^53) or an int32 broadcast product and sum."""
    m = tf.constant(matrix, x.dtype)
    if x.dtype.is_floating:
        out = tf.tensordot(x, tf.transpose(m), axes=1)
    else:
        out = tf.reduce_sum(x[..., None, :] * m, axis=-1)
    return out + tf.constant(offsets, x.dtype)


# libjpeg's colour conversions as integer matrices before the shift by SCALEBITS: jccolor.c
# (CBCR_OFFSET + ONE_HALF - 1 makes Cb and Cr round down at 255.5), and jdcolor.c with the
# luma inside the shift (y + (v >> 16) = (y * 2^16 + v) >> 16) and Cb, Cr centred on 128.
_TO_YCC = [
    [_fix(0.299), _fix(0.587), _fix(0.114)],
    [-_fix(0.16874), -_fix(0.33126), _fix(0.5)],
    [_fix(0.5), -_fix(0.41869), -_fix(0.08131)],
]
_TO_YCC_OFFSETS = [_ONE_HALF] + [(128 << _SCALEBITS) + _ONE_HALF - 1] * 2
_TO_RGB = [
    [1 << _SCALEBITS, 0, _fix(1.40200)],
    [1 << _SCALEBITS, -_fix(0.34414), -_fix(0.71414)],
    [1 << _SCALEBITS, _fix(1.77200), 0],
]
_TO_RGB_OFFSETS = [_ONE_HALF - 128 * sum(row[1:]) for row in _TO_RGB]


def _rgb_to_ycbcr(rgb: tf.Tensor) -> tf.Tensor:
    """``[B, H, W, 3]`` RGB 0..255 -> YCbCr 0..255 as libjpeg's ``rgb_ycc_convert``."""
    return _shr(_affine(rgb, _TO_YCC, _TO_YCC_OFFSETS), _SCALEBITS)


def _ycbcr_to_rgb(ycc: tf.Tensor) -> tf.Tensor:
    """``[B, H, W, 3]`` YCbCr 0..255 -> RGB 0..255 as libjpeg's ``ycc_rgb_convert``."""
    rgb = _shr(_affine(ycc, _TO_RGB, _TO_RGB_OFFSETS), _SCALEBITS)
    return tf.clip_by_value(rgb, 0, 255)


def _pad_edge(x: tf.Tensor, height, width) -> tf.Tensor:
    """``[B, h, w, C]`` -> ``[B, height, width, C]`` repeating the last row and column."""
    rows = tf.minimum(tf.range(height), tf.shape(x)[1] - 1)
    cols = tf.minimum(tf.range(width), tf.shape(x)[2] - 1)
    return tf.gather(tf.gather(x, rows, axis=1), cols, axis=2)


def _downsample(chroma: tf.Tensor) -> tf.Tensor:
    """libjpeg's ``h2v2_downsample`` of ``[B, 2h, 2w, C]`` -> ``[B, h, w, C]``."""
    shape = tf.shape(chroma)
    h, w = shape[1] // 2, shape[2] // 2
    blocks = tf.reshape(chroma, [shape[0], h, 2, w, 2, shape[3]])
    total = tf.reduce_sum(blocks, axis=[2, 4])
    bias = tf.cast(1 + tf.range(w) % 2, chroma.dtype)  # 1, 2, 1, 2, ... along each row
    return _shr(total + bias[None, None, :, None], 2)


def _upsample(chroma: tf.Tensor) -> tf.Tensor:
    """libjpeg's ``h2v2_fancy_upsample`` of ``[B, h, w, C]`` -> ``[B, 2h, 2w, C]``."""
    shape = tf.shape(chroma)
    b, h, w, c = shape[0], shape[1], shape[2], shape[3]
    above = tf.gather(chroma, tf.maximum(tf.range(h) - 1, 0), axis=1)
    below = tf.gather(chroma, tf.minimum(tf.range(h) + 1, h - 1), axis=1)
    # Column sums of the two output rows of each input row: 3 * nearer + farther.
    sums = tf.stack([3 * chroma + above, 3 * chroma + below], axis=2)  # [B, h, 2, w, C]
    left = tf.gather(sums, tf.maximum(tf.range(w) - 1, 0), axis=3)
    right = tf.gather(sums, tf.minimum(tf.range(w) + 1, w - 1), axis=3)
    even, odd = _shr(3 * sums + left + 8, 4), _shr(3 * sums + right + 7, 4)
    out = tf.stack([even, odd], axis=4)  # [B, h, 2, w, 2, C]
    return tf.reshape(out, [b, 2 * h, 2 * w, c])


def _repeat(chroma: tf.Tensor) -> tf.Tensor:
    """libjpeg's ``h2v2_upsample`` of ``[B, h, w, C]`` -> ``[B, 2h, 2w, C]``: each sample 2x2."""
    return tf.repeat(tf.repeat(chroma, 2, axis=1), 2, axis=2)


def _dct_round_trip(plane: tf.Tensor, table: tf.Tensor) -> tf.Tensor:
    """Quantise one plane in 8x8 blocks and decode it.

    Args:
        plane: ``[B, 8 m, 8 n, C]`` samples 0..255, int32 or float64 (integer values).
        table: int32 ``[B, 8, 8]`` quantisation table per image.

    Returns:
        ``[B, 8 m, 8 n, C]`` decoded samples 0..255, the dtype of ``plane``.
    """
    table = tf.cast(table, plane.dtype)
    shape = tf.shape(plane)
    b, m, n, c = shape[0], shape[1] // 8, shape[2] // 8, shape[3]
    blocks = tf.reshape(plane - 128, [b, m, 8, n, 8, c])
    blocks = tf.reshape(tf.transpose(blocks, [0, 1, 3, 5, 2, 4]), [b, -1, 8, 8])
    coef = fdct_islow(blocks)
    # libjpeg's quantize: |coef| / (8 q) rounded half up, the sign restored.
    divisor = 8 * table[:, None]
    levels = tf.sign(coef) * _divide(tf.abs(coef) + divisor // 2, divisor)
    out = idct_islow(levels * table[:, None])
    out = tf.transpose(tf.reshape(out, [b, m, n, c, 8, 8]), [0, 1, 4, 2, 5, 3])
    return tf.reshape(out, shape)


def jpeg_batch(images, quality, dtype=tf.float64) -> tf.Tensor:
    """Compress and decompress each image of a batch as baseline JPEG, in TensorFlow ops.

    libjpeg's round trip with Pillow's and OpenCV's defaults (4:2:0 chroma, ISLOW DCT, fancy
    upsampling), pixel for pixel; the steps and the differences are in the module docstring.
    Source: ITU-T T.81 (JPEG baseline) and IJG libjpeg / libjpeg-turbo (``jccolor.c``,
    ``jcsample.c``, ``jfdctint.c``, ``jcparam.c``, ``jidctint.c``, ``jdsample.c``, ``jdcolor.c``).

    Args:
        images: float32 ``[B, H, W, 3]`` RGB in [0, 1] (values outside are clipped), any
            ``H, W >= 1``; rounded to the 8-bit grid first, as an encoder of uint8 images.
        quality: ``[B]`` float or int, the JPEG quality of each image, or a scalar for all;
            1..100 (clamped; a float is rounded down).
        dtype: the integer arithmetic's carrier, same pixels either way. ``tf.float64``
            (default): exact on integers below 2^53, runs on CPU and GPU with or without XLA
            (TensorFlow keeps int32 arithmetic on the host when a GPU op is not compiled).
            ``tf.int32``: for TPUs (no float64), under XLA.

    Returns:
        float32 ``[B, H, W, 3]`` in [0, 1], on the 8-bit grid (multiples of 1/255).

    Raises:
        ValueError: ``dtype`` is neither ``tf.int32`` nor ``tf.float64``.
    """
    if dtype not in (tf.int32, tf.float64):
        raise ValueError(f"jpeg_batch: dtype {dtype!r} is not tf.int32 or tf.float64")
    images = tf.cast(images, tf.float32)
    shape = tf.shape(images)
    b, h, w = shape[0], shape[1], shape[2]
    rgb = tf.cast(tf.round(tf.clip_by_value(images, 0.0, 1.0) * 255.0), dtype)
    ycc = _rgb_to_ycbcr(rgb)
    luma_table, chroma_table = quality_tables(tf.broadcast_to(quality, [b]))
    # Luma: whole 8x8 blocks. Chroma: rows padded to 16 columns, an even number of rows, halved.
    h8, w8 = (h + 7) // 8 * 8, (w + 7) // 8 * 8
    hc, wc = (h + 1) // 2, (w + 1) // 2  # the chroma plane libjpeg keeps
    luma = _dct_round_trip(_pad_edge(ycc[..., :1], h8, w8), luma_table)[:, :h, :w]
    chroma = _downsample(_pad_edge(ycc[..., 1:], 2 * hc, (w + 15) // 16 * 16))
    chroma = _pad_edge(chroma, (hc + 7) // 8 * 8, (wc + 7) // 8 * 8)
    chroma = _dct_round_trip(chroma, chroma_table)[:, :hc, :wc]
    # libjpeg (jdsample.c) upsamples a chroma plane of 1 or 2 columns by repeating its samples.
    if images.shape[2] is not None:  # a static width: one branch in the graph
        chroma = _upsample(chroma) if images.shape[2] > 4 else _repeat(chroma)
    else:
        chroma = tf.cond(wc > 2, lambda: _upsample(chroma), lambda: _repeat(chroma))
    chroma = chroma[:, :h, :w]
    out = _ycbcr_to_rgb(tf.concat([luma, chroma], axis=-1))
    # k / 255 by a table, not a division: XLA would multiply by 1/255, one ulp off.
    return tf.reshape(tf.gather(tf.constant(_GRID), tf.cast(out, tf.int32)), [b, h, w, 3])
