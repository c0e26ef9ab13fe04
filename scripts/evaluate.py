"""Evaluate a trained run, or the bicubic baseline, with the SR literature's protocol.

    python scripts/evaluate.py <run dir> <folder> [<folder> ...] [--checkpoint ckpt-N] [--out DIR]
    python scripts/evaluate.py bicubic <folder> [<folder> ...] --scale 4 [--out DIR]

For every folder of HR images (PNG/JPEG; RGB or gray), at the run's scale: HR cropped to a multiple
of the scale, LR by the project's MATLAB-equivalent bicubic (rounded to 8 bits), SR of the Y
channel, PSNR (peak 255) and SSIM (Wang et al. 2004) on Y with ``scale`` pixels cropped from every
border; the bicubic baseline beside it. The protocol is ``sr.evaluation``, the same code as the
trainer's validation.

Writes, into the run's directory (or ``--out``; for bicubic by default ``outputs/bicubic_x<s>``):

- ``results.json``: ``{"<folder name>": {"psnr": mean dB, "ssim": mean, "n": images,
  "per_image": {"<file>": {"psnr", "ssim", "psnr_bicubic", "ssim_bicubic"}},
  "psnr_bicubic", "ssim_bicubic", "scale", "model", "checkpoint", "step"}}`` (for ``bicubic``,
  ``psnr``/``ssim`` are the bicubic figures);
- ``results.csv``: one row per image and a ``MEAN`` row per folder;
- TensorBoard scalars ``eval/<folder>/psnr``, ``eval/<folder>/ssim``,
  ``eval/<folder>/psnr_bicubic``, ``eval/<folder>/ssim_bicubic`` at the checkpoint's step, in
  ``<run>/tb`` (``<out>/tb`` for bicubic);

and prints a markdown table (a model row and a bicubic row per folder) on stdout.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tqdm import tqdm  # noqa: E402

import sr.config  # noqa: E402,F401  (registers the ${sr_root:} resolver of saved run configs)
from sr.data.images import ImageFolderError, list_images  # noqa: E402
from sr.evaluation import evaluate_images  # noqa: E402
from sr.train.checkpoint import RunDirError, find_checkpoint, load_model_from_run  # noqa: E402

BICUBIC = "bicubic"
METRICS = ("psnr", "ssim", "psnr_bicubic", "ssim_bicubic")


def folder_names(folders) -> dict[str, Path]:
    """``{name: folder}`` keyed by each folder's own name (``../x/Set5/`` -> ``Set5``).

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
    model,
    folders,
    scale: int,
    label: str,
    step: int,
    checkpoint: str | None,
    progress: bool = True,
) -> dict:
    """Score ``model`` (None: bicubic only) on each folder, in the ``results.json`` schema.

    Args:
        model: Y-channel Keras model ``[1, h, w, 1] -> [1, s h, s w, 1]`` in [0, 1], or None.
        folders: folders of HR images.
        scale: s.
        label: the method's name (``"bicubic"`` or the model's name), stored as ``"model"``.
        step: training step of the checkpoint (0 for bicubic).
        checkpoint: checkpoint path, or None.
        progress: show a tqdm bar per folder on stderr.

    Returns:
        ``{folder name: {"psnr", "ssim", "n", "per_image", "psnr_bicubic", "ssim_bicubic",
        "scale", "model", "checkpoint", "step"}}`` (PSNR in dB).

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
    """Markdown table: per folder the model's row, then the bicubic row beside it."""
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


def write_results(results: dict, out_dir) -> tuple[Path, Path]:
    """Write ``results.json`` and ``results.csv`` into ``out_dir`` (created); returns their
    paths."""
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


def write_tensorboard(results: dict, tb_dir, step: int) -> None:
    """Scalars ``eval/<folder>/<metric>`` at ``step`` in the event files of ``tb_dir``."""
    writer = tf.summary.create_file_writer(str(tb_dir))
    with writer.as_default(step=int(step)):
        for name, r in results.items():
            for key in METRICS:
                tf.summary.scalar(f"eval/{name}/{key}", r[key])
    writer.close()


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="evaluate.py",
        description="PSNR/SSIM on Y (paper protocol) of a trained run or of bicubic, per folder.",
    )
    parser.add_argument("run", help="run directory of train.py (outputs/DATE/TIME), or 'bicubic'")
    parser.add_argument("folders", nargs="+", help="folders of HR images (PNG/JPEG)")
    parser.add_argument("--checkpoint", help="ckpt-N in <run>/checkpoints (default: the latest)")
    parser.add_argument("--scale", type=int, help="scale for bicubic (a run uses its own)")
    parser.add_argument(
        "--out", help="output folder (default: the run directory; bicubic: outputs/bicubic_x<s>)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.run == BICUBIC:
            if args.checkpoint:
                raise ValueError("--checkpoint applies to a run directory, not to bicubic")
            if not args.scale:
                raise ValueError("bicubic needs --scale (2, 3, 4, ...)")
            model, scale, step, checkpoint, label = None, args.scale, 0, None, BICUBIC
            out = Path(args.out or f"outputs/bicubic_x{scale}")
            tb_dir = out / "tb"
        else:
            run = Path(args.run)
            model, cfg, step = load_model_from_run(run, args.checkpoint)
            checkpoint = find_checkpoint(run, args.checkpoint)
            scale, label = int(cfg.data.scale), model.name
            if args.scale and args.scale != scale:
                raise ValueError(
                    f"run {run} was trained at x{scale}; --scale {args.scale} applies to bicubic "
                    "only (drop it, or evaluate a run of that scale)"
                )
            out, tb_dir = Path(args.out) if args.out else run, run / "tb"
        results = evaluate(
            model, args.folders, scale, label, step, checkpoint, progress=not args.no_progress
        )
    except (RunDirError, ImageFolderError, ValueError) as e:
        print(f"evaluate.py: error: {e}", file=sys.stderr)
        return 2
    json_path, csv_path = write_results(results, out)
    write_tensorboard(results, tb_dir, step)
    print(f"x{scale}, Y channel (BT.601), {scale}-pixel border crop\n")
    print(markdown_table(results))
    print(f"\nwrote {json_path}, {csv_path}, TensorBoard {tb_dir} (step {step})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
