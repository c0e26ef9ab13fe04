"""The post-decode graph stage shared by both loader modes: uint8 HR Y patches (with a margin)
in, float LR/HR training pairs out, one vectorised call per batch.

This module owns the augmentation only (random flips and transposes, drawn per sample); every LR
is made by the project's LR operator, ``sr.core.degrade.make_lr``. Per batch of B patches:

1. three fair coins per sample (vertical flip, horizontal flip, transpose: with the three, the 8
   rotations and reflections; ``data.flips=h`` keeps the horizontal one only),
   :func:`random_masks`;
2. LR = ``make_lr`` of the flipped HR crop, margin cut away: MATLAB-equivalent bicubic of the
   rounded uint8 Y, rounded to the 8-bit grid like a saved LR image. The operator commutes with
   flips of a square crop whose margin is a multiple of the scale, so ``make_lr`` folds the flips
   into its matrices at no cost. Training thus makes the LR from Y (Y, then LR), while evaluation
   makes it from RGB (LR, then Y); ``sr.core.degrade`` says why and what it costs;
3. the HR patch flipped the same way; both scaled to [0, 1].

Pre-made LR patches (``lr``) get the same flips as their HR.

With ``data.lr_from=rgb`` the patches are RGB (``[B, P + 2m, P + 2m, 3]``) and step 2 follows the
evaluation's order instead (:func:`rgb_pairs`): ``make_lr`` of each of R, G and B (rounded to 8
bits, a saved RGB LR image), then the unrounded Y of that LR, the model input of
``sr.evaluation.prepare``; the HR target is the rounded Y of the RGB crop, as in the Y order.
Gray images (``gray`` true) are their own Y in both orders, so their pairs are the Y order's.
"""

from __future__ import annotations

import tensorflow as tf

from sr.core.batch import Batch, SharpenedBatch
from sr.core.color import gray_of, y_of, y_rounded
from sr.core.degrade import flip_batch, make_lr
from sr.data.schemas import FLIPS


def random_masks(batch: tf.Tensor, flips: str, rot90: bool, seed=None) -> tuple[tf.Tensor, ...]:
    """Three independent fair-coin boolean vectors ``[B]`` (vertical flip, horizontal flip,
    transpose); all False where the augmentation is off.

    Args:
        batch: any ``[B, ...]`` tensor (only B is read).
        flips: which flip coins are live, one of :data:`FLIPS` (``hv``: both; ``h``: the
            horizontal one, reversing the width axis; ``none``).
        rot90: whether the transpose coin is live.
        seed: None for TensorFlow's stateful generator, or an int ``[2]`` seed of a stateless
            draw: the coins are then a function of the seed alone, whatever order a parallel
            ``map`` runs the batches in (so a seeded source gives the same batches every run).
            The three coins are drawn whatever ``flips`` says, so that the horizontal coin of
            ``h`` is the one of ``hv``.

    Raises:
        ValueError: for ``flips`` not in :data:`FLIPS`.
    """
    if flips not in FLIPS:
        raise ValueError(f"data.flips={flips!r}: choose one of {', '.join(FLIPS)}")
    n = tf.shape(batch)[0]
    if seed is None:
        coins = tf.random.uniform([3, n]) < 0.5
    else:
        coins = tf.random.stateless_uniform([3, n], seed=seed) < 0.5
    on = tf.constant([flips == "hv", flips != "none", rot90])
    coins = tf.logical_and(coins, on[:, tf.newaxis])
    return coins[0], coins[1], coins[2]


