"""Evaluation results of ``scripts/evaluate.py``: per folder, in one schema, written as JSON, CSV,
a markdown table and TensorBoard scalars.

The scores come from the protocol of :mod:`sr.evaluation` (:func:`sr.evaluation.evaluate_images`);
this module only arranges them per folder and writes them.

``results.json`` (:func:`evaluate`, :func:`write_results`)::

    {"<folder name>": {
        "psnr": mean PSNR (dB), "ssim": mean SSIM, "n": number of images,
        "per_image": {"<file name>": {"psnr", "ssim", "psnr_bicubic", "ssim_bicubic"}},
        "psnr_bicubic": mean dB, "ssim_bicubic": mean,
        "scale": s, "model": method name, "checkpoint": path or null, "step": training step}}

Folders are keyed by their own name (``../x/Set5/`` -> ``Set5``), in the order given. For the
``bicubic`` method, ``psnr``/``ssim`` are the bicubic figures, ``checkpoint`` is null and ``step``
is 0.

``results.csv``: columns ``folder, file, model, scale, step, psnr, ssim, psnr_bicubic,
ssim_bicubic``; one row per image, then a ``MEAN`` row per folder (metrics with 6 decimals).

TensorBoard (:func:`write_tensorboard`): scalars ``eval/<folder>/psnr``, ``eval/<folder>/ssim``,
``eval/<folder>/psnr_bicubic``, ``eval/<folder>/ssim_bicubic`` at the checkpoint's step.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from pathlib import Path

import tensorflow as tf
from tqdm import tqdm

from sr.data.images import list_images
from sr.evaluation import evaluate_images

BICUBIC = "bicubic"
METRICS = ("psnr", "ssim", "psnr_bicubic", "ssim_bicubic")


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

    Returns:
        ``{folder name: {"psnr", "ssim", "n", "per_image", "psnr_bicubic", "ssim_bicubic",
        "scale", "model", "checkpoint", "step"}}`` as in the module docstring (PSNR in dB).

    Raises:
        ImageFolderError: for a missing or empty folder, or an image that cannot be decoded.
        ValueError: for an image too small for the scale, or two folders of one name.
    """
    results = {}
    for name, folder in folder_names(folders).items():
        files = list_images(folder)
        bar = tqdm(files, desc=f"{name} x{scale}", unit="img", disable=not progress, leave=False)
        res = evaluate_images(model, bar, scale)
        per_image = res["per_image"]
        if model is None:  # the method is bicubic: its figures are the "psnr"/"ssim"
            for row in per_image.values():
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
    return results


def markdown_table(results: dict) -> str:
    """Markdown table of :func:`evaluate`'s results: per folder the model's row (unless the method
    is bicubic), then the bicubic row; PSNR in dB with 2 decimals, SSIM with 4."""
    lines = [
        "| folder | method | images | PSNR (dB) | SSIM |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, r in results.items():
        if r["model"] != BICUBIC:
            method = f"{r['model']} (step {r['step']})"
            lines.append(f"| {name} | {method} | {r['n']} | {r['psnr']:.2f} | {r['ssim']:.4f} |")
        lines.append(
            f"| {name} | bicubic | {r['n']} | {r['psnr_bicubic']:.2f} | {r['ssim_bicubic']:.4f} |"
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
        writer.writerow(["folder", "file", "model", "scale", "step", *METRICS])
        for name, r in results.items():
            head = [r["model"], r["scale"], r["step"]]
            for file, row in r["per_image"].items():
                writer.writerow([name, file, *head, *(f"{row[k]:.6f}" for k in METRICS)])
            writer.writerow([name, "MEAN", *head, *(f"{r[k]:.6f}" for k in METRICS)])
    return json_path, csv_path


def write_tensorboard(results: dict, tb_dir: str | os.PathLike, step: int) -> None:
    """Log :func:`evaluate`'s folder means as scalars ``eval/<folder>/<metric>`` (``METRICS``) at
    ``step`` into new event files in ``tb_dir``."""
    writer = tf.summary.create_file_writer(str(tb_dir))
    with writer.as_default(step=int(step)):
        for name, r in results.items():
            for key in METRICS:
                tf.summary.scalar(f"eval/{name}/{key}", r[key])
    writer.close()
