"""Upscale your own images with a trained run, a PyTorch weight file, or a TFLite or ONNX export.

    python scripts/upscale.py <run dir> <input image or folder> <output path or folder>
        [--checkpoint best|last|ckpt-N] [--weights auto|ema|live] [--tile 256] [--overlap N]
    python scripts/upscale.py RealESRGAN_x4plus.pth <input> <output> [--tile 256]
    python scripts/upscale.py <export folder> <input> <output> --backend tflite|onnx

A ``.pth`` or ``.safetensors`` file in place of the run is read as PyTorch weights
(``sr.loading.models``, docs/pytorch.md): its architecture, hyperparameters and parameter
count are printed, and it runs on R, G and B as an RGB run does.

``--backend keras`` (the default) runs the run's checkpoint; ``--backend tflite`` or ``onnx``
runs an export folder of ``scripts/export.py --format tflite|onnx`` with the LiteRT interpreter
or ONNX Runtime (``sr.deploy.Exported``: a TFLite export runs in windows of its ``--size``,
overlapping by its recorded overlap; a side shorter than a window runs at its own length). The
colour handling, tiles and outputs below are the same for every backend.

Y (BT.601) goes through the model, Cb, Cr and alpha are upscaled by bicubic (an RGB run: R, G, B
through the model, see ``sr.inference``); the output has exactly ``scale`` times the input's width
and height (17x23 gives 68x92 at x4). Gray, gray + alpha, RGB and RGBA images keep their mode;
palette images come out RGB (RGBA when transparent), 16-bit gray comes out 8-bit gray, CMYK comes
out RGB. The EXIF orientation is applied (a portrait phone photo comes out upright). The output
format follows the output's suffix (a folder keeps each input's file name). On a folder, images
that cannot be read (corrupt, or larger than ``SR_MAX_IMAGE_PIXELS``, see ``sr.core.images``) are
listed at the end (exit code 1); the others are still written. The last line names the weights,
step and checkpoint (``--checkpoint``) used.

Images larger than ``--tile`` input pixels are processed in overlapping tiles, so memory stays
bounded; the overlap defaults to the model's receptive field, which makes the tiled result equal
to the untiled one (up to float rounding).

Sequence runs (``data=sequence``, whose config has ``data.frames``): the input is a folder of
LR sequences (one subfolder of frames per sequence; written to ``<output>/<sequence>/<frame
name>``) or a single sequence, a folder of frames without subfolders (written to
``<output>/<frame name>``, as a folder of images is). Frames are ordered by natural name order
(``frame2`` before ``frame10``), as in training. Every frame t is upscaled from its window of the
run's ``data.frames`` frames at ``data.frame_stride`` with the run's ``data.target_frame``
(``sr.core.frames.window_frames``: at the ends of a sequence the first or last frame stands in
for the missing neighbours): Y of the k frames goes through the model, Cb, Cr and alpha of frame
t by bicubic, in the same tiles for all k frames. Only the frames of the current windows are held.
A single image is refused by a multi-frame run (a run with ``data.frames=1`` upscales it as a
single-image run does). A frame that cannot be read fails with every frame whose window needs it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import sr.config  # noqa: F401  (registers the ${sr_root:} resolver of run configs; no TensorFlow)
from sr.cli import (
    DEFAULT_TILE,
    EXIT_REFUSED,
    add_checkpoint_argument,
    add_weights_argument,
    check_input,
    check_source,
    export_record_path,
    refused,
)
from sr.core.errors import ImageFolderError, RunDirError
from sr.core.quiet import quiet_tensorflow
from sr.core.runfiles import load_run_config
from sr.core.weightfiles import is_weight_file

BACKENDS = ("keras", "tflite", "onnx")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="upscale.py", description="Upscale images by a run.")
    parser.add_argument(
        "run",
        help="run directory of train.py, or a PyTorch weight file (.pth, .safetensors); with "
        "--backend tflite|onnx an export folder",
    )
    parser.add_argument(
        "input",
        help="an image, or a folder of PNG/JPEG images; for a data=sequence run a folder of "
        "sequence subfolders, or one folder of frames",
    )
    parser.add_argument("output", help="output image path, or folder (created)")
    add_checkpoint_argument(parser)
    add_weights_argument(parser)
    parser.add_argument(
        "--tile",
        type=int,
        default=DEFAULT_TILE,
        help=f"tile side in input pixels, 0 for none (default {DEFAULT_TILE})",
    )
    parser.add_argument(
        "--overlap", type=int, help="tile overlap in input pixels (default: receptive field + 2)"
    )
    parser.add_argument(
        "--backend",
        default="keras",
        choices=BACKENDS,
        help="keras: the run's checkpoint; tflite, onnx: an export of scripts/export.py run by "
        "LiteRT or ONNX Runtime",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    """The checks that need no TensorFlow, in the order loading checks them: ``--tile``, the
    run folder, weight file or export folder, the input.

    Raises:
        ValueError (RunDirError, ImageFolderError, WeightFileError): naming the value or path.
    """
    if args.tile < 0:
        raise ValueError(f"--tile must be a positive number of pixels or 0, got {args.tile}")
    source = Path(args.input).expanduser()
    if args.backend != "keras":
        check_input(source, sequences=False)
        export_record_path(args.run)
    elif is_weight_file(args.run):
        check_input(source, sequences=False)
        check_source(args.run, args.checkpoint, args.weights)
    else:  # a multi-frame run reads a folder of frames or of sequences
        check_input(source, sequences=check_source(args.run, args.checkpoint, args.weights) > 1)


def main(argv=None) -> int:
    args = parse_args(argv)
    if refused("upscale.py", check_args, args):
        return EXIT_REFUSED
    quiet_tensorflow()  # the command line is checked: TensorFlow, its INFO lines hidden
    from sr.deploy import MissingExtraError
    from sr.inference import SequenceUpscaler, Upscaler, run_window
    from sr.loading.models import load_model, load_model_from_run, model_label
    from sr.upscaling import plan, plan_sequences, upscale_sequences

    try:
        into_folder = args.output.endswith(("/", os.sep))
        source, target = Path(args.input).expanduser(), Path(args.output).expanduser()
        if args.backend != "keras":
            return upscale_exported(args, plan(source, target, into_folder))
        window = None if is_weight_file(args.run) else run_window(load_run_config(args.run))
        if window is not None and (window[0] > 1 or source.is_dir()):
            jobs = plan_sequences(source, target)
            model, cfg, step = load_model_from_run(args.run, args.checkpoint, args.weights)
            frames, stride, index = window
            upscaler = SequenceUpscaler(model, int(cfg.data.scale), frames, overlap=args.overlap)
        else:
            pairs = plan(source, target, into_folder)
            model, cfg, step = load_model(args.run, args.checkpoint, args.weights, say=print)
            upscaler = Upscaler(model, int(cfg.data.scale), overlap=args.overlap)
    except (RunDirError, ImageFolderError, ValueError, MissingExtraError) as e:
        print(f"upscale.py: error: {e}", file=sys.stderr)
        return EXIT_REFUSED
    if window is not None and isinstance(upscaler, SequenceUpscaler):
        failures = upscale_sequences(
            upscaler, jobs, stride, index, args.tile, progress=not args.no_progress
        )
        total = sum(len(files) for _, files, _ in jobs)
        print(
            f"upscaled {total - len(failures)} of {total} frame(s) of {len(jobs)} sequence(s) "
            f"x{upscaler.scale} with {model_label(model)} (step {step}) of checkpoint "
            f"{model.sr_checkpoint} (window of {frames} frame(s) at stride {stride}, target "
            f"index {index}) into {args.output}"
        )
        if failures:
            print(
                f"upscale.py: error: failed on {len(failures)} frame(s):\n  "
                + "\n  ".join(failures),
                file=sys.stderr,
            )
            return 1
        return 0
    what = f"{model_label(model)} (step {step}) of checkpoint {model.sr_checkpoint}"
    if is_weight_file(args.run):
        what = f"{model.name} of the weight file {args.run}"
    return report(upscaler, pairs, args, what)


def upscale_exported(args: argparse.Namespace, pairs) -> int:
    """Upscale ``pairs`` with the export folder ``args.run`` through ``args.backend``.

    Raises:
        ValueError: for a folder that is not an export, or whose format is not the backend.
    """
    from sr.deploy import Exported
    from sr.inference import Upscaler

    model = Exported(args.run)
    if model.record["format"] != args.backend:
        raise ValueError(
            f"{args.run} is a {model.record['format']} export: use --backend "
            f"{model.record['format']}, or export the run with --format {args.backend}"
        )
    upscaler = Upscaler(model, model.scale, overlap=args.overlap or model.overlap)
    src = model.record.get("source", {})
    what = f"{args.backend} export {args.run} ({src.get('weights', '?')}, step {src.get('step')})"
    return report(upscaler, pairs, args, what)


def report(upscaler, pairs, args: argparse.Namespace, what: str) -> int:
    """Upscale ``pairs``, print the summary line and the failures; the exit code."""
    from sr.upscaling import upscale_files

    failures = upscale_files(upscaler, pairs, args.tile, progress=not args.no_progress)
    done = len(pairs) - len(failures)
    print(
        f"upscaled {done} of {len(pairs)} image(s) x{upscaler.scale} with {what} "
        f"into {args.output}"
    )
    if failures:
        print(
            f"upscale.py: error: failed on {len(failures)} image(s):\n  " + "\n  ".join(failures),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