def rgb_pairs(
    hr: tf.Tensor, gray: tf.Tensor, scale: int, margin: int, flips
) -> tuple[tf.Tensor, tf.Tensor]:
    """LR and HR Y of RGB crops in the evaluation's order (LR of R, G and B, then Y).

    Args:
        hr: uint8 ``[B, c, c, 3]`` RGB crops with a margin m (c = P + 2m); a gray image's crop
            holds its gray value in all three channels.
        gray: bool ``[B]``, true for crops of gray images.
        scale, margin: s and m, as :func:`make_pairs`.
        flips: ``(flip_v, flip_h, transpose or None)`` bool ``[B]`` masks (:func:`random_masks`).

    Returns:
        ``(lr, hr_y)``: float32 ``[B, P / s, P / s, 1]`` on the [0, 255] scale, the unrounded Y
        (MATLAB ``rgb2ycbcr``) of ``make_lr`` of the flipped R, G and B planes (each rounded to
        8 bits), or for gray crops ``make_lr`` of the gray plane; and uint8
        ``[B, c, c, 1]``, the rounded Y of the crop (its gray plane for gray crops), unflipped.
    """
    lr = rgb_lr(hr, scale, margin, flips)  # [B, p, p, 3]
    is_gray = gray[:, tf.newaxis, tf.newaxis, tf.newaxis]
    lr_y = tf.where(is_gray, lr[..., :1], tf.cast(y_of(lr), tf.float32))
    hr_y = tf.where(is_gray, hr[..., :1], y_rounded(hr))
    return lr_y, hr_y


def rgb_lr(hr: tf.Tensor, scale: int, margin: int, flips) -> tf.Tensor:
    """``make_lr`` of each of R, G and B of flipped crops: uint8 ``[B, c, c, 3]`` (c = P + 2m)
    to float32 ``[B, P / s, P / s, 3]`` on the 8-bit grid 0..255 (the flips folded into the
    operator's matrices, as for Y, and the crop's channels taken as stored, interleaved)."""
    return make_lr(hr, scale, margin, flips=tuple(flips))


def made_pairs(
    hr: tf.Tensor,
    gray: tf.Tensor,
    scale: int,
    margin: int,
    flips,
    channels: str,
    degradation,
    seeds,
    plain: bool = False,
) -> Batch | SharpenedBatch:
    """Pairs of ``data.channels=rgb`` or of a degradation's own pairs, from RGB crops.

    The crop is flipped, its LR made by ``degradation`` (``sr.degradations.Bicubic``: the
    bicubic operator of each channel, :func:`rgb_lr`; ``sr.degradations.realesrgan.RealESRGAN``:
    its
    ``pair`` of the whole batch, :func:`degraded_pairs`), then the margin is cut from both
    (``m`` HR pixels, ``m / s`` LR pixels). With ``channels="y"`` the pairs are then the
    unrounded Y of the 8-bit LR (the model input of ``sr.evaluation.prepare``) and the rounded
    Y of the HR, as in :func:`rgb_pairs`; a gray image's crops keep their own value (the LR's
    ``sr.core.color.gray_of``, for an LR whose colour noise made the channels differ).

    Args:
        hr: uint8 ``[B, c, c, 3]`` RGB crops, c = P + 2m, m a multiple of s.
        gray: bool ``[B]``, true for crops of gray images.
        scale, margin: s and m.
        flips: ``(flip_v, flip_h, transpose or None)`` bool ``[B]`` (:func:`random_masks`).
        channels: ``"y"`` or ``"rgb"``.
        degradation: a ``sr.degradations.protocol.Degradation``: with ``protocol_lr`` (bicubic)
            the operator of each channel (:func:`rgb_lr`), else its ``pair(hr float32
            [B, c, c, 3] in [0, 1], scale, seeds int64 [B, 2])`` to ``(lr [B, c / s, c / s, 3],
            target [B, c, c, 3])``.
        seeds: int64 ``[B, 2]``, the degradation's seed of each crop.
        plain: a degradation's pairs also give the HR as it is, after its target (sharpened
            with ``degradation.gt_usm``): :func:`degraded_pairs`.

    Returns:
        ``sr.core.batch.Batch(lq, gt)``: float32 ``[B, P / s, P / s, C]`` and ``[B, P, P, C]``
        in [0, 1], C = 1 (Y) or 3 (RGB); the LQ on the 8-bit grid for RGB. With ``plain``,
        ``SharpenedBatch(lq, gt_usm, gt)`` (:func:`degraded_pairs`).
    """
    flips = tuple(flips)
    if not degradation.protocol_lr:
        hr = flip_batch(hr, flips)
        return degraded_pairs(hr, gray, scale, margin, channels, degradation, seeds, plain)
    lr = rgb_lr(hr, scale, margin, flips) / 255.0  # the margin already cut
    if margin:  # cut, then flip: the same square (the margin is the same on every side)
        hr = hr[:, margin:-margin, margin:-margin, :]
    hr = tf.cast(flip_batch(hr, flips), tf.float32) / 255.0
    lq, gt = _cut_and_convert(lr, hr, gray, scale, 0, channels)
    return Batch(lq=lq, gt=gt)


