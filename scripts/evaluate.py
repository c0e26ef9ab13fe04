"""Evaluate a trained run, or the bicubic baseline, with the SR literature's protocol.

    python scripts/evaluate.py <run dir> <folder> [<folder> ...] [--checkpoint best|last|ckpt-N]
        [--out DIR] [--sequences] [--weights auto|ema|live]
    python scripts/evaluate.py bicubic <folder> [<folder> ...] --scale 4 [--out DIR] [--sequences]
        [--rgb]
    python scripts/evaluate.py <run dir>|bicubic <folder> [<folder> ...] --lr-dir DIR
        [--lr-dir DIR ...]
    python scripts/evaluate.py <run dir>|bicubic <folder> [<folder> ...] --degradation NAME
        --save-lr DIR [--save-lr DIR ...] [--seed S]
    python scripts/evaluate.py <run dir>|bicubic [<folder> ...] [--niqe] [--real DIR [--save DIR]]
    python scripts/evaluate.py realesr-general-x4v3.pth <folder> [--niqe] [--real DIR]
        (PyTorch weights, .pth or .safetensors: docs/pytorch.md; results in outputs/<stem>)

Scores every folder of HR images (PNG/JPEG; RGB or gray) at the run's scale with the protocol of
``sr.evaluation`` (the trainer's validation: PSNR and SSIM on Y, ``scale`` pixels of border
cropped), the bicubic baseline beside it. Writes ``results.json`` and ``results.csv`` into the
run's directory (or ``--out``; for bicubic by default ``outputs/bicubic_x<s>``), TensorBoard
scalars ``eval/<folder>/<metric>`` at the checkpoint's step into ``<run>/tb`` (``<out>/tb`` for
bicubic), and prints a markdown table (a model row and a bicubic row per folder). The schemas are
documented in ``sr/results.py``, which does the work.

RGB runs (``data.channels=rgb``: the model reads R, G, B) are scored on Y of their 8-bit output,
as Y runs are, and also report RGB PSNR (``psnr_rgb`` and bicubic's ``psnr_rgb_bicubic``, over R,
G and B with the same border crop; an extra column of the table and the CSV). ``--rgb`` adds
bicubic's RGB PSNR to a ``bicubic`` evaluation (a Y run has no RGB output: refused).

Paired evaluation. ``--lr-dir DIR`` scores the model and bicubic on the given LR images instead
of making them: the LR of ``<stem>.<ext>`` is the file of the same stem (``.png``, ``.jpg`` or
``.jpeg``) or ``<stem>x<s>.png`` (DIV2K) in DIR, exactly ``(H / s) x (W / s)`` for the HR cropped
to a multiple of s. Give ``--lr-dir`` once per HR folder, in the same order. Every pair of every
folder is checked before anything is scored; a missing, ambiguous or wrongly sized LR image is
an error naming the HR image, the names looked for or the sizes, and the fix.

Degraded test sets. ``--degradation NAME --save-lr DIR`` (NAME: ``conf/degradation/<NAME>.yaml``,
``bicubic`` or ``realesrgan``) first writes the LR of every HR image of the folder into DIR
(``<stem>.png``, image i of the folder in name order degraded with ``(--seed, i)``: the same
seed gives the same set), refusing to overwrite any file there, then scores on it as with
``--lr-dir DIR``; ``--save-lr`` once per HR folder. To make a set without a run, use the
``bicubic`` method (``--scale`` s): it writes the set and scores bicubic on it.

NIQE (no reference; lower is better). ``--niqe`` adds the NIQE of the 8-bit SR and bicubic images
(Y, border cropped) beside PSNR and SSIM. ``--real DIR`` (repeatable) upscales LR photos without
HR by the model (as ``upscale.py``) and by bicubic and reports their NIQE; ``--save DIR`` writes
those images as ``DIR/<folder>/<method>/<stem>.png``.

Checkpoint. ``--checkpoint best`` (the default where the run has ``checkpoints/best``: the best
validation PSNR so far), ``last`` (the newest of the rotation, where ``resume=`` continues) or
``ckpt-N`` (``sr.loading.checkpoints.find_checkpoint``). The output names the one scored: a line
above the table, ``"checkpoint_label"`` in every folder of ``results.json`` (``"checkpoint"``
stays its path) and a ``checkpoint`` column in ``results.csv``: ``best (ckpt-4000)``, ``last
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
import sys
from pathlib import Path

import sr.config  # registers the ${sr_root:} resolver of saved run configs; no TensorFlow
from sr.cli import (
    BICUBIC,
    EXIT_REFUSED,
    add_checkpoint_argument,
    add_weights_argument,
    check_source,
    refused,
)
from sr.core.errors import ImageFolderError, RunDirError
from sr.core.quiet import quiet_tensorflow


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="evaluate.py",
        description="PSNR/SSIM on Y (paper protocol) of a trained run or of bicubic, per folder.",
    )
    parser.add_argument("run", help="run directory of train.py, a .pth/.safetensors, or bicubic")
    parser.add_argument("folders", nargs="*", help="folders of HR images (PNG/JPEG)")
    add_checkpoint_argument(parser)
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
    parser.add_argument(
        "--rgb",
        action="store_true",
        help="bicubic: report RGB PSNR too (an RGB run always does)",
    )
    parser.add_argument(
        "--lr-dir",
        action="append",
        metavar="DIR",
        help="score on the LR images of DIR (<stem>.png/.jpg/.jpeg or <stem>x<s>.png) instead of "
        "making them; once per HR folder, in order",
    )
    parser.add_argument(
        "--degradation",
        metavar="NAME",
        help="make the LR of every HR image with this degradation (bicubic, realesrgan) into "
        "--save-lr, then score on it",
    )
    parser.add_argument("--seed", type=int, help="seed of --degradation (default 0)")
    parser.add_argument(
        "--save-lr",
        action="append",
        metavar="DIR",
        help="new folder for the LR set of --degradation; once per HR folder, in order",
    )
    parser.add_argument("--niqe", action="store_true", help="NIQE beside PSNR and SSIM")
    parser.add_argument("--real", action="append", metavar="DIR", help="LR photos, no HR: NIQE")
    parser.add_argument("--save", metavar="DIR", help="write the --real outputs there (PNG)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def load_method(args: argparse.Namespace) -> dict:
    """The method scored: ``{"model", "scale", "step", "checkpoint", "label", "chosen",
    "window", "out", "tb_dir"}`` (``model`` None for bicubic).

    Raises:
        RunDirError, ValueError: for a bad run or arguments (naming the fix).
    """
    from sr.evaluation import input_channels
    from sr.inference import run_window
    from sr.loading.models import load_model, model_label, source_checkpoint, source_home

    if args.run == BICUBIC:
        model, scale, step, checkpoint, chosen = None, args.scale, 0, None, None
        window = (1, 1, 0) if args.sequences else None
        out = Path(args.out or f"outputs/bicubic_x{scale}")
        tb_dir = out / "tb"
    else:
        run = Path(args.run)
        model, cfg, step = load_model(run, args.checkpoint, args.weights, say=print)
        checkpoint, chosen = source_checkpoint(run, args.checkpoint), model.sr_checkpoint
        scale = int(cfg.data.scale)
        if args.scale and args.scale != scale:
            raise ValueError(
                f"run {run} was trained at x{scale}; --scale {args.scale} applies to bicubic "
                "only (drop it, or evaluate a run of that scale)"
            )
        if args.rgb and input_channels(model) == 1:
            raise ValueError(
                f"run {run} is a Y-channel model, with no RGB output: --rgb applies to bicubic "
                "(an RGB run reports RGB PSNR always); drop it"
            )
        home = source_home(run)  # the run folder, or outputs/<stem> for a weight file
        out = Path(args.out) if args.out else home
        tb_dir = (run if home == run else out) / "tb"
        window = run_window(cfg) or ((1, 1, 0) if args.sequences else None)
    label = BICUBIC if model is None else model_label(model)
    return dict(model=model, scale=scale, step=step, checkpoint=checkpoint, label=label,
                chosen=chosen, window=window, out=out, tb_dir=tb_dir)  # fmt: skip


def check_args(args: argparse.Namespace) -> None:
    """The checks that need no TensorFlow: the method (bicubic's flags, or the run or weight
    file), the folders, the flags of the LR sets.

    Raises:
        ValueError (RunDirError, WeightFileError): naming the flag or path and the fix.
    """
    if args.run == BICUBIC:
        if args.checkpoint or args.weights != "auto":
            raise ValueError("--checkpoint and --weights apply to a run directory, not to bicubic")
        if not args.scale:
            raise ValueError("bicubic needs --scale (2, 3, 4, ...)")
    else:
        check_source(args.run, args.checkpoint, args.weights)
    if not (args.folders or args.real) or (args.save and not args.real):
        raise ValueError("give folders of HR images or --real DIR (--save needs --real)")
    if args.degradation is None:
        if args.save_lr or args.seed is not None:
            raise ValueError("--save-lr and --seed apply to --degradation NAME: add it")
        return
    if args.lr_dir:
        raise ValueError(
            "--lr-dir scores an existing LR set and --degradation makes one: give one of them"
        )
    if len(args.save_lr or ()) != len(args.folders):
        raise ValueError(
            f"--degradation needs --save-lr DIR once per HR folder ({len(args.folders)}, in "
            "order): the degraded LR set is written there, then scored"
        )
    if len({Path(d).expanduser().resolve() for d in args.save_lr}) != len(args.save_lr):
        raise ValueError("--save-lr folders must differ: give one new folder per HR folder")


def lr_folders(args: argparse.Namespace, scale: int) -> list[str] | None:
    """The LR folders to score on (None: LR made by the protocol); with ``--degradation`` the
    sets are written first (every folder checked before any is written; the flags are checked
    by :func:`check_args`).

    Raises:
        ValueError, ConfigError: for an unknown degradation, an LR folder that would be
            overwritten (nothing is written).
    """
    from sr.results import check_lr_set, save_lr_set

    if args.degradation is None:
        return args.lr_dir
    degradation = sr.config.degradation_named(args.degradation)
    for folder, out in zip(args.folders, args.save_lr):
        check_lr_set(folder, out, scale)
    seed = 0 if args.seed is None else args.seed
    for folder, out in zip(args.folders, args.save_lr):
        save_lr_set(degradation, folder, out, scale, seed, progress=not args.no_progress)
        print(f"wrote the {degradation.name} LR set of {folder} (seed {seed}, x{scale}) to {out}")
    return args.save_lr


def main(argv=None) -> int:
    args = parse_args(argv)
    if refused("evaluate.py", check_args, args):
        return EXIT_REFUSED
    quiet_tensorflow()  # the command line is checked: TensorFlow, its INFO lines hidden
    from sr.results import evaluate, write_results, write_tensorboard

    try:
        m = load_method(args)
        if m["window"] is not None and (args.lr_dir or args.degradation or args.real):
            raise ValueError("--lr-dir, --degradation, --real apply to images, not sequences")
        lr_dirs = lr_folders(args, m["scale"])
        results = evaluate(
            m["model"], args.folders, m["scale"], m["label"], m["step"], m["checkpoint"],
            progress=not args.no_progress, sequences=m["window"], lr_dirs=lr_dirs,
            rgb=True if args.rgb else None, with_niqe=args.niqe, real=args.real or (),
            save=args.save,
        )  # fmt: skip
    except (RunDirError, ImageFolderError, ValueError) as e:
        print(f"evaluate.py: error: {e}", file=sys.stderr)
        return EXIT_REFUSED
    for entry in results.values():
        entry["checkpoint_label"] = m["chosen"]
        if args.degradation:
            entry.update(degradation=args.degradation, seed=args.seed or 0)
    json_path, csv_path = write_results(results, m["out"])
    write_tensorboard(results, m["tb_dir"], m["step"])
    report(args, m, results)
    print(f"\nwrote {json_path}, {csv_path}, TensorBoard {m['tb_dir']} (step {m['step']})")
    return 0


def report(args: argparse.Namespace, m: dict, results: dict) -> None:
    """Print the protocol lines and the markdown table."""
    from sr.results import markdown_table

    scale, window = m["scale"], m["window"]
    if m["chosen"] is not None:
        print(f"{m['label']} of {args.run}: checkpoint {m['chosen']}, step {m['step']}")
    print(f"x{scale}, Y channel (BT.601), {scale}-pixel border crop")
    if any("psnr_rgb_bicubic" in r for r in results.values()):
        print(f"RGB PSNR: over R, G and B of the 8-bit output, {scale}-pixel border crop")
    for name, r in results.items():
        if "lr_dir" in r:
            print(f"{name}: scored on the LR images of {r['lr_dir']} (paired by name)")
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


if __name__ == "__main__":
    sys.exit(main())
