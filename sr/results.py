"""Evaluation results of ``scripts/evaluate.py``: per folder, in one schema, written as JSON, CSV,
a markdown table and TensorBoard scalars.

The scores come from the protocol of :mod:`sr.evaluation` (:func:`sr.evaluation.evaluate_images`);
this module only arranges them per folder and writes them.

``results.json`` (:func:`evaluate`, :func:`write_results`)::

    {"<folder name>": {
        "psnr": mean PSNR (dB), "ssim": mean SSIM, "n": number of images,
        "per_image": {"<file name>": {"psnr", "ssim", "psnr_bicubic", "ssim_bicubic"}},
        "psnr_bicubic": mean dB, "ssim_bicubic": mean,
        "scale": s, "model": method name, "checkpoint": path or null, "step": training step,
        "checkpoint_label": "best (ckpt-N)", "last (ckpt-N)" or "ckpt-N" (scripts/evaluate.py;
        null for bicubic)}}

Folders are keyed by their own name (``../x/Set5/`` -> ``Set5``), in the order given. For the
``bicubic`` method, ``psnr``/``ssim`` are the bicubic figures, ``checkpoint`` is null and ``step``
is 0.

``results.csv``: columns ``folder, file, model, scale, step, psnr, ssim, psnr_bicubic,
ssim_bicubic, checkpoint`` (the label; empty for bicubic); one row per image, then a ``MEAN``
row per folder (metrics with 6 decimals).

TensorBoard (:func:`write_tensorboard`): scalars ``eval/<folder>/psnr``, ``eval/<folder>/ssim``,
``eval/<folder>/psnr_bicubic``, ``eval/<folder>/ssim_bicubic`` at the checkpoint's step.

RGB PSNR (:data:`sr.evaluation.RGB_METRICS`, for an RGB model, or bicubic with ``rgb=True``):
every folder, sequence and image gains ``"psnr_rgb"`` (the model's; for bicubic, bicubic's) and
``"psnr_rgb_bicubic"``, placed after ``"ssim_bicubic"``; the CSV gains the columns
``psnr_rgb, psnr_rgb_bicubic`` after ``checkpoint`` (the old columns keep their places), the
markdown table a last column ``RGB PSNR (dB)``, TensorBoard ``eval/<folder>/psnr_rgb`` and
``eval/<folder>/psnr_rgb_bicubic``. A Y model's results have none of them.

NIQE (:data:`sr.evaluation.NIQE_METRICS`, :func:`evaluate` with ``with_niqe``): likewise
``"niqe"`` (the model's; for bicubic, bicubic's) and ``"niqe_bicubic"`` after them, CSV columns
``niqe, niqe_bicubic`` last, a last table column ``NIQE``, TensorBoard ``eval/<folder>/niqe``
and ``eval/<folder>/niqe_bicubic``. Real photos (:func:`evaluate_real`: LR photos without HR)
have NIQE only: their entry has ``"niqe"``, ``"niqe_bicubic"``, ``"n"``, ``"per_image"``, the
method's keys and ``"real": true``, and empty PSNR and SSIM cells in the CSV and the table.

Paired evaluation (:func:`evaluate` with ``lr_dirs``, one LR folder per HR folder, matched by
:func:`sr.evaluation.match_lr_files`): the folder's entry gains ``"lr_dir"`` (the LR folder's
path); ``scripts/evaluate.py`` adds ``"degradation"`` and ``"seed"`` when it made that folder
(:func:`save_lr_set`). Every pair of every folder is checked before anything is scored.

Folders of sequences (:func:`evaluate` with ``sequences=(k, stride, target)``: a run of
``data=sequence``, or ``--sequences``): each folder holds one subfolder per sequence and every
frame is scored by :func:`sr.evaluation.evaluate_sequences`. The folder's entry gains
``"per_sequence": {"<sequence>": {"n", "psnr", "ssim", "psnr_bicubic", "ssim_bicubic"}}`` and
``"frames"``, ``"frame_stride"``, ``"target"`` (the window: k, stride, target index); its
``per_image`` is keyed ``"<sequence>/<frame file>"``, ``n`` counts frames, and its means are the
mean over sequences of each sequence's mean over its frames (the Vid4 convention). The CSV has a
row per frame (``file`` = ``<sequence>/<frame file>``), a ``<sequence>/MEAN`` row after each
sequence, then the folder's ``MEAN`` row; the markdown table has the folder's rows, then a model
row and a bicubic row per sequence (folder column ``<folder>/<sequence>``).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from sr.cli import BICUBIC
from sr.core.color import gray_of
from sr.core.degrade import bicubic_upscale, min_hr_size, quantize
from sr.core.images import (
    ImageFolderError,
    check_output_folder,
    image_size,
    list_images,
    load_image,
)
from sr.evaluation import (
    METRICS,
    NIQE_METRICS,
    RGB_METRICS,
    evaluate_images,
    evaluate_sequences,
    match_lr_files,
    modcrop,
    niqe_cropped,
)
from sr.inference import Upscaler, write_image
from sr.metrics.niqe import BLOCK


def folder_names(folders: Iterable[str | os.PathLike]) -> dict[str, Path]:
    """``{name: folder}`` keyed by each folder's own name (``../x/Set5/`` -> ``Set5``).

    Args:
        folders: folder paths (``~`` expanded), in the order the results should keep.

    Returns:
        ``{name: Path}`` in the given order.

    Raises:
        ValueError: if two folders share a name (their results would collide).
    """
    names: dict[str, Path] = {}
    for folder in folders:
        path = Path(folder).expanduser()
        name = path.resolve().name
        if name in names:
            raise ValueError(
                f"folders {names[name]} and {path} are both named {name!r}: results are keyed by "
                "folder name, so evaluate them in separate runs with different --out"
            )
        names[name] = path
    return names


def evaluate(
    model: tf.keras.Model | None,
    folders: Iterable[str | os.PathLike],
    scale: int,
    label: str,
    step: int,
    checkpoint: str | None,
    progress: bool = True,
    sequences: tuple[int, int, int] | None = None,
    lr_dirs: Iterable[str | os.PathLike] | None = None,
    rgb: bool | None = None,
    with_niqe: bool = False,
    real: Iterable[str | os.PathLike] = (),
    save: str | os.PathLike | None = None,
) -> dict:
    """Score ``model`` (None: bicubic only) on each folder, in the ``results.json`` schema.

    Args:
        model: Keras model ``[1, h, w, C] -> [1, s h, s w, C]``, float32 in [0, 1], C = 1 (Y)
            or 3 (RGB: ``sr.evaluation.input_channels``); or None for the bicubic baseline alone.
        folders: folders of HR images (PNG/JPEG, RGB or gray).
        scale: s, the upscaling factor.
        label: the method's name (``"bicubic"`` or the model's name), stored as ``"model"``.
        step: training step of the checkpoint (0 for bicubic).
        checkpoint: checkpoint path, or None.
        progress: show a tqdm bar per folder on stderr.
        sequences: None for folders of images; ``(k, stride, target index)`` for folders of
            sequences (one subfolder of frames per sequence), scored by
            :func:`sr.evaluation.evaluate_sequences` with that window (``(1, 1, 0)``: each frame
            alone, for bicubic or a single-image model).
        lr_dirs: None to make the LR of each HR image; or one folder of LR images per folder, in
            the same order (paired evaluation, folders of images only).
        rgb: report RGB PSNR (``sr.evaluation.RGB_METRICS``); None: for an RGB model only.
        with_niqe: report NIQE (``sr.evaluation.NIQE_METRICS``; folders of images only).
        real, save: folders of real LR photos (no HR), scored first by :func:`evaluate_real`
            (which writes their outputs into ``save``) and listed after ``folders``.

    Returns:
        ``{folder name: {"psnr", "ssim", "n", "per_image", "psnr_bicubic", "ssim_bicubic",
        "scale", "model", "checkpoint", "step"}}`` as in the module docstring (PSNR in dB), plus
        ``"per_sequence"``, ``"frames"``, ``"frame_stride"`` and ``"target"`` for sequences,
        ``"psnr_rgb"`` and ``"psnr_rgb_bicubic"`` with RGB PSNR, ``"niqe"`` and
        ``"niqe_bicubic"`` with NIQE, ``"lr_dir"`` when paired.

    Raises:
        ImageFolderError: for a missing or empty folder, an image that cannot be decoded, a
            folder of sequences without sequence subfolders, frames of different sizes in a
            sequence, or a missing, ambiguous or wrongly sized LR image (all named, before any
            scoring).
        ValueError: for an image too small for the scale, two folders of one name, LR folders
            not one per folder, LR folders, RGB PSNR or NIQE with sequences, or a ``save`` file.
    """
    named, real = folder_names(folders), list(real)
    folder_names([*named.values(), *real])  # one name per folder, HR and real alike
    check_output_folder(save, "--save")
    paired = _paired_files(named, lr_dirs, scale, sequences)
    method = (scale, label, step, checkpoint)
    real_results = evaluate_real(model, real, *method, save, progress) if real else {}
    results = {}
    for name, folder in named.items():
        if sequences is None:
            files, lr_files, _ = paired[name] if name in paired else (list_images(folder), None, 0)
            desc = f"{name} x{scale}"
            bar = tqdm(files, desc=desc, unit="img", disable=not progress, leave=False)
            res = evaluate_images(
                model, bar, scale, lr_files=lr_files, rgb=rgb, with_niqe=with_niqe
            )
        else:
            if rgb or with_niqe:
                raise ValueError(
                    "RGB PSNR and NIQE are reported for folders of images, not sequences"
                )
            res = _evaluate_sequence_folder(model, folder, name, scale, sequences, progress)
        results[name] = _entry(res, model is None, scale, label, step, checkpoint)
        if name in paired:
            results[name]["lr_dir"] = str(paired[name][2])
        if sequences is not None:
            frames, stride, target = sequences
            results[name].update(frames=int(frames), frame_stride=int(stride), target=int(target))
    return {**results, **real_results}


def _paired_files(named: dict[str, Path], lr_dirs, scale: int, sequences) -> dict:
    """``{folder name: (HR files, LR files, LR folder)}`` of every folder, every pair checked
    (:func:`sr.evaluation.match_lr_files`) before anything is scored; ``{}`` without
    ``lr_dirs``."""
    if lr_dirs is None:
        return {}
    lr_dirs = [Path(d).expanduser() for d in lr_dirs]
    if sequences is not None:
        raise ValueError("LR folders apply to folders of images, not to folders of sequences")
    if len(lr_dirs) != len(named):
        raise ValueError(
            f"{len(lr_dirs)} LR folder(s) for {len(named)} HR folder(s): give one LR folder per "
            "HR folder, in the same order"
        )
    paired = {}
    for (name, folder), lr_dir in zip(named.items(), lr_dirs):
        files = list_images(folder)
        paired[name] = (files, match_lr_files(files, lr_dir, scale), lr_dir)
    return paired


def _entry(res: dict, bicubic: bool, scale: int, label: str, step: int, checkpoint) -> dict:
    """A folder's entry of ``results.json`` from :func:`sr.evaluation.evaluate_images`'s (or
    ``evaluate_sequences``') result; for the bicubic method its figures are ``psnr``/``ssim``
    (and ``psnr_rgb``)."""
    if bicubic:  # the method is bicubic: its figures are the "psnr"/"ssim"
        for row in [res, *res["per_image"].values(), *res.get("per_sequence", {}).values()]:
            row["psnr"], row["ssim"] = row["psnr_bicubic"], row["ssim_bicubic"]
            for key in ("psnr_rgb", "niqe"):
                if f"{key}_bicubic" in row:
                    row[key] = row[f"{key}_bicubic"]
    keys = [*METRICS, *(k for k in (*RGB_METRICS, *NIQE_METRICS) if k in res)]
    extra = {k: res[k] for k in keys if k not in METRICS}
    entry = {
        "psnr": res["psnr"],
        "ssim": res["ssim"],
        "n": res["n"],
        "per_image": {f: {k: row[k] for k in keys} for f, row in res["per_image"].items()},
        "psnr_bicubic": res["psnr_bicubic"],
        "ssim_bicubic": res["ssim_bicubic"],
        **extra,
        "scale": int(scale),
        "model": label,
        "checkpoint": checkpoint,
        "step": int(step),
    }
    if "per_sequence" in res:
        entry["per_sequence"] = {
            q: {"n": row["n"], **{k: row[k] for k in keys}}
            for q, row in res["per_sequence"].items()
        }
    return entry


def _evaluate_sequence_folder(model, folder: Path, name: str, scale: int, window, progress):
    """:func:`sr.evaluation.evaluate_sequences` on the sequences of ``folder``."""
    from sr.core.frames import list_sequences

    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise ImageFolderError(
            f"sequence folder {folder} {what}: give a folder with one subfolder of frames per "
            "sequence (clip_001/frame_0001.png, ...)"
        )
    seqs = list_sequences(folder, key="folder")
    frames, stride, target = window
    total = sum(len(q.files) for q in seqs)
    bar = tqdm(
        total=total, desc=f"{name} x{scale}", unit="frame", disable=not progress, leave=False
    )
    try:
        return evaluate_sequences(
            model, seqs, scale, frames, stride, target, folder=folder, progress=bar.update
        )
    finally:
        bar.close()


def markdown_table(results: dict) -> str:
    """Markdown table of :func:`evaluate`'s (and :func:`evaluate_real`'s) results: per folder the
    model's row (unless the method is bicubic), then the bicubic row; PSNR in dB with 2
    decimals, SSIM with 4 (empty cells for real photos, which have no HR); a column
    ``RGB PSNR (dB)`` when the results have RGB PSNR, a last column ``NIQE`` (3 decimals) when
    they have NIQE."""
    columns = [("psnr", "PSNR (dB)", ".2f"), ("ssim", "SSIM", ".4f")]
    for key, title in (("psnr_rgb", "RGB PSNR (dB)"), ("niqe", "NIQE")):
        if any(f"{key}_bicubic" in r for r in results.values()):
            columns.append((key, title, ".3f" if key == "niqe" else ".2f"))
    lines = [
        "| folder | method | images |" + "".join(f" {title} |" for _, title, _ in columns),
        "| --- | --- | ---: |" + " ---: |" * len(columns),
    ]

    def cells(x: dict, suffix: str) -> str:
        keys = ((key + suffix, spec) for key, _, spec in columns)
        return "".join(f" {x[k]:{spec}} |" if k in x else " |" for k, spec in keys)

    for name, r in results.items():
        rows = [(name, r)]
        rows += [(f"{name}/{q}", {**r, **row}) for q, row in r.get("per_sequence", {}).items()]
        for label, x in rows:
            if x["model"] != BICUBIC:
                method = f"{x['model']} (step {x['step']})"
                lines.append(f"| {label} | {method} | {x['n']} |" + cells(x, ""))
            lines.append(f"| {label} | bicubic | {x['n']} |" + cells(x, "_bicubic"))
    return "\n".join(lines)


def write_results(results: dict, out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """Write :func:`evaluate`'s results as ``results.json`` and ``results.csv`` (schemas in the
    module docstring) into ``out_dir``, created if needed; existing files are replaced.

    Returns:
        ``(json path, csv path)``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out_dir / "results.json", out_dir / "results.csv"
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    extra = [k for k in (*RGB_METRICS, *NIQE_METRICS) if any(k in r for r in results.values())]
    with csv_path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["folder", "file", "model", "scale", "step", *METRICS, "checkpoint", *extra]
        )
        for name, r in results.items():
            head = [r["model"], r["scale"], r["step"]]
            tail = [r.get("checkpoint_label") or ""]  # best (ckpt-N), last (...), ckpt-N
            sequences = r.get("per_sequence")
            previous = None
            for file, row in r["per_image"].items():
                sequence = file.rsplit("/", 1)[0] if sequences is not None else None
                if previous is not None and sequence != previous:
                    mean = sequences[previous]
                    _row(writer, name, f"{previous}/MEAN", head, mean, tail, extra)
                previous = sequence
                _row(writer, name, file, head, row, tail, extra)
            if previous is not None:
                _row(writer, name, f"{previous}/MEAN", head, sequences[previous], tail, extra)
            _row(writer, name, "MEAN", head, r, tail, extra)
    return json_path, csv_path


