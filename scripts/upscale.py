"""Upscale your own images with a trained run.

    python scripts/upscale.py <run dir> <input image or folder> <output path or folder>
        [--checkpoint ckpt-N] [--tile 256] [--overlap N]

Y (BT.601) goes through the model, Cb, Cr and alpha are upscaled by bicubic; the output has
exactly ``scale`` times the input's width and height (17x23 gives 68x92 at x4). Gray, gray + alpha,
RGB and RGBA images keep their mode; palette images come out RGB (RGBA when transparent), 16-bit
gray comes out 8-bit gray, CMYK comes out RGB. The EXIF orientation is applied (a portrait phone
photo comes out upright). The output format follows the output's suffix (a folder keeps each
input's file name). On a folder, images that cannot be read (corrupt, or larger than
``SR_MAX_IMAGE_PIXELS``, see ``sr.data.images``) are listed at the end (exit code 1); the others
are still written.

Images larger than ``--tile`` input pixels are processed in overlapping tiles, so memory stays
bounded; the overlap defaults to the model's receptive field, which makes the tiled result equal
to the untiled one (up to float rounding).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from PIL import Image  # noqa: E402
from tqdm import tqdm  # noqa: E402

import sr.config  # noqa: E402,F401  (registers the ${sr_root:} resolver of saved run configs)
from sr.data.images import ImageFolderError, list_images  # noqa: E402
from sr.inference import Upscaler, read_image, write_image  # noqa: E402
from sr.train.checkpoint import RunDirError, load_model_from_run  # noqa: E402

DEFAULT_TILE = 256


def _check_suffix(path: Path) -> None:
    if path.suffix.lower() not in Image.registered_extensions():
        raise ValueError(
            f"output {path} has no image suffix: name it .png (lossless, keeps alpha) or .jpg"
        )


def plan(source: Path, target: Path, into_folder: bool = False) -> list[tuple[Path, Path]]:
    """``(input file, output file)`` pairs for an image or a folder of images.

    A single image is written to ``target``, or into it when ``target`` is an existing folder or
    ``into_folder`` is set (an output given with a trailing slash).

    Raises:
        ImageFolderError: for a missing input or an input folder without PNG/JPEG files.
        ValueError: for an output that would overwrite the input, a folder written into a file,
            or an output path without an image suffix.
    """
    if source.is_dir():
        if target.exists() and not target.is_dir():
            raise ValueError(f"input {source} is a folder, so the output {target} must be one too")
        if target.resolve() == source.resolve():
            raise ValueError(f"output folder {target} is the input folder: pick another")
        return [(p, target / p.name) for p in list_images(source)]
    if not source.is_file():
        raise ImageFolderError(f"input {source} does not exist: give an image or a folder")
    out = target / source.name if into_folder or target.is_dir() else target
    if out.resolve() == source.resolve():
        raise ValueError(f"output {out} would overwrite the input: pick another path")
    _check_suffix(out)
    return [(source, out)]


def upscale_files(upscaler: Upscaler, pairs, tile: int, progress: bool = True) -> list[str]:
    """Upscale each ``(input, output)`` pair; returns ``"<file>: <reason>"`` for every failure
    (the others are still written). Failures: ``ImageFolderError`` (undecodable, or above
    ``sr.data.images.MAX_PIXELS``), ``ValueError`` (too small, alpha into JPEG), ``OSError``."""
    failures = []
    bar = tqdm(pairs, unit="img", disable=not progress or len(pairs) < 2)
    for src, dst in bar:
        bar.set_postfix_str(src.name)
        try:
            write_image(upscaler(read_image(src), tile=tile), dst)
        except (ImageFolderError, ValueError, OSError) as e:
            failures.append(f"{src}: {e}")
    return failures


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="upscale.py", description="Upscale images (Y by the model, chroma and alpha bicubic)."
    )
    parser.add_argument("run", help="run directory of train.py (outputs/DATE/TIME)")
    parser.add_argument("input", help="an image, or a folder of PNG/JPEG images")
    parser.add_argument("output", help="output image path, or folder (created)")
    parser.add_argument("--checkpoint", help="ckpt-N in <run>/checkpoints (default: the latest)")
    parser.add_argument(
        "--tile",
        type=int,
        default=DEFAULT_TILE,
        help=f"tile side in input pixels, 0 for none (default {DEFAULT_TILE})",
    )
    parser.add_argument(
        "--overlap", type=int, help="tile overlap in input pixels (default: receptive field + 2)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.tile < 0:
            raise ValueError(
                f"--tile must be a positive number of pixels or 0 (off), got {args.tile}"
            )
        into_folder = args.output.endswith(("/", os.sep))
        pairs = plan(Path(args.input).expanduser(), Path(args.output).expanduser(), into_folder)
        model, cfg, step = load_model_from_run(args.run, args.checkpoint)
        upscaler = Upscaler(model, int(cfg.data.scale), overlap=args.overlap)
    except (RunDirError, ImageFolderError, ValueError) as e:
        print(f"upscale.py: error: {e}", file=sys.stderr)
        return 2
    failures = upscale_files(upscaler, pairs, args.tile, progress=not args.no_progress)
    done = len(pairs) - len(failures)
    print(
        f"upscaled {done} of {len(pairs)} image(s) x{upscaler.scale} with {model.name} "
        f"(step {step}) into {args.output}"
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