def degraded_pairs(
    hr: tf.Tensor,
    gray: tf.Tensor,
    scale: int,
    margin: int,
    channels: str,
    degradation,
    seeds,
    plain: bool = False,
) -> Batch | SharpenedBatch:
    """The degradation's pairs of flipped RGB crops: :func:`made_pairs` after the flips. It
    runs in the input pipeline, or, with ``degradation.device=accelerator``, in the training
    step on the model's device (``sr.data.source.PatchSource.device_stage``).

    Args:
        hr: uint8 ``[B, c, c, 3]`` flipped RGB crops; gray, scale, margin, channels,
            degradation, seeds: as :func:`made_pairs`.

    Returns:
        ``sr.core.batch.Batch(lq, gt)`` as :func:`made_pairs`, ``gt`` the degradation's target
        (sharpened with ``degradation.gt_usm``). With ``plain``,
        ``SharpenedBatch(lq, gt_usm, gt)``: the target and the HR as it is.
    """
    out = degradation.pair(tf.cast(hr, tf.float32) / 255.0, scale, seeds, plain=plain)
    lq, target = _cut_and_convert(out[0], out[1], gray, scale, margin, channels)
    if not plain:
        return Batch(lq=lq, gt=target)
    gt = _cut_and_convert(out[0], out[2], gray, scale, margin, channels)[1]
    return SharpenedBatch(lq=lq, gt_usm=target, gt=gt)


def _cut_and_convert(lr, hr, gray, scale: int, margin: int, channels: str):
    """The margin cut from float RGB ``lr`` and ``hr`` in [0, 1] on the 8-bit grid, then for
    ``channels="y"`` the unrounded Y of the LR and the rounded Y of the HR (gray crops: their
    gray)."""
    if margin:
        m = margin // scale
        lr = lr[:, m:-m, m:-m, :]
        hr = hr[:, margin:-margin, margin:-margin, :]
    if channels == "rgb":
        return lr, hr
    is_gray = gray[:, tf.newaxis, tf.newaxis, tf.newaxis]
    lr_gray = tf.cast(gray_of(lr * 255.0), tf.float32) / 255.0
    lr_y = tf.where(is_gray, lr_gray, tf.cast(y_of(lr * 255.0), tf.float32) / 255.0)
    levels = tf.cast(tf.round(hr * 255.0), tf.uint8)
    hr_y = tf.where(is_gray, levels[..., :1], y_rounded(levels))
    return lr_y, tf.cast(hr_y, tf.float32) / 255.0


def _per_plane(mask, k: int):
    """A ``[B]`` mask repeated for the k planes of every sample (``[B k]``), or None."""
    return None if mask is None else tf.repeat(mask, k)


