"""The demo datasets: real photographs bundled inside scikit-image, so that ``python train.py``
runs on a fresh machine with no download.

Single images (:func:`ensure_demo`): written once into ``<root>/train`` and ``<root>/val`` as PNG;
colour and grayscale photographs, from 172x448 to 1411x1411 pixels. The validation images are not
in the training set.

Sequences (:func:`ensure_demo_sequences`, for ``data=sequence``): handheld-burst-like sequences
written once into ``<root>/sequences/train/<name>/frame_000.png, ...`` and
``<root>/sequences/val/<name>/...``, made by sliding a camera window with smooth sub-pixel motion
across a photograph. The photograph is the "world"; each HR frame is the 2x2 box mean (integer,
rounded half up) of a world crop at an integer world offset, so there is no interpolation blur and
consecutive HR frames are shifted by multiples of 0.5 HR pixel (0.125 LR pixel at x4): 0.5 to
3.2 HR px a frame, mean 1.5, a smooth random walk of seed ``SEQUENCE_SEED``. Training: 14
sequences of 16 to 24 frames, 160x160 (128x128 for coins and clock), from the photographs of
``TRAIN`` large enough; validation: 3 sequences of 8 frames from ``VAL`` (chelsea 128x128, coffee
and camera 160x160). About 10 MB. The true camera path of every sequence is
:func:`demo_sequence_paths` (no file is read or written).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

import numpy as np
import skimage.data
from PIL import Image

log = logging.getLogger(__name__)

TRAIN = (
    "astronaut",
    "hubble_deep_field",
    "immunohistochemistry",
    "stereo_motorcycle",
    "retina",
    "rocket",
    "brick",
    "grass",
    "gravel",
    "coins",
    "moon",
    "cell",
    "clock",
    "page",
    "text",
)
VAL = ("chelsea", "coffee", "camera")


def _photo(name: str) -> np.ndarray:
    image = getattr(skimage.data, name)()
    if name == "stereo_motorcycle":  # (left, right, disparity): the left view
        image = image[0]
    return np.asarray(image, dtype=np.uint8)


def ensure_demo(root: str | Path) -> Path:
    """Write the demo photographs under ``root`` unless they are all there.

    Returns:
        ``root`` as a Path, holding ``train/*.png`` and ``val/*.png``.
    """
    root = Path(root)
    todo = [
        (split, name)
        for split, names in (("train", TRAIN), ("val", VAL))
        for name in names
        if not (root / split / f"{name}.png").is_file()
    ]
    if todo:
        log.info("writing %d demo photographs from scikit-image into %s", len(todo), root)
    for split, name in todo:
        (root / split).mkdir(parents=True, exist_ok=True)
        tmp = root / split / f".{name}.png.tmp"
        Image.fromarray(_photo(name)).save(tmp, format="PNG")
        tmp.replace(root / split / f"{name}.png")
    return root


# --- sequences -------------------------------------------------------------------------------

SEQUENCE_SEED = 20_240_601
"""Seed of the camera paths: sequence i uses ``np.random.default_rng([SEQUENCE_SEED, i])``."""

SEQUENCES_DIR = "sequences"


class DemoSequence(NamedTuple):
    """One demo sequence.

    Attributes:
        split: ``train`` or ``val``.
        name: subfolder name.
        photo: the scikit-image photograph (the world).
        photo_shape: its ``(height, width)``, checked when it is loaded.
        size: HR frame side (frames are ``size`` x ``size``; the world crop is ``2 size``).
        frames: number of frames.
        start: where the path starts, as a fraction ``(y, x)`` of the room left for the motion.
    """

    split: str
    name: str
    photo: str
    photo_shape: tuple[int, int]
    size: int
    frames: int
    start: tuple[float, float]


# The photographs of TRAIN that hold a 256x256 world crop plus room to move (page and text do
# not; cell, one blurred cell, has too little detail); validation: VAL, no training photograph.
DEMO_SEQUENCES = (
    DemoSequence("train", "astronaut", "astronaut", (512, 512), 160, 20, (0.4, 0.5)),
    DemoSequence("train", "hubble_a", "hubble_deep_field", (872, 1000), 160, 24, (0.2, 0.2)),
    DemoSequence("train", "hubble_b", "hubble_deep_field", (872, 1000), 160, 16, (0.8, 0.75)),
    DemoSequence(
        "train", "immunohistochemistry", "immunohistochemistry", (512, 512), 160, 18, (0.5, 0.5)
    ),
    DemoSequence("train", "motorcycle", "stereo_motorcycle", (500, 741), 160, 22, (0.5, 0.4)),
    DemoSequence("train", "retina_a", "retina", (1411, 1411), 160, 20, (0.35, 0.35)),
    DemoSequence("train", "retina_b", "retina", (1411, 1411), 160, 16, (0.6, 0.62)),
    DemoSequence("train", "rocket", "rocket", (427, 640), 160, 20, (0.9, 0.1)),
    DemoSequence("train", "brick", "brick", (512, 512), 160, 16, (0.5, 0.5)),
    DemoSequence("train", "grass", "grass", (512, 512), 160, 16, (0.5, 0.5)),
    DemoSequence("train", "gravel", "gravel", (512, 512), 160, 16, (0.5, 0.5)),
    DemoSequence("train", "moon", "moon", (512, 512), 160, 16, (0.5, 0.5)),
    DemoSequence("train", "coins", "coins", (303, 384), 128, 16, (0.5, 0.5)),
    DemoSequence("train", "clock", "clock", (300, 400), 128, 16, (0.5, 0.5)),
    DemoSequence("val", "chelsea", "chelsea", (300, 451), 128, 8, (0.5, 0.5)),
    DemoSequence("val", "coffee", "coffee", (400, 600), 160, 8, (0.5, 0.5)),
    DemoSequence("val", "camera", "camera", (512, 512), 160, 8, (0.5, 0.5)),
)

_SPEED = (1.0, 6.0)  # world px per frame (0.5 to 3 HR px), before rounding to integers
_MEAN_SPEED = 3.0


def _world_path(seq: DemoSequence, index: int) -> np.ndarray:
    """Integer world offsets ``[frames, 2]`` (y, x) of the top-left corner of each world crop.

    A smooth random walk: the speed follows a log-normal AR(1) around 3 world px per frame,
    clipped to 1..6; the heading turns by N(0, 0.3 rad) a frame; the path bounces off the edges
    of the room (photo size minus world crop); positions are rounded to integers.
    """
    rng = np.random.default_rng([SEQUENCE_SEED, index])
    room = np.array(seq.photo_shape, np.float64) - 2 * seq.size
    if (room < 0).any():
        raise ValueError(f"{seq.photo} {seq.photo_shape} is smaller than a {2 * seq.size} crop")
    pos = np.array(seq.start) * room
    heading = rng.uniform(0, 2 * np.pi)
    log_speed = np.log(_MEAN_SPEED) + rng.normal(0, 0.3)
    out = [np.rint(pos)]
    for _ in range(seq.frames - 1):
        log_speed = np.log(_MEAN_SPEED) + 0.7 * (log_speed - np.log(_MEAN_SPEED))
        log_speed += rng.normal(0, 0.3)
        heading += rng.normal(0, 0.3)
        speed = float(np.clip(np.exp(log_speed), *_SPEED))
        step = speed * np.array([np.sin(heading), np.cos(heading)])
        pos = pos + step
        for axis in range(2):  # bounce off the edges of the room
            if pos[axis] < 0 or pos[axis] > room[axis]:
                pos[axis] = -pos[axis] if pos[axis] < 0 else 2 * room[axis] - pos[axis]
                pos[axis] = min(max(pos[axis], 0.0), room[axis])
                sin, cos = np.sin(heading), np.cos(heading)
                heading = np.arctan2(-sin, cos) if axis == 0 else np.arctan2(sin, -cos)
        out.append(np.rint(pos))
    return np.array(out, np.int64)


def demo_sequence_paths() -> dict[str, np.ndarray]:
    """The true camera path of every demo sequence, computed without reading or writing files.

    Returns:
        ``{"<split>/<name>": offsets}``: offsets is float64 ``[frames, 2]``, the ``(y, x)``
        position in HR pixels of frame t's top-left corner on the half-resolution world, i.e.
        HR frame t is ``world_hr[y_t + i, x_t + j]``. Offsets are multiples of 0.5, so the content
        of frame t + 1 is frame t's moved by ``-(offsets[t + 1] - offsets[t])``, the shift
        ``skimage.registration.phase_cross_correlation(frame_t, frame_t1)`` returns.
    """
    return {
        f"{seq.split}/{seq.name}": _world_path(seq, i) / 2.0
        for i, seq in enumerate(DEMO_SEQUENCES)
    }


def _reduce2(crop: np.ndarray) -> np.ndarray:
    """2x2 box mean of a uint8 image (H and W even), rounded half up, as uint8."""
    c = crop.astype(np.uint16)
    total = c[0::2, 0::2] + c[0::2, 1::2] + c[1::2, 0::2] + c[1::2, 1::2]
    return ((total + 2) >> 2).astype(np.uint8)


def _frame_file(root: Path, seq: DemoSequence, t: int) -> Path:
    return root / SEQUENCES_DIR / seq.split / seq.name / f"frame_{t:03d}.png"


def ensure_demo_sequences(root: str | Path) -> Path:
    """Write the demo sequences under ``root / "sequences"`` unless they are all there.

    Each sequence is a handheld burst over one scikit-image photograph: HR frame t is the 2x2
    box mean of the ``2 size`` world crop at integer offset ``o_t``, the camera path
    (:func:`demo_sequence_paths`, seed :data:`SEQUENCE_SEED`) a smooth random walk in steps of
    0.5 HR px (0.125 LR px at x4): 0.5 to 3.2 HR px a frame, mean 1.5 (about 0.4 LR px), about
    half of the step components non-integer, so consecutive frames carry different sub-pixel
    information. Colour photographs give RGB frames, grayscale ones gray frames.

    * ``train``: 14 sequences of 16 to 24 frames (252 in all) from the photographs of
      :data:`TRAIN` that are large enough: astronaut, hubble_deep_field (2 sequences),
      immunohistochemistry, stereo_motorcycle (left view), retina (2), rocket, brick, grass,
      gravel, moon at 160x160; coins and clock at 128x128 (page and text are too small, cell is
      one blurred cell on a flat background).
    * ``val``: 3 sequences of 8 frames from :data:`VAL`: chelsea at 128x128, coffee and camera
      at 160x160 (no training photograph).

    About 10 MB. Only missing frames are written, each atomically (a hidden temporary
    file renamed); when every frame is there, nothing is read or written. The pixels are the
    same on every machine; the PNG bytes too for one zlib version (compression level 3).

    Returns:
        ``root / "sequences"``, holding ``train/<name>/frame_000.png, ...`` and ``val/...``.
    """
    root = Path(root)
    todo = [
        (i, seq, [t for t in range(seq.frames) if not _frame_file(root, seq, t).is_file()])
        for i, seq in enumerate(DEMO_SEQUENCES)
    ]
    todo = [item for item in todo if item[2]]
    if todo:
        count = sum(len(missing) for *_, missing in todo)
        log.info("writing %d demo sequence frames from scikit-image into %s", count, root)
    photos: dict[str, np.ndarray] = {}
    for i, seq, missing in todo:
        if seq.photo not in photos:
            photos[seq.photo] = _photo(seq.photo)
        world = photos[seq.photo]
        if world.shape[:2] != seq.photo_shape:
            raise RuntimeError(
                f"scikit-image's {seq.photo} is {world.shape[:2]}, not {seq.photo_shape}"
            )
        path = _world_path(seq, i)
        side = 2 * seq.size
        folder = root / SEQUENCES_DIR / seq.split / seq.name
        folder.mkdir(parents=True, exist_ok=True)
        for t in missing:
            y, x = path[t]
            frame = _reduce2(world[y : y + side, x : x + side])
            target = _frame_file(root, seq, t)
            tmp = folder / f".{target.name}.tmp"
            Image.fromarray(frame).save(tmp, format="PNG", compress_level=3)
            tmp.replace(target)
    return root / SEQUENCES_DIR


def ensure_demo_for(folders, root: str | Path) -> bool:
    """Write the demo data a run reads from ``root``.

    Folders under ``root / "sequences"`` call :func:`ensure_demo_sequences`; other folders under
    ``root`` call :func:`ensure_demo` (the single photographs); folders elsewhere write nothing.

    Args:
        folders: image folders a run will read (None entries are ignored).
        root: the demo dataset's root (``demo_dir`` of the config).

    Returns:
        True if either demo is used (and now complete).
    """
    demo = Path(root).resolve()
    sequences = demo / SEQUENCES_DIR
    under = [Path(f).resolve() for f in folders if f]
    used = False
    if any(f.is_relative_to(sequences) for f in under):
        ensure_demo_sequences(root)
        used = True
    if any(f.is_relative_to(demo) and not f.is_relative_to(sequences) for f in under):
        ensure_demo(root)
        used = True
    return used
