"""The post-decode graph stage shared by both loader modes: uint8 HR Y patches (with a margin)
in, float LR/HR training pairs out, one vectorised call per batch.

This module owns the augmentation only (random flips and transposes, drawn per sample); every LR
is made by the project's LR operator, ``sr.data.degrade.make_lr``. Per batch of B patches:

1. three fair coins per sample (vertical flip, horizontal flip, transpose: with the three, the 8
   rotations and reflections), :func:`random_masks`;
2. LR = ``make_lr`` of the flipped HR crop, margin cut away: MATLAB-equivalent bicubic of the
   rounded uint8 Y, rounded to the 8-bit grid like a saved LR image. The operator commutes with
   flips of a square crop whose margin is a multiple of the scale, so ``make_lr`` folds the flips
   into its matrices at no cost. Training thus makes the LR from Y (Y, then LR), while evaluation
   makes it from RGB (LR, then Y); ``sr.data.degrade`` says why and what it costs;
3. the HR patch flipped the same way; both scaled to [0, 1].

Pre-made LR patches (``lr``) get the same flips as their HR.
"""

from __future__ import annotations

import tensorflow as tf

from sr.data.degrade import flip_batch, make_lr


def random_masks(batch: tf.Tensor, flip: bool, rot90: bool, seed=None) -> tuple[tf.Tensor, ...]:
    """Three independent fair-coin boolean vectors ``[B]`` (vertical flip, horizontal flip,
    transpose); all False where the augmentation is off.

    Args:
        batch: any ``[B, ...]`` tensor (only B is read).
        flip, rot90: which coins are live.
        seed: None for TensorFlow's stateful generator, or an int ``[2]`` seed of a stateless
            draw: the coins are then a function of the seed alone, whatever order a parallel
            ``map`` runs the batches in (so a seeded source gives the same batches every run).
    """
    n = tf.shape(batch)[0]
    if seed is None:
        coins = tf.random.uniform([3, n]) < 0.5
    else:
        coins = tf.random.stateless_uniform([3, n], seed=seed) < 0.5
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
        hr: uint8 ``[B, P + 2m, P + 2m, 1]``, the rounded Y in 16..235 (or gray 0..255) of the
            decoded image (``sr.data.images.load_y``), P the HR patch size, m = ``margin``; with
            ``lr`` given, m must be 0.
        scale: s; P and m must be multiples of s.
        margin: m, real image pixels around the patch that make the LR free of border effects
            (``sr.data.degrade.crop_margin(scale)``).
        lr: optional uint8 ``[B, P / s, P / s, 1]`` pre-made LR patches aligned with ``hr``.
        flip: random vertical and horizontal flips, independent per sample.
        rot90: also random transposes (with the flips: the 8 rotations and reflections).
        seed: None, or an int ``[2]`` stateless seed of the coin flips (:func:`random_masks`).

    Returns:
        ``(lr, hr)``: float32 ``[B, P / s, P / s, 1]`` and ``[B, P, P, 1]`` in [0, 1]; LR on the
        8-bit grid (k / 255), ``make_lr(hr, scale, margin)`` of the flipped crop.

    Raises:
        ValueError: for pre-made LR with a margin, or sizes that are not multiples of ``scale``.
    """
    flip_v, flip_h, transpose = random_masks(hr, flip, rot90, seed)
    flips = (flip_v, flip_h, transpose if rot90 else None)
    if lr is None:
        lr = make_lr(hr, scale, margin, flips=flips)
    elif margin:
        raise ValueError("pre-made LR patches come without a margin: use margin=0")
    else:
        lr = tf.cast(flip_batch(lr, flips), tf.float32)
    if margin:
        hr = hr[:, margin:-margin, margin:-margin, :]
    hr = flip_batch(tf.cast(hr, tf.float32), flips)  # float where is cheaper than on uint8
    return lr / 255.0, hr / 255.0


def make_window_pairs(
    hr: tf.Tensor,
    scale: int,
    margin: int,
    target: int,
    flip: bool = True,
    rot90: bool = False,
    seed=None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Multi-frame training pairs from a batch of windows (``data=sequence``).

    Every frame of a sample gets the sample's flips (one draw of :func:`random_masks` per
    sample), and its LR is ``make_lr`` of its own flipped HR crop, so frame j of ``lr`` is exactly
    the LR of frame j's HR crop, as in :func:`make_pairs`.

    Args:
        hr: uint8 ``[B, k, P + 2m, P + 2m, 1]``, the k frames' crops at one position.
        scale, margin, flip, rot90, seed: as :func:`make_pairs`.
        target: index (0..k-1) of the frame whose HR is the target.

    Returns:
        ``(lr, hr)``: float32 ``[B, k, P / s, P / s, 1]`` (``[B, P / s, P / s, 1]`` when k = 1)
        and ``[B, P, P, 1]``, the target frame's HR, in [0, 1]; LR on the 8-bit grid.
    """
    k, c = hr.shape[1], hr.shape[2]
    flip_v, flip_h, transpose = random_masks(hr, flip, rot90, seed)

    def per_frame(mask):
        return None if mask is None else tf.repeat(mask, k)

    frames = tf.reshape(hr, [-1, c, c, 1])
    flips = tuple(per_frame(m) for m in (flip_v, flip_h, transpose if rot90 else None))
    lr = make_lr(frames, scale, margin, flips=flips)
    p = (c - 2 * margin) // scale
    lr = tf.reshape(lr, [-1, k, p, p, 1]) if k > 1 else lr
    target_hr = hr[:, target]
    if margin:
        target_hr = target_hr[:, margin:-margin, margin:-margin, :]
    target_hr = flip_batch(
        tf.cast(target_hr, tf.float32), (flip_v, flip_h, transpose if rot90 else None)
    )
    return lr / 255.0, target_hr / 255.0