def make_pairs(
    hr: tf.Tensor,
    scale: int,
    margin: int,
    lr: tf.Tensor | None = None,
    flips: str = "hv",
    rot90: bool = False,
    seed=None,
    gray: tf.Tensor | None = None,
) -> Batch:
    """Turn a batch of uint8 Y patches into augmented float training pairs.

    Args:
        hr: uint8 ``[B, P + 2m, P + 2m, 1]``, the rounded Y in 16..235 (or gray 0..255) of the
            decoded image (``sr.core.images.load_y``), P the HR patch size, m = ``margin``; with
            ``lr`` given, m must be 0. Or, for ``data.lr_from=rgb``, uint8 RGB
            ``[B, P + 2m, P + 2m, 3]`` with ``gray``: the pairs of :func:`rgb_pairs`.
        scale: s; P and m must be multiples of s.
        margin: m, real image pixels around the patch that make the LR free of border effects
            (``sr.core.degrade.crop_margin(scale)``).
        lr: optional uint8 ``[B, P / s, P / s, 1]`` pre-made LR patches aligned with ``hr``.
        flips: random flips, independent per sample: ``hv`` vertical and horizontal, ``h``
            horizontal only, ``none`` (:data:`FLIPS`).
        rot90: also random transposes (with ``hv``: the 8 rotations and reflections).
        seed: None, or an int ``[2]`` stateless seed of the coin flips (:func:`random_masks`).
        gray: bool ``[B]`` with RGB ``hr``: crops of gray images.

    Returns:
        ``sr.core.batch.Batch(lq, gt)``: float32 ``[B, P / s, P / s, 1]`` and ``[B, P, P, 1]``
        in [0, 1]; the LQ on the 8-bit grid (k / 255), ``make_lr(hr, scale, margin)`` of the
        flipped crop (RGB ``hr``: the Y of the 8-bit RGB LR, :func:`rgb_pairs`).

    Raises:
        ValueError: for pre-made LR with a margin or with RGB patches, or sizes that are not
            multiples of ``scale``.
    """
    flip_v, flip_h, transpose = random_masks(hr, flips, rot90, seed)
    flips = (flip_v, flip_h, transpose if rot90 else None)
    if hr.shape[-1] == 3:
        if lr is not None or gray is None:
            raise ValueError("RGB patches need gray flags and no pre-made LR")
        lr, hr = rgb_pairs(hr, gray, scale, margin, flips)
    elif lr is None:
        lr = make_lr(hr, scale, margin, flips=flips)
    elif margin:
        raise ValueError("pre-made LR patches come without a margin: use margin=0")
    else:
        lr = tf.cast(flip_batch(lr, flips), tf.float32)
    if margin:
        hr = hr[:, margin:-margin, margin:-margin, :]
    hr = flip_batch(tf.cast(hr, tf.float32), flips)  # float where is cheaper than on uint8
    return Batch(lq=lr / 255.0, gt=hr / 255.0)


def make_window_pairs(
    hr: tf.Tensor,
    scale: int,
    margin: int,
    target: int,
    flips: str = "hv",
    rot90: bool = False,
    seed=None,
) -> Batch:
    """Multi-frame training pairs from a batch of windows (``data=sequence``).

    Every frame of a sample gets the sample's flips (one draw of :func:`random_masks` per
    sample), and its LR is ``make_lr`` of its own flipped HR crop, so frame j of ``lr`` is exactly
    the LR of frame j's HR crop, as in :func:`make_pairs`.

    Args:
        hr: uint8 ``[B, k, P + 2m, P + 2m, 1]``, the k frames' crops at one position.
        scale, margin, flips, rot90, seed: as :func:`make_pairs`.
        target: index (0..k-1) of the frame whose HR is the target.

    Returns:
        ``sr.core.batch.Batch(lq, gt)``: float32 ``[B, k, P / s, P / s, 1]``
        (``[B, P / s, P / s, 1]`` when k = 1) and ``[B, P, P, 1]``, the target frame's HR, in
        [0, 1]; the LQ on the 8-bit grid.
    """
    k, c = hr.shape[1], hr.shape[2]
    flip_v, flip_h, transpose = random_masks(hr, flips, rot90, seed)

    frames = tf.reshape(hr, [-1, c, c, 1])
    flips = tuple(_per_plane(m, k) for m in (flip_v, flip_h, transpose if rot90 else None))
    lr = make_lr(frames, scale, margin, flips=flips)
    p = (c - 2 * margin) // scale
    lr = tf.reshape(lr, [-1, k, p, p, 1]) if k > 1 else lr
    target_hr = hr[:, target]
    if margin:
        target_hr = target_hr[:, margin:-margin, margin:-margin, :]
    target_hr = flip_batch(
        tf.cast(target_hr, tf.float32), (flip_v, flip_h, transpose if rot90 else None)
    )
    return Batch(lq=lr / 255.0, gt=target_hr / 255.0)
