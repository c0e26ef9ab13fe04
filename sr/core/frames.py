"""Sequences of frames on disk, and windows of consecutive frames: the one owner of how a
sequence folder is listed (natural name order), of the one-size rule for its frames, of
``data.target_frame`` and of which frames a window holds. Used by the sequence data source, the
evaluation protocol, inference and the models that take k frames.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from sr.core.images import IMAGE_SUFFIXES, ImageFolderError, image_size
from sr.core.target_frame import TARGETS, target_index  # noqa: F401  (sequences use them)

log = logging.getLogger(__name__)


def natural_key(name: str) -> tuple:
    """Sort key of natural order: digit runs compare as numbers (``frame2`` < ``frame10``)."""
    parts = re.split(r"(\d+)", name)  # str, digits, str, ...: ints and strs never compared
    return tuple(int(part) if part.isdigit() else part.lower() for part in parts)


@dataclass(frozen=True)
class SequenceFolder:
    """One sequence: a subfolder and its frames in natural name order."""

    name: str
    files: tuple[Path, ...]


def list_sequences(folder: str | Path, key: str = "data.hr_dir") -> list[SequenceFolder]:
    """The sequences of ``folder``: every subfolder holding PNG or JPEG frames, in natural order,
    its frames in natural order. Hidden subfolders are ignored; subfolders without images, and
    images lying directly in ``folder``, are named in one warning each and not used.

    Args:
        folder: a folder of sequence subfolders.
        key: the config key named in errors (``data.hr_dir``, ``data.val_dir``).

    Raises:
        ImageFolderError: if ``folder`` is missing or a file, or holds no subfolder with images
            (the message says which layout is expected).
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise ImageFolderError(
            f"sequence folder {folder} {what}: set {key} to a folder with one subfolder per "
            "sequence (clip_001/frame_0001.png, ...), or run without overrides for the demo"
        )
    entries = sorted(folder.iterdir(), key=lambda p: natural_key(p.name))
    loose = [p.name for p in entries if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
    sequences, empty = [], []
    for sub in entries:
        if not sub.is_dir() or sub.name.startswith("."):
            continue
        files = sorted(
            (p for p in sub.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES),
            key=lambda p: natural_key(p.name),
        )
        (sequences.append(SequenceFolder(sub.name, tuple(files))) if files else empty.append(sub))
    if not sequences:
        found = f"holds {len(loose)} loose image(s) and" if loose else "holds"
        raise ImageFolderError(
            f"{key}={folder} {found} no subfolder of images: data=sequence expects one "
            f"subfolder per sequence (a clip, a burst, a day), frames ordered by file name, e.g. "
            f"{folder}/clip_001/frame_0001.png, {folder}/clip_001/frame_0002.png, ...; move the "
            "frames into subfolders, or use data=generator for single images"
        )
    if loose:
        log.warning(
            "%s: %d image(s) directly in %s are not in a sequence subfolder and are not used: %s",
            key,
            len(loose),
            folder,
            ", ".join(loose[:10]) + (", ..." if len(loose) > 10 else ""),
        )
    if empty:
        log.warning(
            "%s: %d subfolder(s) of %s hold no PNG or JPEG frame and are not used: %s",
            key,
            len(empty),
            folder,
            ", ".join(p.name for p in empty),
        )
    return sequences


def sequence_size(seq: SequenceFolder, folder: Path) -> tuple[int, int]:
    """``(height, width)`` of a sequence's frames, from every frame's header.

    Raises:
        ImageFolderError: if a frame's header is unreadable (names it) or the frames differ in
            size (names the first frame's size and every frame that differs).
    """
    sizes = [image_size(p) for p in seq.files]
    first = sizes[0]
    odd = [f"{p.name} ({w}x{h})" for p, (h, w) in zip(seq.files, sizes) if (h, w) != first]
    if odd:
        raise ImageFolderError(
            f"sequence {folder / seq.name}: frames differ in size; {seq.files[0].name} is "
            f"{first[1]}x{first[0]} but {len(odd)} frame(s) are not: {', '.join(odd[:10])}"
            f"{', ...' if len(odd) > 10 else ''}. The frames of a sequence must share one "
            "size: resize or crop them alike, or move the odd ones into a sequence of their own"
        )
    return first


def check_same_size(where: str, first: str, first_shape, other: str, other_shape) -> None:
    """The one-size rule for two decoded frames of a sequence (or window): ``first`` and
    ``other`` name them, ``first_shape`` and ``other_shape`` are their array shapes (``[h, w,
    ...]``, only ``h, w`` compared); ``where`` names the sequence or window.

    Raises:
        ImageFolderError: a ``ValueError`` naming both frames and their sizes, if they differ.
    """
    (h, w), (oh, ow) = tuple(first_shape[:2]), tuple(other_shape[:2])
    if (h, w) != (oh, ow):
        raise ImageFolderError(
            f"{where}: frames differ in size; {first} is {w}x{h} but {other} is {ow}x{oh}: "
            "the frames of a sequence must share one size"
        )


def window_frames(t: int, n: int, frames: int, stride: int, target: int) -> list[int]:
    """Frame indices of the window whose target is frame ``t`` of a sequence of ``n`` frames, at
    evaluation and inference: ``t + (j - target) stride`` for j in 0..k-1, each clamped to
    ``[0, n - 1]`` (a border frame stands in for the frames before the first or after the last,
    so every frame of a sequence is scored and upscaled)."""
    return [min(max(t + (j - target) * stride, 0), n - 1) for j in range(frames)]
