"""Upscale your own images with a trained run.

    python scripts/upscale.py <run dir> <input image or folder> <output path or folder>
        [--checkpoint best|last|ckpt-N] [--weights auto|ema|live] [--tile 256] [--overlap N]

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

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from PIL import Image  # noqa: E402
from tqdm import tqdm  # noqa: E402

import sr.config  # noqa: E402,F401  (registers the ${sr_root:} resolver of saved run configs)
from sr.core.images import IMAGE_SUFFIXES, ImageFolderError, list_images  # noqa: E402
from sr.inference import (  # noqa: E402
    SequenceUpscaler,
    Upscaler,
    read_image,
    run_window,
    write_image,
)
from sr.train.checkpoint import (  # noqa: E402
    RunDirError,
    add_weights_argument,
    load_model_from_run,
    load_run_config,
    model_label,
)

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
    ``sr.core.images.MAX_PIXELS``), ``ValueError`` (too small, alpha into JPEG), ``OSError``."""
    failures = []
    bar = tqdm(pairs, unit="img", disable=not progress or len(pairs) < 2)
    for src, dst in bar:
        bar.set_postfix_str(src.name)
        try:
            write_image(upscaler(read_image(src), tile=tile), dst)
        except (ImageFolderError, ValueError, OSError) as e:
            failures.append(f"{src}: {e}")
    return failures


def _frames_in(folder: Path) -> list[Path]:
    from sr.core.frames import natural_key

    files = [p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
    return sorted(files, key=lambda p: natural_key(p.name))


def plan_sequences(source: Path, target: Path) -> list[tuple[str, list[Path], list[Path]]]:
    """``(sequence name, input frames, output files)`` of a folder of sequences or of frames.

    A folder with subfolders of frames is a folder of sequences (``sr.core.frames.
    list_sequences``: natural order, images beside the subfolders warned about and not used):
    frame ``f`` of sequence ``q`` goes to ``target/q/f``. A folder of frames without such
    subfolders is one sequence: frame ``f`` goes to ``target/f``.

    Raises:
        ImageFolderError: for a missing input, a file, or a folder without frames.
        ValueError: for an output that is a file or the input folder.
    """
    from sr.core.frames import list_sequences

    if not source.is_dir():
        what = "is a file" if source.exists() else "does not exist"
        raise ImageFolderError(
            f"input {source} {what}: a multi-frame run upscales sequences; give a folder of "
            "frames (one sequence) or a folder with one subfolder of frames per sequence"
        )
    if target.exists() and not target.is_dir():
        raise ValueError(f"input {source} is a folder, so the output {target} must be one too")
    if target.resolve() == source.resolve():
        raise ValueError(f"output folder {target} is the input folder: pick another")
    subfolders = [
        sub
        for sub in source.iterdir()
        if sub.is_dir() and not sub.name.startswith(".") and _frames_in(sub)
    ]
    if subfolders:
        seqs = list_sequences(source, key="input")
        return [(q.name, list(q.files), [target / q.name / p.name for p in q.files]) for q in seqs]
    files = _frames_in(source)
    if not files:
        raise ImageFolderError(
            f"input {source} holds no PNG or JPEG frame and no subfolder of frames: give a "
            "folder of frames (one sequence) or a folder with one subfolder per sequence"
        )
    return [(source.name, files, [target / p.name for p in files])]


def upscale_sequences(
    upscaler: SequenceUpscaler, jobs, stride: int, target: int, tile: int, progress: bool = True
) -> list[str]:
    """Upscale every frame of each ``(name, frames, outputs)`` of :func:`plan_sequences` from
    its window (``sr.core.frames.window_frames`` with ``upscaler.frames``, ``stride`` and
    ``target``), holding only the frames of the current windows. Returns ``"<file>: <reason>"``
    for every frame that failed (the others are still written): its own or a neighbour's
    ``ImageFolderError`` (undecodable, too large), a ``ValueError`` (too small, frames of
    different sizes, alpha into JPEG) or an ``OSError``."""
    from sr.core.frames import check_same_size, window_frames

    failures, k = [], upscaler.frames
    total = sum(len(files) for _, files, _ in jobs)
    bar = tqdm(total=total, unit="frame", disable=not progress or total < 2)
    for name, files, outputs in jobs:
        n, cache = len(files), {}
        for t in range(n):
            bar.set_postfix_str(f"{name}/{files[t].name}")
            window = window_frames(t, n, k, stride, target)
            try:
                for i in window:
                    if i not in cache:
                        try:
                            image = read_image(files[i])
                            cache[i] = (image, upscaler.luma(image))
                        except (ImageFolderError, ValueError, OSError) as e:
                            cache[i] = e
                if isinstance(cache[t], Exception):
                    raise cache[t]
                for i in window:
                    if isinstance(cache[i], Exception):
                        raise ValueError(f"frame {files[i].name} of its window: {cache[i]}")
                image = cache[t][0]
                for i in window:
                    check_same_size(
                        f"sequence {name}",
                        files[t].name,
                        image.shape,
                        files[i].name,
                        cache[i][0].shape,
                    )
                lumas = [cache[i][1] for i in window]
                write_image(upscaler.window(lumas, image, tile=tile), outputs[t])
            except (ImageFolderError, ValueError, OSError) as e:
                failures.append(f"{files[t]}: {e}")
            if t + 1 < n:  # windows only move forward: drop what no later window reads
                first = min(window_frames(t + 1, n, k, stride, target))
                for i in [i for i in cache if i < first]:
                    del cache[i]
            bar.update()
    bar.close()
    return failures


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="upscale.py", description="Upscale images by a run.")
    parser.add_argument("run", help="run directory of train.py (outputs/DATE/TIME)")
    parser.add_argument(
        "input",
        help="an image, or a folder of PNG/JPEG images; for a data=sequence run a folder of "
        "sequence subfolders, or one folder of frames",
    )
    parser.add_argument("output", help="output image path, or folder (created)")
    parser.add_argument(
        "--checkpoint",
        help="best (default where the run has one: the best validation PSNR), last (the newest "
        "checkpoint, where resume= continues), or ckpt-N",
    )
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
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.tile < 0:
            raise ValueError(f"--tile must be a positive number of pixels or 0, got {args.tile}")
        into_folder = args.output.endswith(("/", os.sep))
        source, target = Path(args.input).expanduser(), Path(args.output).expanduser()
        window = run_window(load_run_config(args.run))
        if window is not None and (window[0] > 1 or source.is_dir()):
            jobs = plan_sequences(source, target)
            model, cfg, step = load_model_from_run(args.run, args.checkpoint, args.weights)
            frames, stride, index = window
            upscaler = SequenceUpscaler(model, int(cfg.data.scale), frames, overlap=args.overlap)
        else:
            pairs = plan(source, target, into_folder)
            model, cfg, step = load_model_from_run(args.run, args.checkpoint, args.weights)
            upscaler = Upscaler(model, int(cfg.data.scale), overlap=args.overlap)
    except (RunDirError, ImageFolderError, ValueError) as e:
        print(f"upscale.py: error: {e}", file=sys.stderr)
        return 2
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
    failures = upscale_files(upscaler, pairs, args.tile, progress=not args.no_progress)
    done = len(pairs) - len(failures)
    print(
        f"upscaled {done} of {len(pairs)} image(s) x{upscaler.scale} with {model_label(model)} "
        f"(step {step}) of checkpoint {model.sr_checkpoint} into {args.output}"
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
