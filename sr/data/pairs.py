"""The post-decode graph stage shared by both loader modes: uint8 HR Y patches (with a margin)
in, float LR/HR training pairs out, one vectorised call per batch.

Order of operations, per batch of B patches:
1. random flips (and optional transposes) per sample; the bicubic operator commutes with flips
   and transposes of a square patch whose margin is a multiple of the scale, so the LR is exactly
   the LR of the flipped HR;
2. LR = MATLAB-equivalent bicubic of the HR patch (``sr.data.degrade``), rounded to the 8-bit
   grid like a saved LR image, margin cut away. The operator is linear and separable, so for a
   fixed crop size it is a matrix ``W`` ``[P/s, P + 2m]`` and ``LR = W X W^T``: two batched
   matrix products, with ``W`` read off ``sr.data.degrade.bicubic_downscale`` itself (applied to
   basis images once per geometry), so the operator stays the one of ``sr.data.degrade``; only
   the float32 summation order differs (at most one grey level on rare rounding ties). A flip of
   the crop is a reversal of the columns of ``W``, so the flipped LR costs nothing extra. The
   stage costs about 2.3 CPU-ms per batch of 64 instead of 7.7 with
   ``tf.image.resize(antialias=True)`` and flips on uint8 (``scripts/bench_data.py``);
3. both scaled to [0, 1].

Pre-made LR patches (``lr``) and whole images (margin 0) take the generic path: flips on the uint8
tensors, then ``bicubic_downscale``.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from sr.data.degrade import bicubic_downscale, quantize


@functools.lru_cache(maxsize=16)
def downscale_matrix(size: int, scale: int, margin: int) -> np.ndarray:
    """The 1-D weights of ``bicubic_downscale(., scale, margin)`` on a square ``size`` crop.

    Row ``i`` of the result is the LR response to an HR image whose row ``i`` is 1 and all else 0
    (the kernel's weights are normalised, so the other axis contributes a factor 1), hence
    ``bicubic_downscale(x, scale, margin) == W @ x @ W.T`` for every ``[size, size]`` image ``x``.

    Returns:
        float32 ``[(size - 2 margin) / scale, size]``.
    """
    with tf.init_scope():  # eager even when called while tracing a tf.data function
        basis = np.zeros((size, size, size, 1), np.float32)
        basis[np.arange(size), np.arange(size), :, 0] = 1.0
        out = bicubic_downscale(tf.constant(basis), scale, margin=margin).numpy()
    return np.ascontiguousarray(out[:, :, 0, 0].T)


def _pairs_by_matrix(hr: tf.Tensor, scale: int, margin: int, masks) -> tuple[tf.Tensor, tf.Tensor]:
    """Flipped LR and HR of a batch of square uint8 crops ``[B, C, C, 1]`` with margin.

    A vertical flip J of the crop turns ``W X W^T`` into ``(W J) X W^T``, and ``W J`` is ``W``
    with its columns reversed, so the LR of the flipped crop comes from per-sample matrices at no
    extra cost; the HR patch is flipped after the cast (float ``where`` is cheaper than on uint8).
    Returns float32 ``[B, p, p]`` LR (quantized, 0..255) and ``[B, P, P]`` HR (0..255)."""
    flip_v, flip_h, _ = masks
    w = downscale_matrix(hr.shape[1], scale, margin)
    w, w_rev = tf.constant(w), tf.constant(np.ascontiguousarray(w[:, ::-1]))
    wv = tf.where(flip_v[:, tf.newaxis, tf.newaxis], w_rev, w)  # [B, p, C]
    wh = tf.where(flip_h[:, tf.newaxis, tf.newaxis], w_rev, w)
    x = tf.cast(hr[..., 0], tf.float32)
    lr = quantize(tf.matmul(tf.matmul(wv, x), wh, transpose_b=True))
    out = tf.cast(hr[:, margin:-margin, margin:-margin, 0], tf.float32)
    out = tf.where(flip_v[:, tf.newaxis, tf.newaxis], tf.reverse(out, [1]), out)
    out = tf.where(flip_h[:, tf.newaxis, tf.newaxis], tf.reverse(out, [2]), out)
    return lr, out


def _random_dihedral(x: tf.Tensor, masks: tuple[tf.Tensor, ...], rot90: bool) -> tf.Tensor:
    """Apply per-sample flips (and a transpose, which with flips gives all 8 rotations/reflections)
    selected by boolean ``masks`` of shape ``[B]`` to ``[B, H, W, C]``."""
    flip_v, flip_h, transpose = masks

    def where(mask, a, b):
        return tf.where(mask[:, tf.newaxis, tf.newaxis, tf.newaxis], a, b)

    x = where(flip_v, tf.reverse(x, [1]), x)
    x = where(flip_h, tf.reverse(x, [2]), x)
    if rot90:
        x = where(transpose, tf.transpose(x, [0, 2, 1, 3]), x)
    return x


def random_masks(batch: tf.Tensor, flip: bool, rot90: bool, seed=None) -> tuple[tf.Tensor, ...]:
    """Three independent fair-coin boolean vectors ``[B]`` (vertical flip, horizontal flip,
    transpose); all False where the augmentation is off."""
    n = tf.shape(batch)[0]
    coins = tf.random.uniform([3, n], seed=seed) < 0.5
    on = tf.constant([flip, flip, rot90])
    coins = tf.logical_and(coins, on[:, tf.newaxis])
    return coins[0], coins[1], coins[2]


def make_pairs(
    hr: tf.Tensor,
    scale: int,
    margin: int,
    lr: tf.Tensor | None = None,
    flip: bool = True,
    rot90: bool = False,
    seed=None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Turn a batch of uint8 Y patches into augmented float training pairs.

    Args:
        hr: uint8 ``[B, P + 2m, P + 2m, 1]``, Y in 16..235 (or gray 0..255), P the HR patch size,
            m = ``margin``; with ``lr`` given, m must be 0.
        scale: s; P and m must be multiples of s.
        margin: m, real image pixels around the patch that make the LR free of border effects.
        lr: optional uint8 ``[B, P / s, P / s, 1]`` pre-made LR patches aligned with ``hr``.
        flip: random vertical and horizontal flips, independent per sample.
        rot90: also random transposes (with the flips: the 8 rotations and reflections).
        seed: optional op seed for the coin flips.

    Returns:
        ``(lr, hr)``: float32 ``[B, P / s, P / s, 1]`` and ``[B, P, P, 1]`` in [0, 1]; LR on the
        8-bit grid (k / 255).
    """
    masks = random_masks(hr, flip, rot90, seed)
    c = hr.shape[1]
    if lr is None and margin and c is not None and hr.shape[2] == c and hr.shape[3] == 1:
        lr, hr = _pairs_by_matrix(hr, scale, margin, masks)
        if rot90:
            flip_v, flip_h, transpose = masks
            t = transpose[:, tf.newaxis, tf.newaxis]
            lr = tf.where(t, tf.transpose(lr, [0, 2, 1]), lr)
            hr = tf.where(t, tf.transpose(hr, [0, 2, 1]), hr)
        return lr[..., tf.newaxis] / 255.0, hr[..., tf.newaxis] / 255.0
    hr = _random_dihedral(hr, masks, rot90)
    if lr is None:
        lr = quantize(bicubic_downscale(hr, scale, margin=margin))
        if margin:
            hr = hr[:, margin:-margin, margin:-margin, :]
    else:
        if margin:
            raise ValueError("pre-made LR patches come without a margin: use margin=0")
        lr = tf.cast(_random_dihedral(lr, masks, rot90), tf.float32)
    return lr / 255.0, tf.cast(hr, tf.float32) / 255.0
