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

import tensorflow as tf
from tqdm import tqdm

from sr.core.images import ImageFolderError, list_images
from sr.evaluation import METRICS, evaluate_images, evaluate_sequences

BICUBIC = "bicubic"


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
) -> dict:
    """Score ``model`` (None: bicubic only) on each folder, in the ``results.json`` schema.

    Args:
        model: Y-channel Keras model ``[1, h, w, 1] -> [1, s h, s w, 1]``, float32 in [0, 1]; or
            None for the bicubic baseline alone.
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

    Returns:
        ``{folder name: {"psnr", "ssim", "n", "per_image", "psnr_bicubic", "ssim_bicubic",
        "scale", "model", "checkpoint", "step"}}`` as in the module docstring (PSNR in dB), plus
        ``"per_sequence"``, ``"frames"``, ``"frame_stride"`` and ``"target"`` for sequences.

    Raises:
        ImageFolderError: for a missing or empty folder, an image that cannot be decoded, a
            folder of sequences without sequence subfolders, or frames of different sizes in a
            sequence.
        ValueError: for an image too small for the scale, or two folders of one name.
    """
    results = {}
    for name, folder in folder_names(folders).items():
        if sequences is None:
            files = list_images(folder)
            desc = f"{name} x{scale}"
            bar = tqdm(files, desc=desc, unit="img", disable=not progress, leave=False)
            res = evaluate_images(model, bar, scale)
        else:
            res = _evaluate_sequence_folder(model, folder, name, scale, sequences, progress)
        per_image = res["per_image"]
        if model is None:  # the method is bicubic: its figures are the "psnr"/"ssim"
            for row in [*per_image.values(), *res.get("per_sequence", {}).values()]:
                row["psnr"], row["ssim"] = row["psnr_bicubic"], row["ssim_bicubic"]
            res["psnr"], res["ssim"] = res["psnr_bicubic"], res["ssim_bicubic"]
        results[name] = {
            "psnr": res["psnr"],
            "ssim": res["ssim"],
            "n": res["n"],
            "per_image": {f: {k: row[k] for k in METRICS} for f, row in per_image.items()},
            "psnr_bicubic": res["psnr_bicubic"],
            "ssim_bicubic": res["ssim_bicubic"],
            "scale": int(scale),
            "model": label,
            "checkpoint": checkpoint,
            "step": int(step),
        }
        if sequences is not None:
            results[name]["per_sequence"] = {
                q: {"n": row["n"], **{k: row[k] for k in METRICS}}
                for q, row in res["per_sequence"].items()
            }
            frames, stride, target = sequences
            results[name].update(frames=int(frames), frame_stride=int(stride), target=int(target))
    return results


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
    """Markdown table of :func:`evaluate`'s results: per folder the model's row (unless the method
    is bicubic), then the bicubic row; PSNR in dB with 2 decimals, SSIM with 4."""
    lines = [
        "| folder | method | images | PSNR (dB) | SSIM |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, r in results.items():
        rows = [(name, r)]
        rows += [(f"{name}/{q}", {**r, **row}) for q, row in r.get("per_sequence", {}).items()]
        for label, x in rows:
            if x["model"] != BICUBIC:
                method = f"{x['model']} (step {x['step']})"
                lines.append(
                    f"| {label} | {method} | {x['n']} | {x['psnr']:.2f} | {x['ssim']:.4f} |"
                )
            lines.append(
                f"| {label} | bicubic | {x['n']} | {x['psnr_bicubic']:.2f} | "
                f"{x['ssim_bicubic']:.4f} |"
            )
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
    with csv_path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["folder", "file", "model", "scale", "step", *METRICS, "checkpoint"])
        for name, r in results.items():
            head = [r["model"], r["scale"], r["step"]]
            tail = [r.get("checkpoint_label") or ""]  # best (ckpt-N), last (...), ckpt-N
            sequences = r.get("per_sequence")
            previous = None
            for file, row in r["per_image"].items():
                sequence = file.rsplit("/", 1)[0] if sequences is not None else None
                if previous is not None and sequence != previous:
                    _mean_row(writer, name, f"{previous}/MEAN", head, sequences[previous], tail)
                previous = sequence
                writer.writerow([name, file, *head, *(f"{row[k]:.6f}" for k in METRICS), *tail])
            if previous is not None:
                _mean_row(writer, name, f"{previous}/MEAN", head, sequences[previous], tail)
            _mean_row(writer, name, "MEAN", head, r, tail)
    return json_path, csv_path


def _mean_row(writer, folder: str, file: str, head: list, r: dict, tail: list) -> None:
    writer.writerow([folder, file, *head, *(f"{r[k]:.6f}" for k in METRICS), *tail])


def write_tensorboard(results: dict, tb_dir: str | os.PathLike, step: int) -> None:
    """Log :func:`evaluate`'s folder means as scalars ``eval/<folder>/<metric>`` (``METRICS``) at
    ``step`` into new event files in ``tb_dir``."""
    writer = tf.summary.create_file_writer(str(tb_dir))
    with writer.as_default(step=int(step)):
        for name, r in results.items():
            for key in METRICS:
                tf.summary.scalar(f"eval/{name}/{key}", r[key])
    writer.close()
