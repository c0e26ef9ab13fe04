"""The demo dataset: real photographs bundled inside scikit-image, so that ``python train.py``
runs on a fresh machine with no download.

Written once into ``<root>/train`` and ``<root>/val`` as PNG; colour and grayscale photographs,
from 172x448 to 1411x1411 pixels. The validation images are not in the training set.
"""

from __future__ import annotations

import logging
from pathlib import Path

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


def ensure_demo_for(folders, root: str | Path) -> bool:
    """Write the demo photographs (:func:`ensure_demo`) if any of ``folders`` lies under ``root``.

    Args:
        folders: image folders a run will read (None entries are ignored).
        root: the demo dataset's root (``demo_dir`` of the config).

    Returns:
        True if the demo is used (and now complete).
    """
    demo = Path(root).resolve()
    if any(f and Path(f).resolve().is_relative_to(demo) for f in folders):
        ensure_demo(root)
        return True
    return False
