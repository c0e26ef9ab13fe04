"""Image folders for the benchmarks: the shared sample re-encoded as PNG (DIV2K-like decode
cost) and the project's Hydra config composed exactly as ``train.py`` composes it."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PIL import Image

from sr.config import PROJECT_ROOT, compose

SHARED_SAMPLE = PROJECT_ROOT.parent / "shared" / "datasets" / "hr_sample"


def reencode_png(src: str | os.PathLike, dst: str | os.PathLike, workers: int = 2) -> Path:
    """Write every PNG/JPEG of ``src`` as an RGB PNG (zlib level 6) into ``dst`` (kept if already
    complete). Returns ``dst``.

    Raises:
        FileNotFoundError: if ``src`` holds no image (names the folder).
    """
    from sr.data.images import list_images

    files = list_images(src)
    dst = Path(dst)
    dst.mkdir(parents=True, exist_ok=True)

    def one(path: Path):
        out = dst / f"{path.stem}.png"
        if not out.exists():
            tmp = out.with_suffix(".tmp")
            with Image.open(path) as im:
                im.convert("RGB").save(tmp, format="PNG", compress_level=6)
            tmp.rename(out)

    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(one, files))
    return dst


def compose_data(mode: str, hr_dir, data_root, *overrides: str):
    """The composed ``cfg`` of ``python train.py data=<mode> data.hr_dir=<hr_dir>
    data.val_dir=null [data.data_root=<data_root>] <overrides>`` (:func:`sr.config.compose`):
    no validation folder (the benchmarks train nothing); ``data_root``, where shards are built, is
    set for ``data=tfrecord`` only (the other modes have no such key)."""
    root = (f"data.data_root={data_root}",) if mode == "tfrecord" else ()
    return compose(f"data={mode}", f"data.hr_dir={hr_dir}", "data.val_dir=null", *root, *overrides)
