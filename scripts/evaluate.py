"""Evaluate a trained run, or the bicubic baseline, with the SR literature's protocol.

    python scripts/evaluate.py <run dir> <folder> [<folder> ...] [--checkpoint best|last|ckpt-N]
        [--out DIR] [--sequences] [--weights auto|ema|live]
    python scripts/evaluate.py bicubic <folder> [<folder> ...] --scale 4 [--out DIR] [--sequences]

Scores every folder of HR images (PNG/JPEG; RGB or gray) at the run's scale with the protocol of
``sr.evaluation`` (the trainer's validation: PSNR and SSIM on Y, ``scale`` pixels of border
cropped), the bicubic baseline beside it. Writes ``results.json`` and ``results.csv`` into the
run's directory (or ``--out``; for bicubic by default ``outputs/bicubic_x<s>``), TensorBoard
scalars ``eval/<folder>/<metric>`` at the checkpoint's step into ``<run>/tb`` (``<out>/tb`` for
bicubic), and prints a markdown table (a model row and a bicubic row per folder). The schemas are
documented in ``sr/results.py``, which does the work.

Checkpoint. ``--checkpoint best`` (the default where the run has ``checkpoints/best``: the best
validation PSNR so far), ``last`` (the newest of the rotation, where ``resume=`` continues) or
``ckpt-N`` (``sr.train.checkpoint.find_checkpoint``). The output names the one scored: a line
above the table, ``"checkpoint_label"`` in every folder of ``results.json`` (``"checkpoint"``
stays its path) and a last ``checkpoint`` column in ``results.csv``: ``best (ckpt-4000)``, ``last
(ckpt-8000)`` or ``ckpt-6000`` (empty for bicubic).

Weights. A run trained with ``train.ema`` has averaged weights beside the trained ones in every
checkpoint; ``--weights auto`` (default) scores the averaged ones (method ``<model>+ema``),
``--weights live`` the trained ones, ``--weights ema`` requires the averages. Each evaluation
rewrites ``results.json``: give ``--out`` to keep both.

Sequences. For a run of ``data=sequence`` (its config has ``data.frames``) each folder is a folder
of sequences (one subfolder of frames per sequence, frames in natural name order) and every frame
is scored with its window of the run's ``data.frames``, ``data.frame_stride`` and
``data.target_frame`` (``sr.evaluation.evaluate_sequences``: border frames stand in for missing
neighbours at the ends). ``--sequences`` scores folders of sequences frame by frame with bicubic
or with a single-image run. The results gain per-sequence rows, and a folder's means are the mean
over sequences of each sequence's mean over its frames (``sr/results.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sr.config  # noqa: E402,F401  (registers the ${sr_root:} resolver of saved run configs)
from sr.core.images import ImageFolderError  # noqa: E402
from sr.inference import run_window  # noqa: E402
from sr.results import (  # noqa: E402
    BICUBIC,
    evaluate,
    markdown_table,
    write_results,
    write_tensorboard,
)
from sr.train.checkpoint import (  # noqa: E402
    RunDirError,
    add_weights_argument,
    find_checkpoint,
    load_model_from_run,
    model_label,
)

CHECKPOINT_HELP = (
    "best (default where the run has one: the best validation PSNR), last (the newest "
    "checkpoint, where resume= continues), or ckpt-N"
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="evaluate.py",
        description="PSNR/SSIM on Y (paper protocol) of a trained run or of bicubic, per folder.",
    )
    parser.add_argument("run", help="run directory of train.py (outputs/DATE/TIME), or 'bicubic'")
    parser.add_argument("folders", nargs="+", help="folders of HR images (PNG/JPEG)")
    parser.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    parser.add_argument("--scale", type=int, help="scale for bicubic (a run uses its own)")
    add_weights_argument(parser)  # averaged weights are labelled <model>+ema
    parser.add_argument(
        "--out", help="output folder (default: the run directory; bicubic: outputs/bicubic_x<s>)"
    )
    parser.add_argument(
        "--sequences",
        action="store_true",
        help="the folders hold one subfolder of frames per sequence: score every frame, with "
        "per-sequence rows (implied for a data=sequence run)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.run == BICUBIC:
            if args.checkpoint or args.weights != "auto":
                raise ValueError(
                    "--checkpoint and --weights apply to a run directory, not to bicubic"
                )
            if not args.scale:
                raise ValueError("bicubic needs --scale (2, 3, 4, ...)")
            model, scale, step, checkpoint, label = None, args.scale, 0, None, BICUBIC
            chosen = None
            window = (1, 1, 0) if args.sequences else None
            out = Path(args.out or f"outputs/bicubic_x{scale}")
            tb_dir = out / "tb"
        else:
            run = Path(args.run)
            model, cfg, step = load_model_from_run(run, args.checkpoint, args.weights)
            checkpoint = find_checkpoint(run, args.checkpoint)
            scale, label, chosen = int(cfg.data.scale), model_label(model), model.sr_checkpoint
            if args.scale and args.scale != scale:
                raise ValueError(
                    f"run {run} was trained at x{scale}; --scale {args.scale} applies to bicubic "
                    "only (drop it, or evaluate a run of that scale)"
                )
            out, tb_dir = Path(args.out) if args.out else run, run / "tb"
            window = run_window(cfg) or ((1, 1, 0) if args.sequences else None)
        results = evaluate(
            model,
            args.folders,
            scale,
            label,
            step,
            checkpoint,
            progress=not args.no_progress,
            sequences=window,
        )
    except (RunDirError, ImageFolderError, ValueError) as e:
        print(f"evaluate.py: error: {e}", file=sys.stderr)
        return 2
    for entry in results.values():
        entry["checkpoint_label"] = chosen
    json_path, csv_path = write_results(results, out)
    write_tensorboard(results, tb_dir, step)
    if chosen is not None:
        print(f"{label} of {args.run}: checkpoint {chosen}, step {step}")
    print(f"x{scale}, Y channel (BT.601), {scale}-pixel border crop")
    if window is not None:
        frames, stride, target = window
        how = (
            "on its own"
            if frames == 1
            else f"from a window of {frames} frames at stride {stride}, target index {target}, "
            "border frames repeated"
        )
        print(
            f"sequences: every frame scored {how}; a folder's figures are the mean over its "
            "sequences of each sequence's mean"
        )
    print()
    print(markdown_table(results))
    print(f"\nwrote {json_path}, {csv_path}, TensorBoard {tb_dir} (step {step})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