def _row(writer, folder: str, file: str, head: list, r: dict, tail: list, extra: list) -> None:
    """A CSV row: the old columns in their places, then the ``extra`` metrics; empty where
    absent (PSNR and SSIM of real photos)."""
    figures = [f"{r[k]:.6f}" if k in r else "" for k in METRICS]
    writer.writerow(
        [folder, file, *head, *figures, *tail, *(f"{r[k]:.6f}" if k in r else "" for k in extra)]
    )


def write_tensorboard(results: dict, tb_dir: str | os.PathLike, step: int) -> None:
    """Log :func:`evaluate`'s folder means as scalars ``eval/<folder>/<metric>`` (``METRICS``, and
    ``RGB_METRICS`` where present) at ``step`` into new event files in ``tb_dir``."""
    writer = tf.summary.create_file_writer(str(tb_dir))
    with writer.as_default(step=int(step)):
        for name, r in results.items():
            for key in (k for k in (*METRICS, *RGB_METRICS, *NIQE_METRICS) if k in r):
                tf.summary.scalar(f"eval/{name}/{key}", r[key])
    writer.close()


def evaluate_real(
    model: tf.keras.Model | None,
    folders: Iterable[str | os.PathLike],
    scale: int,
    label: str,
    step: int,
    checkpoint: str | None,
    save: str | os.PathLike | None = None,
    progress: bool = True,
) -> dict:
    """Upscale folders of real LR photos, which have no HR, and score every output by NIQE.

    Each photo (PNG/JPEG, RGB or gray; alpha dropped, ``sr.core.images.load_image``) is
    upscaled by the model through ``sr.inference.Upscaler`` (what ``scripts/upscale.py``
    writes: a Y model's Y with bicubic chroma, an RGB model's R, G, B) and by bicubic (the
    protocol's baseline: ``sr.core.degrade.bicubic_upscale``, rounded to 8 bits). Both 8-bit
    images are scored by ``sr.evaluation.niqe_cropped`` with ``scale`` border pixels cropped,
    as ``--niqe`` scores HR sets. Every size is checked from the headers before any upscaling.

    Args:
        model: a Y or RGB Keras model (as :func:`evaluate`), or None for bicubic alone.
        folders: folders of LR photos.
        scale: s.
        label, step, checkpoint: the method's name, step and checkpoint (as :func:`evaluate`).
        save: None, or a folder where the upscaled images are written as PNG for a person to
            look at: ``<save>/<folder name>/<label>/<stem>.png`` and, beside it,
            ``<save>/<folder name>/bicubic/<stem>.png`` (files of those names are replaced).
        progress: show a tqdm bar per folder on stderr.

    Returns:
        ``{folder name: {"niqe": mean, "niqe_bicubic": mean, "n", "per_image": {"<file>":
        {"niqe", "niqe_bicubic"}}, "scale", "model", "checkpoint", "step", "real": true}}``;
        for the bicubic method ``"niqe"`` is bicubic's.

    Raises:
        ImageFolderError: for a missing or empty folder, or a photo that cannot be decoded.
        ValueError: for two folders of one name, or photos too small for NIQE at this scale
            (``s (side - 2) >= 96``; names them).
    """
    named = folder_names(folders)
    listed = {name: list_images(folder) for name, folder in named.items()}
    _check_real_sizes(listed, scale)
    upscaler = None if model is None else Upscaler(model, scale)
    results = {}
    for name, files in listed.items():
        per_image, out = {}, None if save is None else Path(save).expanduser() / name
        for path in tqdm(files, desc=f"{name} x{scale}", disable=not progress, leave=False):
            outputs = _real_outputs(upscaler, load_image(path), scale)
            row = {k: niqe_cropped(image, scale, path.name) for k, image in outputs.items()}
            per_image[path.name] = {"niqe": row.get("niqe", row["niqe_bicubic"]), **row}
            for key, image in outputs.items() if out is not None else ():
                method = BICUBIC if key == "niqe_bicubic" else label
                write_image(image, out / method / f"{path.stem}.png")
        means = {k: float(np.mean([r[k] for r in per_image.values()])) for k in NIQE_METRICS}
        results[name] = {
            **means,
            "n": len(per_image),
            "per_image": per_image,
            "scale": int(scale),
            "model": label,
            "checkpoint": checkpoint,
            "step": int(step),
            "real": True,
        }
    return results


