"""What ``scripts/upscale.py`` does with files: which input goes to which output (an image, a
folder of images, a folder of sequences), and the loops that upscale them and collect failures
without stopping. The upscaling itself is ``sr.inference`` (``Upscaler``, ``SequenceUpscaler``)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image
from tqdm import tqdm

from sr.cli import DEFAULT_TILE, check_input  # noqa: F401  (DEFAULT_TILE: upscale.py --tile)
from sr.core.images import IMAGE_SUFFIXES, ImageFolderError, list_images
from sr.inference import SequenceUpscaler, Upscaler, read_image, write_image


def check_suffix(path: Path) -> None:
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
    check_input(source, sequences=False)
    out = target / source.name if into_folder or target.is_dir() else target
    if out.resolve() == source.resolve():
        raise ValueError(f"output {out} would overwrite the input: pick another path")
    check_suffix(out)
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


def frames_in(folder: Path) -> list[Path]:
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

    check_input(source, sequences=True)
    if target.exists() and not target.is_dir():
        raise ValueError(f"input {source} is a folder, so the output {target} must be one too")
    if target.resolve() == source.resolve():
        raise ValueError(f"output folder {target} is the input folder: pick another")
    subfolders = [
        sub
        for sub in source.iterdir()
        if sub.is_dir() and not sub.name.startswith(".") and frames_in(sub)
    ]
    if subfolders:
        seqs = list_sequences(source, key="input")
        return [(q.name, list(q.files), [target / q.name / p.name for p in q.files]) for q in seqs]
    files = frames_in(source)
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
