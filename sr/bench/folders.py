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
    from sr.core.images import list_images

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
    data.val_dir=null data.threads=0 [data.data_root=<data_root>] <overrides>``
    (:func:`sr.config.compose`): no validation folder (the benchmarks train nothing); the
    pipeline on TensorFlow's shared thread pools, every core (no training step beside it to
    leave cores to); ``data_root``, where shards are built, is set for ``data=tfrecord`` only
    (the other modes have no such key)."""
    root = (f"data.data_root={data_root}",) if mode == "tfrecord" else ()
    common = (f"data={mode}", f"data.hr_dir={hr_dir}", "data.val_dir=null", "data.threads=0")
    return compose(*common, *root, *overrides)


def write_sequences(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    sequences: int,
    frames: int,
    size: tuple[int, int],
    step: tuple[int, int] = (1, 3),
    workers: int = 2,
) -> Path:
    """A folder of sorted sequences made from the real photos of ``src``: ``dst/seq_000/
    frame_0000.png, ...`` (sequence folders and frames named in order), each sequence a slow pan
    across one photo. Kept if already complete (a cache for one run's temporary folder).

    Sequence q uses photo ``q * n / sequences`` of the sorted photos of ``src`` (n of them, spread
    over the folder), turned to landscape and resized (Lanczos) to just cover the pan; frame t is
    its ``size`` crop at ``(t dy, t dx)``, ``step = (dy, dx)`` pixels a frame. Saved as RGB PNG at
    zlib level 6 like :func:`reencode_png`, so that decoding costs what a DIV2K-like PNG costs.

    Args:
        src: folder of photos (PNG/JPEG).
        dst: output folder.
        sequences: Q, number of sequences.
        frames: frames per sequence.
        size: ``(height, width)`` of every frame.
        step: ``(dy, dx)`` pan in pixels per frame.
        workers: encoding threads.

    Returns:
        ``dst``.

    Raises:
        FileNotFoundError: if ``src`` holds no image (names the folder).
    """
    from sr.core.images import list_images

    photos = list_images(src)
    dst = Path(dst)
    (h, w), (dy, dx) = size, step
    need_h, need_w = h + dy * (frames - 1), w + dx * (frames - 1)

    def one(q: int) -> None:
        folder = dst / f"seq_{q:03d}"
        paths = [folder / f"frame_{t:04d}.png" for t in range(frames)]
        if all(p.exists() for p in paths):
            return
        folder.mkdir(parents=True, exist_ok=True)
        with Image.open(photos[q * len(photos) // sequences % len(photos)]) as im:
            im = im.convert("RGB")
            if im.height > im.width:
                im = im.transpose(Image.Transpose.TRANSPOSE)
            scale = max(need_h / im.height, need_w / im.width)
            im = im.resize(
                (max(need_w, round(im.width * scale)), max(need_h, round(im.height * scale))),
                Image.Resampling.LANCZOS,
            )
        for t, path in enumerate(paths):
            if not path.exists():
                tmp = path.with_suffix(".tmp")
                im.crop((dx * t, dy * t, dx * t + w, dy * t + h)).save(
                    tmp, format="PNG", compress_level=6
                )
                tmp.rename(path)

    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(one, range(sequences)))
    return dst