def _real_outputs(upscaler: Upscaler | None, lr: np.ndarray, scale: int) -> dict:
    """``{"niqe": the model's uint8 output, "niqe_bicubic": bicubic's}`` of one LR photo
    (``"niqe"`` absent without a model)."""
    outputs = {}
    if upscaler is not None:  # in tiles of upscale.py's default 256, equal to the untiled result
        outputs["niqe"] = upscaler(lr, tile=256)
    bicubic = quantize(bicubic_upscale(lr, scale)).numpy().astype(np.uint8)
    outputs["niqe_bicubic"] = bicubic
    return outputs


def _check_real_sizes(listed: dict, scale: int) -> None:
    """Refuse photos whose ``scale`` x output, less ``scale`` pixels of border on each side, is
    under NIQE's 96 x 96 block (from the headers, before any work)."""
    small = []
    for name, files in listed.items():
        for path in files:
            h, w = image_size(path)
            if scale * (min(h, w) - 2) < BLOCK:
                small.append(f"{name}/{path.name} ({w}x{h})")
    if small:
        need = -(-BLOCK // scale) + 2
        raise ValueError(
            f"photo(s) too small for NIQE at x{scale} (at least {need} pixels on each side, so "
            f"that the output less its border holds a {BLOCK}x{BLOCK} block): "
            f"{', '.join(small)}; remove them"
        )


LR_SET_FILE = "lr_set.json"
"""What :func:`save_lr_set` writes beside the LR images: the degradation's name, the seed, the
scale, the HR folder and ``{"<LR file>": "<HR file>"}``."""


def save_lr_set(
    degradation,
    hr_folder: str | os.PathLike,
    out_dir: str | os.PathLike,
    scale: int,
    seed: int,
    progress: bool = True,
) -> list[Path]:
    """Write a fixed degraded LR set of a folder of HR images, for paired evaluation.

    Image i of the folder in name order (``sr.core.images.list_images``), cropped to a multiple
    of the scale (``sr.evaluation.modcrop``), gray replicated to RGB, gives
    ``degradation.lr_image(hr, scale, seed, i)``, saved as ``<out_dir>/<HR stem>.png`` (RGB; for
    a gray HR image the gray of ``sr.core.color.gray_of``, rounded), so that the LR is a
    function of ``(seed, i)`` alone and ``sr.evaluation.match_lr_files`` pairs it by name.
    :data:`LR_SET_FILE` records how the set was made. Sizes and names are checked before
    anything is written, and on any failure the files already written are removed: a set is
    whole or absent.

    Args:
        degradation: an object with ``name`` and ``lr_image(hr uint8 [H, W, 3], scale, seed,
            index) -> uint8 [H / s, W / s, 3]`` (``sr.degradations.Bicubic``,
            ``sr.degradations.realesrgan.RealESRGAN``; ``sr.config.degradation_named``).
        hr_folder: folder of HR images (PNG/JPEG, RGB or gray).
        out_dir: the folder to write, created if needed.
        scale: s.
        seed: the set's seed.
        progress: show a tqdm bar on stderr.

    Returns:
        The LR paths written, in the order of the HR images.

    Raises:
        ImageFolderError: for a missing or empty HR folder, or an image that cannot be read.
        ValueError: if ``out_dir`` already holds any file this would write (names them; nothing
            is written), is the HR folder, two HR images share a stem, an image is too small
            for the scale, or the degradation returns another size than ``(H / s, W / s, 3)``.
    """
    hr_folder, out_dir = Path(hr_folder).expanduser(), Path(out_dir).expanduser()
    files, targets = check_lr_set(hr_folder, out_dir, scale)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    bar = tqdm(files, desc=f"LR {degradation.name}", unit="img", disable=not progress, leave=False)
    written = []
    try:
        for index, (path, target) in enumerate(zip(bar, targets)):
            written.append(write_image(degraded_lr(degradation, path, scale, seed, index), target))
        record = {
            "degradation": degradation.name,
            "seed": int(seed),
            "scale": int(scale),
            "hr_dir": str(hr_folder),
            "files": {t.name: p.name for p, t in zip(files, targets)},
        }
        (out_dir / LR_SET_FILE).write_text(json.dumps(record, indent=2) + "\n")
    except BaseException:  # no half set: remove what this call wrote, then fail
        for path in written:
            path.unlink(missing_ok=True)
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    return targets


def degraded_lr(degradation, path: Path, scale: int, seed: int, index: int) -> np.ndarray:
    """The LR :func:`save_lr_set` writes for image ``index`` of the set, ``path``: uint8
    ``[H / s, W / s, 3]``, or ``[H / s, W / s, 1]`` for a gray image (see :func:`save_lr_set`).

    Raises:
        ImageFolderError: for an image that cannot be read.
        ValueError: if the degradation returns another shape or dtype (names it and the file).
    """
    hr = modcrop(load_image(path), scale)
    rgb = hr if hr.shape[-1] == 3 else np.repeat(hr, 3, axis=-1)
    lr = np.asarray(degradation.lr_image(rgb, scale, seed, index))
    want = (hr.shape[0] // scale, hr.shape[1] // scale, 3)
    if lr.shape != want or lr.dtype != np.uint8:
        raise ValueError(
            f"degradation {degradation.name} made a {lr.dtype} LR of shape {lr.shape} for "
            f"{path}, expected uint8 {want}: its lr_image must return the whole image's LR"
        )
    if hr.shape[-1] == 1:  # a gray image stays gray
        lr = quantize(gray_of(lr.astype(np.float64))).numpy().astype(np.uint8)
    return lr


def check_lr_set(
    hr_folder: str | os.PathLike, out_dir: str | os.PathLike, scale: int
) -> tuple[list[Path], list[Path]]:
    """:func:`save_lr_set`'s checks, made before anything is written (also of every folder
    first, by ``scripts/evaluate.py``).

    Returns:
        ``(HR files, LR paths to write)``, in name order.

    Raises:
        ImageFolderError, ValueError: as :func:`save_lr_set` (naming the fault and the fix).
    """
    hr_folder, out_dir = Path(hr_folder).expanduser(), Path(out_dir).expanduser()
    files = list_images(hr_folder)
    targets = [out_dir / f"{p.stem}.png" for p in files]
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"LR folder {out_dir} is a file: give a new folder to --save-lr")
    if out_dir.resolve() == hr_folder.resolve():
        raise ValueError(f"LR folder {out_dir} is the HR folder: give a new folder to --save-lr")
    stems: dict[str, str] = {}
    for p in files:
        if p.stem in stems:
            raise ValueError(
                f"HR images {stems[p.stem]} and {p.name} of {hr_folder} would both be saved as "
                f"{p.stem}.png: rename one"
            )
        stems[p.stem] = p.name
    existing = [t.name for t in [*targets, out_dir / LR_SET_FILE] if t.exists()]
    if existing:
        raise ValueError(
            f"LR folder {out_dir} already holds {', '.join(existing)}: nothing was written; give "
            "a new folder to --save-lr (or remove those files), or score the existing set with "
            f"--lr-dir {out_dir}"
        )
    small = []
    for p in files:
        h, w = image_size(p)
        if min(h, w) // scale * scale < min_hr_size(scale):
            small.append(f"{p.name} ({w}x{h})")
    if small:
        raise ValueError(
            f"image(s) of {hr_folder} too small for scale {scale} (at least {min_hr_size(scale)} "
            f"pixels on each side): {', '.join(small)}; remove them or use a smaller scale"
        )
    return files, targets
