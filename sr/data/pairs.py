"""The post-decode graph stage shared by both loader modes: uint8 HR Y patches (with a margin)
in, float LR/HR training pairs out, one vectorised call per batch.

Order of operations, per batch of B patches:
1. random flips (and optional transposes) per sample, applied to the uint8 HR patch with margin;
   since the bicubic operator commutes with flips and transposes of a square patch whose margin
   is a multiple of the scale, the LR made afterwards is exactly the LR of the flipped HR;
2. LR = MATLAB-equivalent bicubic of the HR patch (``sr.data.degrade``), rounded to the 8-bit
   grid like a saved LR image, margin cut away;
3. both scaled to [0, 1].
"""

from __future__ import annotations

import tensorflow as tf

from sr.data.degrade import bicubic_downscale, quantize


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
