"""The evaluation protocol of the SR literature, shared by training-time validation and
``scripts/evaluate.py``.

For each HR image (uint8, RGB or gray):
1. HR cropped to a multiple of the scale (top-left kept, as MATLAB ``modcrop``);
2. LR = ``sr.core.degrade.make_lr`` of the HR RGB: MATLAB-equivalent bicubic downscale, rounded to
   8 bits like a saved LR image;
3. the model super-resolves Y of that LR (float, 16..235, divided by 255); its output is rounded
   to 8 bits like a saved SR image;
4. the bicubic baseline upscales the LR RGB with the same operator, rounded to 8 bits, then Y;
5. PSNR (peak 255) and SSIM on Y against Y of the HR, ``scale`` pixels cropped from each border.

Y is ``sr.core.color.y_channel`` of the float images (unrounded). The LR is thus made from RGB,
then converted to Y (MATLAB: ``imresize``, ``uint8``, ``rgb2ycbcr``), as in the literature;
training makes its LR from the rounded Y instead (``sr.core.degrade`` explains why and gives the
PSNR difference this makes, measured by ``benchmarks/lr_order.py``).

With this protocol bicubic x4 gives the published 28.42 dB / 0.8104 on Set5 and 26.00 / 0.7027 on
Set14 (``../shared/datasets/README.md``).

Sequences (:func:`evaluate_sequences`, ``data=sequence`` and ``scripts/evaluate.py`` on folders of
sequences). Every frame of every sequence is scored, each prepared by steps 1, 2 and 4 above (once
per sequence, whatever the number of windows it belongs to). The model's input for target frame
t of a sequence of n frames is the LR Y of the window ``sr.core.frames.window_frames(t, n, k,
s, target)``: frames ``t + (j - target) s``, j = 0..k-1, each clamped to ``[0, n - 1]``, so that
near the ends of a sequence the first (or last) frame stands in for the missing neighbours (it
is repeated) and the first and last frames are scored like the others. The SR of frame t is
scored against frame t's HR, and the bicubic baseline is frame t's own. Means: per sequence, the
mean over its frames; the folder's figures are the mean over sequences of those means (each
sequence counts once whatever its length), the convention of video SR tables such as Vid4 in
EDVR and BasicVSR. Only the frames the coming windows need are held, about ``(k - 1) s + 1``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from sr.core.color import y_channel
from sr.core.degrade import bicubic_upscale, make_lr, min_hr_size, quantize
from sr.core.frames import check_same_size, sequence_size, window_frames
from sr.core.images import list_images, load_image
from sr.core.metrics import psnr, ssim

METRICS = ("psnr", "ssim", "psnr_bicubic", "ssim_bicubic")
"""The figures of a scored image and their means over a folder: PSNR (dB) and SSIM of the model
and of bicubic, on Y with ``scale`` border pixels cropped."""


def modcrop(image: np.ndarray, scale: int) -> np.ndarray:
    """Crop ``[H, W, ...]`` to the largest multiple of ``scale`` (top-left kept)."""
    h, w = image.shape[0] // scale * scale, image.shape[1] // scale * scale
    return image[:h, :w]


@dataclass
class EvalImage:
    """One image prepared for scoring. All arrays are float64 on the [0, 255] scale."""

    name: str
    hr_y: np.ndarray  # [H, W], Y of the cropped HR (not rounded)
    lr: np.ndarray  # [H/s, W/s, C], the 8-bit LR image (C = 1 or 3)
    lr_y: np.ndarray  # [H/s, W/s], Y of the LR (model input times 255)
    bicubic_y: np.ndarray  # [H, W], Y of the 8-bit bicubic upscale of the LR


def prepare(image: np.ndarray, scale: int, name: str = "") -> EvalImage:
    """HR crop, LR, bicubic baseline of one image (protocol steps 1, 2, 4).

    The LR is made from the RGB HR and then converted to Y (the literature's order; training's
    is the reverse, see ``sr.core.degrade``).

    Args:
        image: uint8 ``[H, W, 1|3]`` (gray or RGB), values 0..255.
        scale: s.
        name: the image's name, for error messages.

    Returns:
        The :class:`EvalImage` (float64 arrays on the [0, 255] scale).

    Raises:
        ValueError: if the cropped image is smaller than ``sr.core.degrade.min_hr_size(scale)``
            (``3 scale``) on a side.
    """
    hr = modcrop(np.asarray(image), scale).astype(np.float64)
    if min(hr.shape[:2]) < min_hr_size(scale):
        raise ValueError(
            f"image {name} {image.shape[:2]} is too small for scale {scale}: it needs at least "
            f"{min_hr_size(scale)} pixels on each side"
        )
    lr = make_lr(hr, scale).numpy().astype(np.float64)
    bicubic = quantize(bicubic_upscale(lr, scale)).numpy().astype(np.float64)
    return EvalImage(name, y_channel(hr), lr, y_channel(lr), y_channel(bicubic))


def super_resolve_y(model, lr_y: np.ndarray) -> np.ndarray:
    """Run a Y-channel model on one LR Y image.

    Args:
        model: Keras model ``[1, h, w, 1]`` in [0, 1] to ``[1, s h, s w, 1]``.
        lr_y: ``[h, w]`` Y on the [0, 255] scale.

    Returns:
        float64 ``[s h, s w]`` on the 8-bit grid 0..255 (rounded and clipped).
    """
    x = tf.convert_to_tensor(lr_y[np.newaxis, :, :, np.newaxis] / 255.0, tf.float32)
    out = model(x, training=False)
    return quantize(out[0, :, :, 0], peak=1.0).numpy().astype(np.float64) * 255.0


def score(sr_y: np.ndarray, hr_y: np.ndarray, scale: int) -> tuple[float, float]:
    """``(PSNR in dB, SSIM)`` on Y with ``scale`` pixels cropped from each border."""
    return psnr(sr_y, hr_y, border=scale), ssim(sr_y, hr_y, border=scale)


def evaluate_images(model, files, scale: int, keep: int = 0) -> dict:
    """Score ``model`` (or only bicubic, with ``model=None``) on image files.

    Args:
        model: Y-channel Keras model, or None.
        files: image paths.
        scale: s.
        keep: keep the arrays of the first ``keep`` images (for TensorBoard panels).

    Returns:
        ``{"n": count, "psnr": mean dB, "ssim": mean, "psnr_bicubic": ..., "ssim_bicubic": ...,
        "per_image": {name: {"psnr", "ssim", "psnr_bicubic", "ssim_bicubic"}},
        "panels": [(name, bicubic_y, sr_y, hr_y), ...]}``; model keys are absent when
        ``model`` is None.
    """
    per_image, panels = {}, []
    for path in files:
        name = Path(path).name
        item = prepare(load_image(path), scale, name)
        row = dict(zip(("psnr_bicubic", "ssim_bicubic"), score(item.bicubic_y, item.hr_y, scale)))
        if model is not None:
            sr_y = super_resolve_y(model, item.lr_y)
            row.update(zip(("psnr", "ssim"), score(sr_y, item.hr_y, scale)))
            if len(panels) < keep:
                panels.append((name, item.bicubic_y, sr_y, item.hr_y))
        per_image[name] = row
    means = _means(per_image.values())
    return {"n": len(per_image), "per_image": per_image, "panels": panels, **means}


def evaluate_folder(model, folder: str | os.PathLike, scale: int, keep: int = 0) -> dict:
    """:func:`evaluate_images` over every PNG/JPEG of ``folder`` (name order).

    Raises:
        ImageFolderError: if the folder is missing or empty.
    """
    return evaluate_images(model, list_images(folder), scale, keep)


def super_resolve_window(model, lr_ys) -> np.ndarray:
    """Run a multi-frame Y-channel model on one window of LR Y frames.

    Args:
        model: Keras model ``[1, k, h, w, 1]`` float32 in [0, 1] to ``[1, s h, s w, 1]`` (for
            k = 1, ``[1, h, w, 1]``: :func:`super_resolve_y`).
        lr_ys: k arrays ``[h, w]``, Y on the [0, 255] scale, in window order.

    Returns:
        float64 ``[s h, s w]`` on the 8-bit grid 0..255 (rounded and clipped).
    """
    if len(lr_ys) == 1:
        return super_resolve_y(model, lr_ys[0])
    x = np.stack(lr_ys)[np.newaxis, :, :, :, np.newaxis] / 255.0
    out = model(tf.convert_to_tensor(x, tf.float32), training=False)
    return quantize(out[0, :, :, 0], peak=1.0).numpy().astype(np.float64) * 255.0


@dataclass
class _Frame:
    """A prepared frame of a sequence while windows need it (arrays as :class:`EvalImage`'s);
    ``hr_y`` and ``bicubic_y`` are dropped once the frame is scored."""

    lr_y: np.ndarray
    hr_y: np.ndarray | None
    bicubic_y: np.ndarray | None
    bicubic: tuple[float, float]


def _means(rows) -> dict:
    result = {}
    for key in METRICS:
        values = [r[key] for r in rows if key in r]
        if values:
            result[key] = float(np.mean(values))
    return result


def _score_sequence(model, seq, parent: Path, scale: int, window, keep, panels, progress):
    """``{"<sequence>/<frame file>": row}`` of every frame of ``seq`` (rows as
    :func:`evaluate_sequences`'s ``per_image``), frame t's model input the frames
    ``window_frames(t, n, *window)`` (``window``: ``(frames, stride, target)``; frame t alone
    without a model); appends to ``panels`` up to ``keep`` of them. Holds only the frames the
    coming windows read (windows only move forward).

    Raises:
        ImageFolderError: for an undecodable frame, or one decoded to another size than the
            sequence's first frame (``sr.core.frames.check_same_size``).
    """
    n, cache, rows, shape = len(seq.files), {}, {}, None

    def window_of(t: int) -> list[int]:
        return [t] if model is None else window_frames(t, n, *window)

    for t in range(n):
        reads = window_of(t)
        for i in (i for i in reads if i not in cache):
            path = Path(seq.files[i])
            image = load_image(path)
            shape = image.shape[:2] if shape is None else shape
            first = Path(seq.files[0]).name
            check_same_size(f"sequence {parent / seq.name}", first, shape, path.name, image.shape)
            item = prepare(image, scale, f"{seq.name}/{path.name}")
            bicubic = score(item.bicubic_y, item.hr_y, scale)
            cache[i] = _Frame(item.lr_y, item.hr_y, item.bicubic_y, bicubic)
        frame, name = cache[t], f"{seq.name}/{Path(seq.files[t]).name}"
        row = dict(zip(("psnr_bicubic", "ssim_bicubic"), frame.bicubic))
        if model is not None:
            sr_y = super_resolve_window(model, [cache[i].lr_y for i in reads])
            row.update(zip(("psnr", "ssim"), score(sr_y, frame.hr_y, scale)))
            if len(panels) < keep:
                panels.append((name, frame.bicubic_y, sr_y, frame.hr_y))
        frame.hr_y = frame.bicubic_y = None  # scored: only its LR may still be needed
        rows[name] = row
        if t + 1 < n:  # drop the frames no later window reads
            first_needed = min(window_of(t + 1))
            for i in [i for i in cache if i < first_needed]:
                del cache[i]
        if progress is not None:
            progress()
    return rows


def evaluate_sequences(
    model,
    sequences,
    scale: int,
    frames: int,
    stride: int,
    target: int,
    keep: int = 0,
    folder=None,
    progress=None,
) -> dict:
    """Score ``model`` (or only bicubic, with ``model=None``) on every frame of sequences.

    Each frame is prepared as in :func:`evaluate_images` (:func:`prepare`); the model reads the
    LR Y of the window of frame t (``sr.core.frames.window_frames``, border frames repeated at
    the ends, see the module docstring) and its output is scored against frame t's HR Y.

    Args:
        model: Y-channel Keras model from float32 ``[1, k, h, w, 1]`` in [0, 1] (``[1, h, w, 1]``
            when ``frames`` is 1) to ``[1, s h, s w, 1]``, or None.
        sequences: :class:`sr.core.frames.SequenceFolder` list (``sr.core.frames.
            list_sequences``).
        scale: s.
        frames: k >= 1, frames of a window.
        stride: frame stride of a window (>= 1).
        target: index 0..k-1 of the scored frame in its window
            (``sr.core.frames.target_index``).
        keep: keep the arrays of the first ``keep`` frames (with a model, for TensorBoard panels).
        folder: the folder holding the sequences, for error messages (None: the parent of each
            sequence's frames).
        progress: called with no argument after each frame is scored (a progress bar's update),
            or None.

    Returns:
        ``{"n": frames scored, "psnr", "ssim", "psnr_bicubic", "ssim_bicubic": means over
        sequences of the per-sequence means (dB for PSNR), "per_image": {"<sequence>/<frame
        file>": {"psnr", "ssim", "psnr_bicubic", "ssim_bicubic"}}, "per_sequence": {name: {"n",
        "psnr", "ssim", "psnr_bicubic", "ssim_bicubic"}}, "panels": [(name, bicubic_y, sr_y,
        hr_y), ...]}`` (panel arrays float64 on [0, 255]); model keys are absent when ``model``
        is None.

    Raises:
        ImageFolderError: for an undecodable frame, or frames of different sizes in a sequence
            (names the files).
        ValueError: for a frame too small for the scale, or ``target`` outside the window.
    """
    if not 0 <= target < frames:
        raise ValueError(f"target frame index {target} is not in a window of {frames} frames")
    per_image, per_sequence, panels = {}, {}, []
    for seq in sequences:
        parent = Path(folder) if folder is not None else Path(seq.files[0]).parent.parent
        sequence_size(seq, parent)  # every header: one size, or the odd frames named
        window = (frames, stride, target)
        rows = _score_sequence(model, seq, parent, scale, window, keep, panels, progress)
        per_image.update(rows)
        per_sequence[seq.name] = {"n": len(rows), **_means(rows.values())}
    result = {
        "n": len(per_image),
        "per_image": per_image,
        "per_sequence": per_sequence,
        "panels": panels,
    }
    result.update(_means(per_sequence.values()))
    return result
