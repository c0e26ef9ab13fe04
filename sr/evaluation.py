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

RGB models (:func:`input_channels` 3: float32 ``[B, h, w, 3]`` in [0, 1] to ``[B, s h, s w, 3]``).
Step 3 becomes: the model super-resolves the 8-bit RGB LR divided by 255 and its output is rounded
to 8 bits (the SR image ``scripts/upscale.py`` writes); Y of that SR image is scored by step 5
exactly as for a Y model. A gray HR image stays gray, its own Y as above: the model reads its LR
replicated to R, G and B, and the SR image is the gray :func:`gray_of` the output (the gray
whose replication has the output's Y, as ``sr.inference`` writes a gray image), rounded. RGB
models and, on request, bicubic alone (``rgb=True``) also report :data:`RGB_METRICS`: PSNR over
R, G and B of the 8-bit SR (and of the 8-bit bicubic upscale) against the cropped HR, ``scale``
border pixels cropped (:func:`psnr_rgb`; a gray image's is its gray PSNR). Y models report them
never: their figures are exactly those of Y-only evaluation.

Paired evaluation (``lr_files`` of :func:`evaluate_images`, matched by :func:`match_lr_files`):
step 2 is replaced by given 8-bit LR images, each exactly ``(H / s) x (W / s)`` for the HR cropped
by step 1 (a real-world or degraded test set); the model and bicubic both upscale the given LR.
An LR whose channels differ from the HR's is brought to them: a gray LR is replicated for an RGB
HR, an RGB LR of a gray HR becomes its :func:`gray_of`, rounded. With LR made by
``sr.core.degrade.make_lr`` the figures are those of step 2.

NIQE (:data:`NIQE_METRICS`, on request: ``niqe=True``). NIQE (``sr.metrics.niqe``, no
reference) of the SR image and of the bicubic upscale, with ``scale`` pixels cropped from each
border as PSNR and SSIM are: on the rounded Y of the 8-bit bicubic image, and on the model's
8-bit output, the same Y that PSNR scores (a Y model's rounded Y; Y of an RGB model's 8-bit
image). Only whole 96 x 96 blocks of what remains are scored (:func:`niqe_cropped`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from sr.core.color import gray_of, y_channel
from sr.core.degrade import bicubic_upscale, make_lr, min_hr_size, quantize
from sr.core.forward import forward
from sr.core.frames import check_same_size, sequence_size, window_frames
from sr.core.images import IMAGE_SUFFIXES, ImageFolderError, image_size, list_images, load_image
from sr.metrics import psnr, psnr_rgb, ssim
from sr.metrics import registry as metric_registry
from sr.metrics.niqe import niqe_cropped

__all__ = ["niqe_cropped", "psnr_rgb"]  # re-exported: they live in sr.metrics

METRICS = ("psnr", "ssim", "psnr_bicubic", "ssim_bicubic")
"""The figures of a scored image and their means over a folder: PSNR (dB) and SSIM of the model
and of bicubic, on Y with ``scale`` border pixels cropped."""

RGB_METRICS = ("psnr_rgb", "psnr_rgb_bicubic")
"""RGB PSNR (dB) of the model and of bicubic (:func:`psnr_rgb`), reported beside :data:`METRICS`
only where defined: for RGB models, and for bicubic alone when asked (``rgb=True``)."""


NIQE_METRICS = ("niqe", "niqe_bicubic")
"""NIQE of the model and of bicubic (:func:`niqe_cropped`; lower is better), reported beside
:data:`METRICS` when asked (``niqe=True``)."""


def input_channels(model) -> int:
    """The channels a model reads: 1 for a Y model (``[B, h, w, 1]``, or ``[B, k, h, w, 1]`` for
    a multi-frame model), 3 for an RGB model (``[B, h, w, 3]``), from ``model.inputs[0]``.

    Args:
        model: a Keras model; a callable without Keras inputs counts as a Y model unless it has
            an int attribute ``channels`` of 1 or 3 (``sr.deploy.Exported``).

    Returns:
        1 or 3.

    Raises:
        ValueError: for a model reading another number of channels (names it).
    """
    inputs = getattr(model, "inputs", None)
    if not inputs:  # an exported model (sr.deploy.Exported) declares its channels
        declared = getattr(model, "channels", None)
        return declared if declared in (1, 3) else 1
    channels = inputs[0].shape[-1]
    if channels in (1, None):
        return 1
    if channels != 3:
        raise ValueError(
            f"model {getattr(model, 'name', model)} reads {channels} channels: a super-resolution "
            "model reads 1 (Y) or 3 (RGB)"
        )
    return 3


def modcrop(image: np.ndarray, scale: int) -> np.ndarray:
    """Crop ``[H, W, ...]`` to the largest multiple of ``scale`` (top-left kept)."""
    h, w = image.shape[0] // scale * scale, image.shape[1] // scale * scale
    return image[:h, :w]


@dataclass
class EvalImage:
    """One image prepared for scoring. All arrays are float64 on the [0, 255] scale; C is the
    HR's channels, 1 (gray) or 3 (RGB)."""

    name: str
    hr_y: np.ndarray  # [H, W], Y of the cropped HR (not rounded)
    lr: np.ndarray  # [H/s, W/s, C], the 8-bit LR image
    lr_y: np.ndarray  # [H/s, W/s], Y of the LR (model input times 255)
    bicubic_y: np.ndarray  # [H, W], Y of the 8-bit bicubic upscale of the LR
    hr: np.ndarray | None = None  # [H, W, C], the cropped HR
    bicubic: np.ndarray | None = None  # [H, W, C], the 8-bit bicubic upscale of the LR


def prepare(image: np.ndarray, scale: int, name: str = "", lr=None) -> EvalImage:
    """HR crop, LR, bicubic baseline of one image (protocol steps 1, 2, 4).

    The LR is made from the RGB HR and then converted to Y (the literature's order; training's
    is the reverse, see ``sr.core.degrade``), unless it is given (paired evaluation).

    Args:
        image: uint8 ``[H, W, 1|3]`` (gray or RGB), values 0..255.
        scale: s.
        name: the image's name, for error messages.
        lr: None to make the LR by ``sr.core.degrade.make_lr``; or the given 8-bit LR, uint8
            ``[H // s, W // s, 1|3]``, brought to the HR's channels (module docstring).

    Returns:
        The :class:`EvalImage` (float64 arrays on the [0, 255] scale).

    Raises:
        ValueError: if the cropped image is smaller than ``sr.core.degrade.min_hr_size(scale)``
            (``3 scale``) on a side, or a given LR is not ``(H // s) x (W // s)`` (names both
            sizes).
    """
    hr = modcrop(np.asarray(image), scale).astype(np.float64)
    if min(hr.shape[:2]) < min_hr_size(scale):
        raise ValueError(
            f"image {name} {image.shape[:2]} is too small for scale {scale}: it needs at least "
            f"{min_hr_size(scale)} pixels on each side"
        )
    if lr is None:
        lr = make_lr(hr, scale).numpy().astype(np.float64)
    else:
        lr = _given_lr(np.asarray(lr), hr.shape, scale, name)
    bicubic = quantize(bicubic_upscale(lr, scale)).numpy().astype(np.float64)
    return EvalImage(name, y_channel(hr), lr, y_channel(lr), y_channel(bicubic), hr, bicubic)


def _given_lr(lr: np.ndarray, hr_shape, scale: int, name: str) -> np.ndarray:
    """float64 ``[H / s, W / s, C]`` of a given uint8 LR for a cropped HR of ``hr_shape``
    ``(H, W, C)``: its channels brought to C (gray replicated, or :func:`gray_of` rounded)."""
    h, w, channels = hr_shape
    if lr.shape[:2] != (h // scale, w // scale):
        raise ValueError(
            f"the LR of {name} is {lr.shape[1]}x{lr.shape[0]}, expected {w // scale}x"
            f"{h // scale} (the HR cropped to {w}x{h}, divided by {scale}): give the LR of this "
            "image at this scale"
        )
    lr = lr.astype(np.float64)
    if lr.shape[-1] == channels:
        return lr
    if channels == 3:
        return np.repeat(lr[..., :1], 3, axis=-1)
    return quantize(gray_of(lr[..., :3])).numpy().astype(np.float64)


def finite(out: tf.Tensor) -> tf.Tensor:
    """``out``, a model's output, if it holds no NaN or inf: rounding would score them as 0 or
    255 (``sr.inference.NonFiniteOutputError``, the same refusal for upscale.py).

    Raises:
        ValueError: naming the count (evaluate.py: exit 2, no results written).
    """
    bad = int(tf.math.count_nonzero(~tf.math.is_finite(tf.cast(out, tf.float32))))
    if bad:
        raise ValueError(
            f"the model's output holds {bad} NaN or infinite value(s) of {int(tf.size(out))}; "
            "no score (its weights overflow on this image)"
        )
    return out


def super_resolve_y(model, lr_y: np.ndarray) -> np.ndarray:
    """Run a Y-channel model on one LR Y image.

    Args:
        model: Keras model ``[1, h, w, 1]`` in [0, 1] to ``[1, s h, s w, 1]``.
        lr_y: ``[h, w]`` Y on the [0, 255] scale.

    Returns:
        float64 ``[s h, s w]`` on the 8-bit grid 0..255 (rounded and clipped).
    """
    x = tf.convert_to_tensor(lr_y[np.newaxis, :, :, np.newaxis] / 255.0, tf.float32)
    out = finite(forward(model)(x))
    return quantize(out[0, :, :, 0], peak=1.0).numpy().astype(np.float64) * 255.0


def super_resolve_rgb(model, lr: np.ndarray) -> np.ndarray:
    """Run an RGB model on one 8-bit LR image, as ``sr.inference.Upscaler`` does.

    Args:
        model: Keras model ``[1, h, w, 3]`` in [0, 1] to ``[1, s h, s w, 3]``.
        lr: ``[h, w, 3]`` RGB, or ``[h, w, 1]`` gray (replicated for the model), on the 8-bit
            grid 0..255.

    Returns:
        float64 on the 8-bit grid 0..255 (rounded and clipped): ``[s h, s w, 3]`` for RGB, the
        ``[s h, s w, 1]`` :func:`gray_of` the output for gray.
    """
    rgb = lr if lr.shape[-1] == 3 else np.repeat(lr[..., :1], 3, axis=-1)
    x = tf.convert_to_tensor(rgb[np.newaxis] / 255.0, tf.float32)
    out = tf.cast(finite(forward(model)(x))[0], tf.float32) * 255.0
    if lr.shape[-1] != 3:
        out = gray_of(out)
    return quantize(out).numpy().astype(np.float64)


def score(sr_y: np.ndarray, hr_y: np.ndarray, scale: int) -> tuple[float, float]:
    """``(PSNR in dB, SSIM)`` on Y with ``scale`` pixels cropped from each border."""
    return psnr(sr_y, hr_y, border=scale), ssim(sr_y, hr_y, border=scale)


def score_image(
    model, item: EvalImage, scale: int, rgb: bool, with_niqe: bool = False, metrics=()
) -> tuple[dict, np.ndarray | None]:
    """The figures of one prepared image: ``(row, SR Y)``, each metric computed through
    ``sr.metrics.registry`` on what it reads (its ``reads``: Y, the RGB image or the 8-bit
    output) and keyed by its name (the model's) and ``<name>_bicubic`` (bicubic's).

    Args:
        model: Y or RGB Keras model (:func:`input_channels`), or None for bicubic alone.
        item: :func:`prepare`'s image.
        scale: s (the border every metric crops).
        rgb: add :data:`RGB_METRICS` (``psnr_rgb`` for an RGB model, ``psnr_rgb_bicubic``).
        with_niqe: add :data:`NIQE_METRICS` (``niqe`` for a model, ``niqe_bicubic``).
        metrics: names of further registered metrics, after those.

    Returns:
        ``({"psnr_bicubic", "ssim_bicubic"[, "psnr", "ssim"][, "psnr_rgb"][,
        "psnr_rgb_bicubic"][, "niqe"][, "niqe_bicubic"][, <name>, <name>_bicubic...]},
        float64 [H, W] SR Y or None)``; a metric reading RGB has no model figure for a Y model.
    """
    sr = sr_y = None
    if model is not None:
        try:
            if input_channels(model) == 3:
                sr = super_resolve_rgb(model, item.lr)
                sr_y = y_channel(sr)
            else:
                sr_y = super_resolve_y(model, item.lr_y)
        except ValueError as e:  # finite(): the image named
            raise ValueError(f"{item.name}: {e}") from None
    hr = {"y": item.hr_y, "rgb": item.hr, "output": None}
    bicubic = {"y": item.bicubic_y, "rgb": item.bicubic, "output": item.bicubic}
    output = {"y": sr_y, "rgb": sr, "output": sr_y if sr is None else sr}
    extra = [*(("psnr_rgb",) if rgb else ()), *(("niqe",) if with_niqe else ()), *metrics]
    pairs = [(n, x) for x in ("_bicubic", "") for n in ("psnr", "ssim")]  # the old order
    pairs += [(n, x) for n in extra for x in ("", "_bicubic")]
    row = {}
    for name, suffix in pairs:
        spec = metric_registry.get(name)
        view = (bicubic if suffix else output)[spec.reads]
        if view is not None:
            try:
                row[name + suffix] = spec(view, hr[spec.reads], scale)
            except ValueError as e:
                raise ValueError(f"{name.upper()} of {item.name}: {e}") from e
    return row, sr_y


def evaluate_images(
    model,
    files,
    scale: int,
    keep: int = 0,
    lr_files=None,
    rgb: bool | None = None,
    with_niqe: bool = False,
    metrics=(),
) -> dict:
    """Score ``model`` (or only bicubic, with ``model=None``) on image files.

    Args:
        model: Y-channel or RGB Keras model (:func:`input_channels`), or None.
        files: HR image paths.
        scale: s.
        keep: keep the arrays of the first ``keep`` images (for TensorBoard panels).
        lr_files: None to make each LR (protocol step 2); or the LR image of each HR file, in
            the same order (paired evaluation, :func:`match_lr_files`): a path, or the uint8
            image itself.
        rgb: report :data:`RGB_METRICS`; None: for an RGB model only.
        with_niqe: report :data:`NIQE_METRICS` (:func:`niqe_cropped`).
        metrics: names of further metrics of ``sr.metrics.registry`` (:func:`score_image`).

    Returns:
        ``{"n": count, "psnr": mean dB, "ssim": mean, "psnr_bicubic": ..., "ssim_bicubic": ...,
        ["psnr_rgb": ..., "psnr_rgb_bicubic": ...,] ["niqe": ..., "niqe_bicubic": ...,]
        "per_image": {name: {"psnr", "ssim", "psnr_bicubic", "ssim_bicubic"[, "psnr_rgb",
        "psnr_rgb_bicubic"][, "niqe", "niqe_bicubic"]}}, "panels": [(name, bicubic_y, sr_y,
        hr_y), ...]}``; model keys are absent when ``model`` is None.

    Raises:
        ImageFolderError: for an image that cannot be decoded.
        ValueError: for an image too small for the scale (or, with NIQE, under 96 x 96 after
            the border crop), a given LR of the wrong size, or a model reading neither 1 nor 3
            channels.
    """
    if rgb is None:
        rgb = model is not None and input_channels(model) == 3
    for name in metrics:
        metric_registry.get(name)  # an unknown name refused before any work
    per_image, panels = {}, []
    pairs = ((f, None) for f in files) if lr_files is None else zip(files, lr_files)
    for path, lr_path in pairs:
        name = Path(path).name
        lr = lr_path if lr_path is None or isinstance(lr_path, np.ndarray) else load_image(lr_path)
        item = prepare(load_image(path), scale, name, lr=lr)
        row, sr_y = score_image(model, item, scale, rgb, with_niqe, metrics)
        if sr_y is not None and len(panels) < keep:
            panels.append((name, item.bicubic_y, sr_y, item.hr_y))
        per_image[name] = row
    means = _means(per_image.values())
    return {"n": len(per_image), "per_image": per_image, "panels": panels, **means}


def match_lr_files(hr_files, lr_dir: str | os.PathLike, scale: int) -> list[Path]:
    """The LR image of each HR image in ``lr_dir``, checked before anything is scored.

    An HR image ``<stem>.<ext>`` matches the LR file of the same stem, ``<stem>.png``,
    ``.jpg`` or ``.jpeg`` (suffix in any case), or the DIV2K layout ``<stem>x<scale>.<ext>``
    (``0801.png`` -> ``0801x4.png``); exactly one must exist. Its size (from the headers, with
    the EXIF orientation, as decoded) must be ``(H // s) x (W // s)``: the HR cropped to a
    multiple of the scale, divided by it.

    Args:
        hr_files: HR image paths.
        lr_dir: folder of the LR images.
        scale: s.

    Returns:
        The LR paths, in the order of ``hr_files``.

    Raises:
        ImageFolderError: for a missing LR folder, or naming every HR image whose LR is
            missing (with the names looked for), ambiguous (the candidates) or of the wrong
            size (found and expected), and the fix.
    """
    lr_dir = Path(lr_dir).expanduser()
    if not lr_dir.is_dir():
        what = "is a file, not a folder" if lr_dir.exists() else "does not exist"
        raise ImageFolderError(f"LR folder {lr_dir} {what}: give the folder of the LR images")
    by_key = {
        (p.stem, p.suffix.lower()): p
        for p in sorted(lr_dir.iterdir())
        if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
    }
    hr_files, found, problems = [Path(f) for f in hr_files], [], []
    for hr_path in hr_files:
        stems = (hr_path.stem, f"{hr_path.stem}x{scale}")
        tried = [(stem, suffix) for stem in stems for suffix in IMAGE_SUFFIXES]
        hits = [by_key[key] for key in tried if key in by_key]
        if len(hits) != 1:
            looked = ", ".join(stem + suffix for stem, suffix in tried)
            names = ", ".join(p.name for p in hits)
            problems.append(
                f"{hr_path.name}: several LR images match ({names}): keep one"
                if hits
                else f"{hr_path.name}: no LR image (looked for {looked})"
            )
            continue
        (h, w), (lh, lw) = image_size(hr_path), image_size(hits[0])
        if (lh, lw) != (h // scale, w // scale):
            problems.append(
                f"{hr_path.name} ({w}x{h}, cropped to {w // scale * scale}x{h // scale * scale})"
                f": LR {hits[0].name} is {lw}x{lh}, expected {w // scale}x{h // scale}"
            )
        found.append(hits[0])
    if problems:
        raise ImageFolderError(
            f"{len(problems)} of {len(hr_files)} HR image(s) have no usable LR image in {lr_dir} "
            f"at x{scale}:\n  "
            + "\n  ".join(problems)
            + f"\neach HR image needs one LR image named <stem>.png|.jpg|.jpeg or "
            f"<stem>x{scale}.png (DIV2K), of the HR's size cropped to a multiple of {scale} and "
            f"divided by {scale}: fix the LR folder, or give the one of this scale"
        )
    return found


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
    out = finite(forward(model)(tf.convert_to_tensor(x, tf.float32)))
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
    result, rows = {}, list(rows)
    known = (*METRICS, *RGB_METRICS, *NIQE_METRICS)
    metrics = set(metric_registry.names())  # a user's metrics: their keys and bicubic's
    extra = (
        k for r in rows for k in r if k not in known and k.removesuffix("_bicubic") in metrics
    )
    for key in (*known, *dict.fromkeys(extra)):
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
        ValueError: for a frame too small for the scale, ``target`` outside the window, or an
            RGB model (sequences are scored with Y models).
    """
    if not 0 <= target < frames:
        raise ValueError(f"target frame index {target} is not in a window of {frames} frames")
    if model is not None and input_channels(model) != 1:
        raise ValueError(
            f"model {getattr(model, 'name', model)} is an RGB model: sequences are scored with "
            "Y-channel models; score the frames of an RGB model as folders of images"
        )
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
