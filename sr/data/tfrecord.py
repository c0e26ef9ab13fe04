"""Sharded TFRecord patches: writing (with a two-pass shuffle), the manifest, verification, and
the tf.data read path.

Each record is one ``tf.train.Example`` holding a uint8 Y patch (or, with ``data.subimage_size``,
a larger sub-image; with ``data.lr_from=rgb``, RGB) and its shape:

=============  ======  =====================================================================
key            type    meaning
=============  ======  =====================================================================
``hr``         bytes   uint8 HR Y patch, row-major, ``hr_height x hr_width x C``, with margin
                       (C = 1, or 3 for RGB sets)
``hr_height``  int64   rows of ``hr`` (HR patch size + 2 margin, or the sub-image size)
``hr_width``   int64   columns of ``hr``
``lr``         bytes   uint8 pre-made LR Y patch (only when built from ``data.lr_dir``)
``lr_height``  int64   rows of ``lr`` (0 without ``lr``)
``lr_width``   int64   columns of ``lr`` (0 without ``lr``)
``image``      int64   index of the source image in ``manifest["images"]`` (name order)
``y``, ``x``   int64   top-left corner of ``hr`` in the source image (pixels)
``gray``       int64   RGB sets only: 1 for a gray image (its value in all three channels)
=============  ======  =====================================================================

Writing is a two-pass external shuffle: pass 1 decodes every image once, in random order, cuts
its patches and deals them round-robin from a random offset over ``num_shards`` temporary
buckets (so every image is spread over all shards); pass 2 loads one bucket at a time, permutes
its records uniformly and writes the shard. Every shard is then a uniform random permutation,
whatever the file order of the source folder. Peak memory: one shard. Files are written under a
temporary name and renamed; the manifest is written last, so a folder with a manifest is
complete. The manifest records each shard's size in bytes, so a truncated shard makes the set
stale (rebuilt) before it is read; a shard with flipped bytes fails its record CRC when read, and
:func:`check_shards` names it.

Guarantees of a build of ``<name>`` (:func:`write_shards`, :meth:`TFRecordSource.ensure_shards`):

* **Only shard sets are ever replaced or deleted.** Before anything is decoded, a destination that
  exists and holds anything but what a build writes (``manifest.json`` and
  ``patches-XXXXX-of-YYYYY.tfrecord`` files) is refused with a :class:`ShardError` naming the
  folder and the foreign files (pick an empty or new ``data.tfrecord_dir``, or move them out).
  An empty existing folder is built into. The swap re-checks the destination just before it
  moves the old set aside, and removes old sets and leftovers file by file, only files a build
  writes; a folder still holding anything else is kept (and named in a warning).
* **One build at a time.** "Check staleness -> build -> swap" runs under an exclusive
  ``fcntl.flock`` on ``.<name>.lock`` beside ``<name>`` (recording the holder's host and pid;
  deleted on release). A second process (or thread) that finds the set missing or stale waits
  for the lock, logging the holder's pid, then re-checks and uses the fresh set without
  rebuilding. The kernel releases the lock when its holder dies, so a killed build never blocks
  the next one. A fresh set is returned without taking the lock (read-only folders work).
* **A killed build never leaves a half-written set in place.** The new set is complete
  (manifest written last) before it is renamed into place; until then ``<name>`` still holds the
  old set, readable. A killed build leaves its temporary folder ``.<name>.tmp-*`` beside
  ``<name>``; the next build of the same folder removes those whose owner process
  (``owner.pid`` inside) is dead, never a live build's.

A destination given as a symlink is resolved: the set is built beside, and swapped into, the
folder it points to.

Two layouts (``data.subimage_size``):

* **patches** (0, the default): records are the crops themselves (HR patch + margin), cut on a
  grid at ``data.stride`` (default 64). A run sees only those positions: about 180 per
  1024 x 768 photograph, 650 per DIV2K image.
* **sub-images** (S > 0, BasicSR's layout, Wang et al. 2018 / ``extract_subimages.py``): records
  are S x S sub-images cut on a grid whose step (default: ``S - crop + 1``, the largest that leaves
  no crop position out) lets every crop position of the image fall inside some sub-image; reading
  cuts one crop at a uniformly random position inside each sub-image, in the tf.data graph
  (:func:`random_crops`; stateless, seeded by the stream seed and the batch's number, so a
  resumed run crops as an uninterrupted one would). Every position is reachable, as in
  ``data=generator``, for less disk than the patch grid (1.7x the image's pixels at S = 480
  against 3.1x), and at the cost of reading S^2 bytes per patch instead of crop^2.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from sr.core.errors import ConfigError
from sr.core.images import ImageFolderError, ImageSet, load_rgb, load_y_pair
from sr.data.source import DataConfig, PatchSource, at_least

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT = "sr-tfrecord-patches/1"
CHANNEL = "Y of ITU-R BT.601 as MATLAB rgb2ycbcr (16..235), uint8, rounded; gray images as is"
CHANNEL_RGB = "RGB, uint8; gray images in all three channels, flagged"
OWNER = "owner.pid"  # inside a temporary build folder: {"host", "pid"} of the building process
_PROCESS_START = time.time()  # leftovers without an owner file older than this are removed


SHARD_FILE = re.compile(r"patches-\d{5,}-of-\d{5,}\.tfrecord")
BUILD_FILES = re.compile(
    r"manifest\.json|owner\.pid|bucket-\d+|patches-\d{5,}-of-\d{5,}\.tfrecord"
)


class ShardError(ImageFolderError):
    """A shard folder that cannot serve as a dataset: corrupt, truncated or unreadable shards,
    or a destination holding files a shard build did not write."""


@dataclass(frozen=True)
class PatchParams:
    """What a set of shards was cut with; shards are rebuilt when any of it changes."""

    patch_size: int  # HR patch P (pixels)
    scale: int
    margin: int  # extra pixels on each side of the HR patch (0 with pre-made LR)
    stride: int  # grid step between record corners (pixels)
    lr_dir: str | None  # absolute path of the pre-made LR folder, or None for bicubic LR
    channel: str = CHANNEL
    subimage: int = 0  # side of a record's sub-image (HR pixels); 0: records are the crops

    @property
    def crop(self) -> int:
        """Side of a training crop: P + 2 margin (HR pixels)."""
        return self.patch_size + 2 * self.margin

    @property
    def channels(self) -> int:
        """Channels of a record: 3 for RGB sets (``data.lr_from=rgb``), else 1."""
        return 3 if self.channel == CHANNEL_RGB else 1

    @property
    def record(self) -> int:
        """Side of a record's HR square: the sub-image, or the crop (HR pixels)."""
        return self.subimage or self.crop

    @property
    def align(self) -> int:
        """Record corners and crop offsets are multiples of this: ``scale`` with pre-made LR
        (so that the LR grid stays aligned with the HR), else 1."""
        return self.scale if self.lr_dir is not None else 1


def full_coverage_stride(subimage: int, crop: int, align: int = 1) -> int:
    """The largest grid step of ``subimage``-sized records that leaves no crop position out: any
    ``crop``-sized window at a multiple of ``align`` lies inside some record (pixels)."""
    return (subimage - crop) // align * align + align


def normalized(params: dict) -> dict:
    """A manifest's ``params`` with the fields it predates at their defaults (an older set of
    patches is still up to date)."""
    return asdict(PatchParams(**params))


def _int64(v) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))


def _bytes(b: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[b]))


def grid_positions(height: int, width: int, crop: int, stride: int, align: int = 1):
    """Top-left corners ``[(y, x), ...]`` of ``crop x crop`` windows at ``stride`` (multiples of
    ``align``) covering an image; the last row and column are pushed to the far border so that
    the image's bottom and right edges are used too."""

    def axis(n):
        last = (n - crop) // align * align
        pos = list(range(0, last + 1, stride))
        if pos[-1] != last:
            pos.append(last)
        return pos

    return [(y, x) for y in axis(height) for x in axis(width)]


def serialize_patches(
    index: int, hr: np.ndarray, lr: np.ndarray | None, params: PatchParams, gray: bool = False
):
    """Serialized Examples of every grid record (patch or sub-image) of one image (Y uint8
    ``[H, W]``, or RGB ``[H, W, 3]`` with ``gray`` for an RGB set)."""
    s, side = params.scale, params.record
    align = s if lr is not None else 1
    stride = max(align, params.stride // align * align)
    out = []
    for y, x in grid_positions(hr.shape[0], hr.shape[1], side, stride, align):
        feat = {
            "hr": _bytes(hr[y : y + side, x : x + side].tobytes()),
            "hr_height": _int64(side),
            "hr_width": _int64(side),
            "image": _int64(index),
            "y": _int64(y),
            "x": _int64(x),
        }
        if params.channels == 3:
            feat["gray"] = _int64(gray)
        if lr is not None:
            p = side // s
            feat["lr"] = _bytes(lr[y // s : y // s + p, x // s : x // s + p].tobytes())
            feat["lr_height"] = feat["lr_width"] = _int64(p)
        else:
            feat["lr"] = _bytes(b"")
            feat["lr_height"] = feat["lr_width"] = _int64(0)
        out.append(tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString())
    return out


def shard_name(i: int, n: int) -> str:
    return f"patches-{i:05d}-of-{n:05d}.tfrecord"


def write_shards(
    images: ImageSet,
    out_dir: str | os.PathLike,
    params: PatchParams,
    num_shards: int = 10,
    seed: int | None = None,
    workers: int = 2,
    progress: bool = True,
) -> dict:
    """Cut every image of ``images`` into patches and write ``num_shards`` shuffled shards and a
    manifest to ``out_dir`` (replacing what is there only once the new set is complete).

    Runs under the build lock of ``out_dir`` (:func:`build_lock`; re-entrant, so callers may
    hold it already). A symlinked ``out_dir`` is resolved.

    Args:
        images: the usable images (``sr.core.images.scan_folder``).
        out_dir: destination folder.
        params: patch size, scale, margin, stride, optional pre-made LR folder.
        num_shards: number of shard files (>= 1).
        seed: seed of the write-time shuffle (None: fresh entropy).
        workers: decode threads.
        progress: show a tqdm progress bar.

    Returns:
        The manifest (also written as ``out_dir/manifest.json``).

    Raises:
        ValueError: if ``num_shards < 1``; ``ImageFolderError`` for an undecodable image;
        ShardError: before anything is decoded, if ``out_dir`` holds files a shard build did not
            write (:func:`check_destination`).
    """
    if num_shards < 1:
        raise ValueError(f"num_shards must be >= 1, got {num_shards}")
    out_dir = _real(out_dir)
    check_destination(out_dir)  # before creating anything (the lock file)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(out_dir):
        check_destination(out_dir)
        return _write_shards(images, out_dir, params, num_shards, seed, workers, progress)


def _write_shards(images, out_dir: Path, params, num_shards, seed, workers, progress) -> dict:
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        (work / OWNER).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
        remove_leftovers(out_dir, keep=work)
        counts = _write_buckets(images, work, params, num_shards, rng, workers, progress)
        shards = _shuffle_buckets(work, num_shards, rng, progress)
        manifest = {
            "format": FORMAT,
            "records": int(sum(counts)),
            "shards": shards,
            "params": asdict(params),
            "source": {
                "hr_dir": str(images.folder.resolve()),
                "fingerprint": images.fingerprint(),
                "files": len(images.files),
                "skipped": list(images.skipped),
            },
            "images": [p.name for p in images.files],
            "patches_per_image": [int(c) for c in counts],
            "seed": seed,
            "build_seconds": round(time.perf_counter() - t0, 2),
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1))
        (work / OWNER).unlink()
        _swap_into_place(work, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info(
        "wrote %d records of %d images into %d shards in %s (%.1f s)",
        manifest["records"],
        len(images.files),
        num_shards,
        out_dir,
        manifest["build_seconds"],
    )
    return manifest


def _write_buckets(images, work, params, num_shards, rng, workers, progress) -> list[int]:
    order = rng.permutation(len(images.files))
    writers = [tf.io.TFRecordWriter(str(work / f"bucket-{i}")) for i in range(num_shards)]
    counts = [0] * len(images.files)
    lr_dir = params.lr_dir

    def decode(i):
        if params.channels == 3:
            rgb, gray = load_rgb(images.files[i])
            return i, (rgb, None, gray)
        return i, (*load_y_pair(images.files[i], lr_dir, params.scale), False)

    try:
        with ThreadPoolExecutor(max(1, workers)) as pool:
            decoded = pool.map(decode, order)
            bar = tqdm(decoded, total=len(order), desc="patches", unit="img", disable=not progress)
            for i, (hr, lr, gray) in bar:
                records = serialize_patches(int(i), hr, lr, params, gray)
                counts[i] = len(records)
                offset = int(rng.integers(num_shards))
                for k, j in enumerate(rng.permutation(len(records))):
                    writers[(offset + k) % num_shards].write(records[j])
    finally:
        for w in writers:
            w.close()
    return counts


def _shuffle_buckets(work, num_shards, rng, progress) -> list[dict]:
    shards = []
    for i in tqdm(range(num_shards), desc="shuffle", unit="shard", disable=not progress):
        bucket = work / f"bucket-{i}"
        records = [r.numpy() for r in tf.data.TFRecordDataset(str(bucket))]
        name = shard_name(i, num_shards)
        with tf.io.TFRecordWriter(str(work / name)) as w:
            for j in rng.permutation(len(records)):
                w.write(records[j])
        bucket.unlink()
        size = (work / name).stat().st_size
        shards.append({"file": name, "records": len(records), "bytes": size})
    return shards


def _swap_into_place(work: Path, out_dir: Path) -> None:
    """Rename the complete set in ``work`` to ``out_dir``, moving the previous set aside first
    and then deleting it file by file (only files a build writes)."""
    check_destination(out_dir)  # again: files may have been put there during the build
    final = out_dir.parent / f".{out_dir.name}.new"
    old = out_dir.parent / f".{out_dir.name}.old"
    for path in (final, old):
        if not _remove_build_folder(path):
            raise ShardError(
                f"{path} (left by an earlier shard build) holds files a build does not write: "
                f"move them out and delete {path}, then run again"
            )
    work.rename(final)
    if out_dir.exists():
        out_dir.rename(old)
    final.rename(out_dir)
    _remove_build_folder(old)  # keeps (and names) anything put there since the check


def _real(out_dir) -> Path:
    """``out_dir`` with symlinks resolved (the folder a build really writes)."""
    return Path(os.path.realpath(out_dir))


def foreign_files(out_dir) -> list[str]:
    """Sorted names of the entries of ``out_dir`` that a shard build does not write (anything
    but ``manifest.json`` and ``patches-XXXXX-of-YYYYY.tfrecord`` regular files; folders end in
    ``/``). Empty if ``out_dir`` is missing or empty."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    foreign = []
    for path in out_dir.iterdir():
        ours = path.name == MANIFEST or SHARD_FILE.fullmatch(path.name)
        if not (ours and path.is_file() and not path.is_symlink()):
            foreign.append(path.name + ("/" if path.is_dir() and not path.is_symlink() else ""))
    return sorted(foreign)


def check_destination(out_dir) -> None:
    """Refuse a shard destination that a build would have to delete anything but a shard set
    from. A missing or empty folder, or one holding only a previous set, is fine.

    Raises:
        ShardError: if ``out_dir`` is not a folder, or holds other files; names the folder, a
            few of the files, and the fix.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ShardError(
            f"data.tfrecord_dir {out_dir} is a file, not a folder: set data.tfrecord_dir to an "
            "empty or new folder"
        )
    foreign = foreign_files(out_dir)
    if not foreign:
        return
    few = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    raise ShardError(
        f"refusing to build TFRecord shards into {out_dir}: it holds {len(foreign)} file(s) that "
        f"a shard build did not write ({few}), and a build replaces the whole folder. Set "
        "data.tfrecord_dir to an empty or new folder (or null for the default under "
        f"<data_root>/tfrecords), or move those files out of {out_dir}."
    )


def _remove_build_folder(path: Path) -> bool:
    """Delete the files a build writes in ``path`` (manifest, shards, buckets, owner file), then
    ``path`` if it is empty. Anything else is kept, with a warning naming it.

    Returns:
        Whether ``path`` is gone.
    """
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        return False  # not a build's folder
    kept = []
    try:
        entries = list(path.iterdir())
    except FileNotFoundError:
        return True
    for f in entries:
        if BUILD_FILES.fullmatch(f.name) and (f.is_symlink() or not f.is_dir()):
            f.unlink(missing_ok=True)
        else:
            kept.append(f.name)
    if not kept:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:  # a file appeared meanwhile
            kept = sorted(f.name for f in path.iterdir())
    log.warning(
        "kept %s: it holds files a shard build does not write (%s); move them out and delete it",
        path,
        ", ".join(sorted(kept)[:5]),
    )
    return False


# ------------------------------------------------------------------------------------------------
# The build lock
# ------------------------------------------------------------------------------------------------
_LOCAL = threading.local()  # .held: {lock file: depth} of the locks this thread holds


def lock_path(out_dir) -> Path:
    """The lock file of builds of ``out_dir``: ``.<name>.lock`` beside it (its holder deletes it
    on release, while still holding the lock: see :func:`build_lock`)."""
    out_dir = _real(out_dir)
    return out_dir.parent / f".{out_dir.name}.lock"


def _held() -> dict:
    if not hasattr(_LOCAL, "held"):
        _LOCAL.held = {}
    return _LOCAL.held


@contextlib.contextmanager
def build_lock(out_dir) -> Iterator[None]:
    """Hold the exclusive build lock of ``out_dir`` (``fcntl.flock`` on :func:`lock_path`, which
    records the holder's host and pid).

    Waits (saying so in the log, naming the holder's pid) while another process or thread holds
    it. Re-entrant in the thread that holds it. The kernel releases the lock when the holder
    exits or is killed, so a dead build never blocks. The holder deletes the lock file on
    release (still locked); an acquirer that finds it locked a deleted file tries again.
    """
    path = lock_path(out_dir)
    key = str(path)
    held = _held()
    if key in held:
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, waited = _acquire(path, out_dir)
    try:
        if waited is not None:
            log.info("the other build released %s after %.1f s", path, waited)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid()}).encode(), 0)
        held[key] = 1
        try:
            yield
        finally:
            del held[key]
            with contextlib.suppress(OSError):
                os.unlink(path)  # still locked: nobody can have locked the file at path meanwhile
    finally:
        os.close(fd)  # releases the lock


def _acquire(path: Path, out_dir) -> tuple[int, float | None]:
    """``(fd, seconds waited or None)`` with an exclusive flock on the file now at ``path``."""
    t0 = None
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if t0 is None:
                    t0 = time.monotonic()
                    log.info(
                        "waiting for the shard build of %s by %s to finish (lock %s)",
                        out_dir,
                        _lock_holder(fd),
                        path,
                    )
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, path):
                return fd, None if t0 is None else time.monotonic() - t0
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # locked a lock file its holder deleted on release: lock the new one


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_ino, st.st_dev) == (own.st_ino, own.st_dev)


def _lock_holder(fd: int) -> str:
    """The holder recorded in a lock file: ``process 1234`` (``on host`` if another one)."""
    try:
        owner = json.loads(os.pread(fd, 4096, 0).decode())
        pid, host = int(owner["pid"]), owner["host"]
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return "another process"
    return f"process {pid}" + ("" if host == socket.gethostname() else f" on {host}")


def _lock_busy(out_dir) -> bool:
    """Whether another process or thread may hold the build lock of ``out_dir`` right now
    (creates nothing; True when in doubt)."""
    path = lock_path(out_dir)
    if str(path) in _held():
        return False
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # a holder keeps the file until it releases the lock
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return not _same_file(fd, path)  # a lock file deleted meanwhile: a new build may hold
    except OSError:  # held elsewhere (or flock unsupported: be cautious)
        return True
    finally:
        os.close(fd)  # a killed holder's file stays; the next build deletes it


def remove_leftovers(out_dir, keep: Path | None = None) -> list[Path]:
    """Remove what killed builds of ``out_dir`` left beside it: ``.<name>.tmp-*`` folders whose
    owner process (``owner.pid`` inside) is dead on this host, and ``.<name>.new``,
    ``.<name>.old`` and owner-less temporary folders last modified before the current process
    started. A live build's folder (another process, or ``keep``) is left alone: while another
    process or thread holds the build lock (:func:`build_lock`), only temporary folders of dead
    owners are removed. Only files a build writes are deleted (:func:`_remove_build_folder`).

    Returns:
        The folders removed (each logged with its size).
    """
    out_dir = _real(out_dir)
    if not out_dir.parent.is_dir():
        return []
    prefix = f".{out_dir.name}."
    busy = _lock_busy(out_dir)
    removed = []
    for path in sorted(out_dir.parent.iterdir()):
        name = path.name
        if not name.startswith(prefix) or path == keep or not path.is_dir():
            continue
        if not (name.startswith(prefix + "tmp-") or name in (prefix + "new", prefix + "old")):
            continue
        if busy and not (path / OWNER).is_file():
            continue  # may be the live build's (being swapped, or just created)
        if not _abandoned(path):
            continue
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        if _remove_build_folder(path):
            log.info("removed %s (%.1f MB) left by a killed shard build", path, size / 1e6)
            removed.append(path)
    return removed


def _abandoned(path: Path) -> bool:
    """Whether the build that wrote ``path`` is gone: its owner pid is dead on this host or, with
    no owner file, the folder is older than this process."""
    try:
        owner = json.loads((path / OWNER).read_text())
        host, pid = owner["host"], int(owner["pid"])
    except FileNotFoundError:
        try:
            return path.stat().st_mtime < _PROCESS_START
        except FileNotFoundError:  # removed meanwhile by its own build
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False  # unreadable: rather keep it than remove a live build's folder
    if host != socket.gethostname():
        return False  # cannot tell whether a process on another host is alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by another user
        return False
    return False


def read_manifest(out_dir) -> dict | None:
    """The manifest of a shard folder, or None if there is no complete set there (no file,
    unreadable JSON, another format). Check its content with :func:`manifest_problem`."""
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None
    return manifest


def manifest_problem(manifest: dict) -> str | None:
    """What is missing or of the wrong type in a manifest (None: complete)."""
    want = {
        "records": int,
        "shards": list,
        "params": dict,
        "source": dict,
        "images": list,
        "patches_per_image": list,
    }
    for key, kind in want.items():
        if not isinstance(manifest.get(key), kind):
            return f"key {key!r} is missing or not a {kind.__name__}"
    if not isinstance(manifest["source"].get("fingerprint"), str):
        return "key 'source.fingerprint' is missing or not a str"
    if not all(isinstance(name, str) for name in manifest["images"]):
        return "key 'images' is not a list of file names"
    if not manifest["shards"]:
        return "it lists no shard"
    for i, shard in enumerate(manifest["shards"]):
        ok = isinstance(shard, dict) and isinstance(shard.get("file"), str)
        ok = ok and all(isinstance(shard.get(k), int) for k in ("records", "bytes"))
        if not ok:
            return f"shard entry {i} lacks 'file', 'records' or 'bytes' (an older version's)"
    try:
        PatchParams(**manifest["params"])
    except TypeError as e:
        return f"key 'params' does not describe the patches: {e}"
    return None


def stale_reason(manifest: dict | None, out_dir, images: ImageSet, params: PatchParams):
    """Why the shards in ``out_dir`` cannot serve ``images`` and ``params`` (None: usable).

    Stale: no manifest; a manifest with missing keys or wrong types; other parameters or source
    files; a shard missing, or of another size in bytes than the manifest recorded (truncated or
    overwritten).
    """
    if manifest is None:
        if (Path(out_dir) / MANIFEST).is_file():
            return f"{MANIFEST} of {out_dir} is unreadable or of another format (not {FORMAT})"
        return f"no shards in {out_dir}"
    problem = manifest_problem(manifest)
    if problem is not None:
        return f"{MANIFEST} of {out_dir} is incomplete: {problem}"
    if normalized(manifest["params"]) != asdict(params):
        return f"parameters changed: {manifest['params']} -> {asdict(params)}"
    if manifest["source"]["fingerprint"] != images.fingerprint():
        return f"the files of {images.folder} changed (names, sizes or mtimes)"
    for shard in manifest["shards"]:
        path = Path(out_dir) / shard["file"]
        if not path.is_file():
            return f"shard {shard['file']} is missing"
        size = path.stat().st_size
        if size != shard["bytes"]:
            return (
                f"shard {shard['file']} is {size} bytes, {shard['bytes']} when written "
                "(truncated or overwritten)"
            )
    return None


def check_shards(out_dir, manifest: dict) -> list[tuple[str, str]]:
    """Read every record of every shard: record CRCs (``tf.data.TFRecordDataset`` checks them),
    parsing, patch shapes, and record counts and file sizes against the manifest.

    Args:
        out_dir: the shard folder.
        manifest: its manifest (:func:`read_manifest`).

    Returns:
        ``[(shard file, reason), ...]`` for every bad shard; empty if all are sound.
    """
    params = PatchParams(**manifest["params"])
    bad = []
    for shard in manifest["shards"]:
        path = Path(out_dir) / shard["file"]
        if not path.is_file():
            bad.append((shard["file"], "missing"))
            continue
        try:
            records = 0
            for serialized in tf.data.TFRecordDataset(str(path)).batch(256):
                parse_batch(serialized, params)  # raises for a malformed record or shape
                records += int(serialized.shape[0])
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            bad.append((shard["file"], _short(e.message)))
            continue
        size = path.stat().st_size
        if records != shard["records"]:
            bad.append((shard["file"], f"{records} records, {shard['records']} when written"))
        elif "bytes" in shard and size != shard["bytes"]:
            bad.append((shard["file"], f"{size} bytes, {shard['bytes']} when written"))
    return bad


def _short(message: str) -> str:
    """A TF error message without the op names: "corrupted record at 88884"."""
    message = re.sub(r"\{\{.*?\}\}|\[Op:.*", "", message.strip().splitlines()[0])
    return message.strip() or "unreadable"


def mark_stale(out_dir) -> None:
    """Remove the manifest of ``out_dir``, so the next run (``train.py`` or
    ``scripts/make_tfrecords.py``) rebuilds the set."""
    (Path(out_dir) / MANIFEST).unlink(missing_ok=True)


def describe_bad_shards(out_dir, bad: list[tuple[str, str]]) -> str:
    """An error message naming each bad shard and the fix (the set is already marked stale)."""
    lines = "\n  ".join(f"{name}: {reason}" for name, reason in bad)
    return (
        f"{len(bad)} corrupt shard(s) in {out_dir}:\n  {lines}\n"
        f"The set is marked stale ({MANIFEST} removed): run the same command again to rebuild it "
        f"automatically, or rebuild it now with `python scripts/make_tfrecords.py --force "
        f"data.tfrecord_dir={out_dir} <your data.* overrides>`."
    )


def _feature_spec():
    return {
        "hr": tf.io.FixedLenFeature([], tf.string),
        "hr_height": tf.io.FixedLenFeature([], tf.int64),
        "hr_width": tf.io.FixedLenFeature([], tf.int64),
        "lr": tf.io.FixedLenFeature([], tf.string),
        "lr_height": tf.io.FixedLenFeature([], tf.int64),
        "lr_width": tf.io.FixedLenFeature([], tf.int64),
        "image": tf.io.FixedLenFeature([], tf.int64),
        "y": tf.io.FixedLenFeature([], tf.int64),
        "x": tf.io.FixedLenFeature([], tf.int64),
        "gray": tf.io.FixedLenFeature([], tf.int64, default_value=0),  # RGB sets only
    }


def _decode_raw(raw, height, width, want: int, channels: int = 1) -> tf.Tensor:
    """uint8 ``[B, want, want, channels]`` from a batch of byte strings, checked against stored
    shapes."""
    check = tf.debugging.assert_equal(
        tf.stack([height, width]),
        tf.cast(want, tf.int64),
        message=f"record shape differs from the manifest's {want}x{want}: rebuild the shards",
    )
    with tf.control_dependencies([check]):
        flat = tf.io.decode_raw(raw, tf.uint8)
    batch = raw.shape[0] if raw.shape[0] is not None else -1  # keep a static batch size
    return tf.reshape(flat, [batch, want, want, channels])


def parse_batch(serialized: tf.Tensor, params: PatchParams) -> dict[str, tf.Tensor]:
    """Parse a batch of serialized Examples (one vectorised ``parse_example``).

    Returns:
        ``{"hr": uint8 [B, R, R, C], "image": int32 [B]}`` plus ``"lr": uint8 [B, R/s, R/s, 1]``
        for shards built from pre-made LR, and ``"gray"`` bool ``[B]`` for RGB sets (C = 3);
        R = ``params.record`` (the crop, or the sub-image).
    """
    f = tf.io.parse_example(serialized, _feature_spec())
    out = {
        "hr": _decode_raw(f["hr"], f["hr_height"], f["hr_width"], params.record, params.channels),
        "image": tf.cast(f["image"], tf.int32),
    }
    if params.channels == 3:
        out["gray"] = f["gray"] > 0
    if params.lr_dir is not None:
        p = params.record // params.scale
        out["lr"] = _decode_raw(f["lr"], f["lr_height"], f["lr_width"], p)
    return out


def random_crops(batch: dict[str, tf.Tensor], params: PatchParams, seed=None) -> dict:
    """One crop per sub-image at a uniformly random position, vectorised over the batch.

    Args:
        batch: :func:`parse_batch` of sub-image records: ``hr`` uint8 ``[B, S, S, C]`` (and
            ``lr`` uint8 ``[B, S/s, S/s, 1]``).
        params: the set's parameters (crop side, scale, alignment).
        seed: None for TensorFlow's stateful generator, or an int ``[2]`` stateless seed: the
            positions are then a function of the seed alone.

    Returns:
        The batch with ``hr`` uint8 ``[B, crop, crop, C]`` (``lr`` ``[B, P/s, P/s, 1]``), the
        crop's top-left corner uniform over the multiples of ``params.align`` in
        ``[0, S - crop]`` on each axis, independently per sample.
    """
    hr, crop, a = batch["hr"], params.crop, params.align
    n = tf.shape(hr)[0]
    count = (params.record - crop) // a + 1  # positions per axis
    if seed is None:
        offsets = tf.random.uniform([2, n], 0, count, dtype=tf.int32)
    else:
        offsets = tf.random.stateless_uniform([2, n], seed, 0, count, dtype=tf.int32)

    def cut(image, offsets, side):
        rows = offsets[0][:, tf.newaxis] + tf.range(side)  # [B, side]
        cols = offsets[1][:, tf.newaxis] + tf.range(side)
        image = tf.gather(image, rows, axis=1, batch_dims=1)  # [B, side, S, C]
        return tf.gather(image, cols, axis=2, batch_dims=1)  # [B, side, side, C]

    out = dict(batch, hr=cut(hr, offsets * a, crop))
    if "lr" in batch:
        out["lr"] = cut(
            batch["lr"], offsets * (a // params.scale), params.patch_size // params.scale
        )
    return out


def read_patches(
    out_dir,
    manifest: dict,
    batch_size: int,
    shuffle_buffer: int,
    seed: int | None = None,
    deterministic: bool = False,
    pipeline: tuple[int, int] = (0, 1),
) -> tf.data.Dataset:
    """Endless dataset of parsed patch batches (see :func:`parse_batch`) from a shard folder.

    ``pipeline=(i, n)``: this input pipeline reads shard files ``i, i + n, ...`` only (sharding
    at the file level, before the interleave: every worker reads its own files), with its own
    shuffle seeds.

    Sub-image sets (``params.subimage``): each batch is then cut to crops by
    :func:`random_crops`, seeded by (``seed``, the batch's number in this iterator) when ``seed``
    is given; the number is part of the iterator's state, so a restored iterator crops on as the
    uninterrupted one would.

    Shard order is reshuffled every epoch, shards are read interleaved in parallel (one record
    from each in turn), records pass a shuffle buffer, are batched, and only then parsed, as one
    op per batch. No Python runs per record.

    Iterating raises ``tf.errors.DataLossError`` for a record that fails its CRC, without naming
    the file (the interleave does not say): :meth:`TFRecordSource.explain_data_loss` turns it
    into a :class:`ShardError` naming the corrupt shards.
    """
    params = PatchParams(**manifest["params"])
    index, count = pipeline
    files = list(shard_files(out_dir, manifest))[index::count]
    if not files:
        raise ShardError(
            f"{count} input pipelines (workers) but only {len(manifest['shards'])} shard "
            f"file(s) in {out_dir}: set data.num_shards to at least {count} (a multiple of it "
            "balances the workers)"
        )
    if seed is not None and index:
        seed = int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
    ds = tf.data.Dataset.from_tensor_slices(files)
    ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, buffer_size=1 << 20),
        cycle_length=len(files),
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    if shuffle_buffer > 1:
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.map(lambda s: parse_batch(s, params), num_parallel_calls=tf.data.AUTOTUNE)
    if not params.subimage:
        return ds
    if seed is None:
        return ds.map(lambda b: random_crops(b, params), num_parallel_calls=tf.data.AUTOTUNE)
    base = tf.constant([seed, 0x5EB1], tf.int64)  # crops' stream, apart from the flips' (seed, n)
    return ds.enumerate().map(
        lambda i, b: random_crops(b, params, tf.random.experimental.stateless_fold_in(base, i)),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def verify_shards(out_dir, count: int = 100, seed: int | None = 0) -> int:
    """Compare ``count`` random records with crops of their re-decoded source images.

    Only a sample: :func:`check_shards` reads every record.

    Returns:
        The number of records checked.

    Raises:
        ValueError: naming the first record whose pixels differ from its source.
        ShardError: naming the corrupt shards if a record fails its CRC.
    """
    manifest = read_manifest(out_dir)
    if manifest is None or manifest_problem(manifest):
        raise ValueError(f"{out_dir} holds no complete shard set (no valid {MANIFEST})")
    try:
        return _compare_with_sources(out_dir, manifest, count, seed)
    except tf.errors.DataLossError as e:
        bad = check_shards(out_dir, manifest) or [("(unknown shard)", e.message)]
        mark_stale(out_dir)
        raise ShardError(describe_bad_shards(out_dir, bad)) from e


def _compare_with_sources(out_dir, manifest: dict, count: int, seed: int | None) -> int:
    params = PatchParams(**manifest["params"])
    folder = Path(manifest["source"]["hr_dir"])
    raw = tf.data.Dataset.from_tensor_slices(shard_files(out_dir, manifest))
    raw = raw.interleave(tf.data.TFRecordDataset, cycle_length=len(manifest["shards"]))
    raw = raw.shuffle(1000, seed=seed).take(count).batch(1)
    cache: dict[int, tuple] = {}
    checked = 0
    for serialized in raw:
        f = tf.io.parse_example(serialized, _feature_spec())
        rec = parse_batch(serialized, params)
        i, y, x = int(f["image"][0]), int(f["y"][0]), int(f["x"][0])
        if i not in cache:
            path = folder / manifest["images"][i]
            if params.channels == 3:
                cache = {i: (load_rgb(path)[0], None)}
            else:
                cache = {i: load_y_pair(path, params.lr_dir, params.scale)}
        hr, lr = cache[i]
        c = params.record
        got = rec["hr"][0].numpy() if params.channels == 3 else rec["hr"][0, ..., 0].numpy()
        if not np.array_equal(got, hr[y : y + c, x : x + c]):
            raise ValueError(
                f"record of {manifest['images'][i]} at y={y}, x={x} differs from the source: "
                f"rebuild the shards with scripts/make_tfrecords.py"
            )
        if lr is not None:
            s, p = params.scale, params.record // params.scale
            want = lr[y // s : y // s + p, x // s : x // s + p]
            if not np.array_equal(rec["lr"][0, ..., 0].numpy(), want):
                raise ValueError(f"LR of record {manifest['images'][i]} y={y} x={x} differs")
        checked += 1
    return checked


def shard_files(out_dir, manifest: dict) -> Sequence[str]:
    return [str(Path(out_dir) / s["file"]) for s in manifest["shards"]]


# ------------------------------------------------------------------------------------------------
# The source: data=tfrecord
# ------------------------------------------------------------------------------------------------
@dataclass
class TFRecordConfig(DataConfig):
    """Keys of ``data=tfrecord`` (schema; defaults written here only)."""

    # shard folder; null: <data_root>/tfrecords/<hr_dir>-<hash>, plus -sub<S> for sub-images and
    # -rgb for RGB records, so that runs of different layouts never rebuild each other's shards
    tfrecord_dir: str | None = None
    data_root: str = "${sr_root:}/data"  # the dataset root (default shard location)
    num_shards: int = 10  # shard files, interleaved in parallel when read
    # grid step between record corners when writing (HR pixels); null: 64 for patches, and for
    # sub-images the largest step that leaves no crop position out (subimage_size - crop + 1)
    stride: int | None = None
    # records: 0, the crops themselves (patches on the grid); S > 0, S x S sub-images with one
    # crop cut at a random position inside each when read (BasicSR's layout)
    subimage_size: int = 0
    # read-time shuffle buffer, in Y patches' worth of memory (2048 x 112 x 112 B = 26 MB); with
    # sub-images or RGB records it holds as many records as fit in that memory
    shuffle_buffer: int = 2048
    write_workers: int = 2  # decode threads while writing shards


class TFRecordSource(PatchSource):
    """``data=tfrecord``: patches cut on a grid into shuffled shards (built automatically when
    missing or stale, see :func:`write_shards`), read with tf.data (:func:`read_patches`).

    Keyword args: those of :class:`sr.data.source.PatchSource`, and
        tfrecord_dir: shard folder; None for ``<data_root>/tfrecords/<hr_dir name>-<hash>``.
        data_root: the project's dataset root.
        num_shards: shard files to write (>= 1).
        stride: grid step of record corners (>= 1; None: 64 for patches, for sub-images
            :func:`full_coverage_stride`, and with sub-images at most that).
        subimage_size: 0 (records are the crops) or the side S of sub-image records, at least
            the crop (``patch_size + 2 margin``) and a multiple of ``scale`` with ``lr_dir``.
        shuffle_buffer: read-time shuffle buffer in Y patches' worth of memory (0 or 1: none);
            with sub-images or RGB records :attr:`buffer_records` records.
        write_workers: decode threads while writing shards (>= 1).

    Raises:
        ValueError: for a value out of range, naming the key.
    """

    mode = "tfrecord"
    patch_stride = 64  # the grid step of patch records when data.stride is null
    schema = TFRecordConfig
    checkpoint_iterator = True  # resume restores the iterator: nothing repeated or skipped

    def __init__(
        self,
        *,
        tfrecord_dir: str | None,
        data_root: str,
        num_shards: int,
        stride: int | None,
        subimage_size: int,
        shuffle_buffer: int,
        write_workers: int,
        **common,
    ):
        super().__init__(**common)
        self.num_shards = at_least("num_shards", num_shards)
        self.subimage_size = at_least("subimage_size", subimage_size, minimum=0)
        crop, align = self.crop, self.scale if self.lr_dir else 1
        if self.subimage_size:
            if self.subimage_size < crop:
                raise ValueError(
                    f"data.subimage_size {subimage_size} is smaller than the crop {crop} "
                    f"(data.patch_size {self.patch_size} + 2 x margin {self.margin}): use 0 "
                    f"(patch records) or at least {crop}"
                )
            if self.subimage_size % align:
                raise ValueError(
                    f"data.subimage_size {subimage_size} is not a multiple of data.scale "
                    f"{self.scale} (needed with data.lr_dir): use "
                    f"{self.subimage_size // align * align or align}"
                )
            widest = full_coverage_stride(self.subimage_size, crop, align)
            self.stride = widest if stride is None else at_least("stride", stride)
            if self.stride > widest:
                raise ValueError(
                    f"data.stride {stride} leaves crop positions out of every {subimage_size}-"
                    f"pixel sub-image (crop {crop}): use at most {widest}, or null for that"
                )
        else:
            self.stride = self.patch_stride if stride is None else at_least("stride", stride)
        self.shuffle_buffer = at_least("shuffle_buffer", shuffle_buffer, minimum=0)
        self.write_workers = at_least("write_workers", write_workers)
        self.data_root = Path(data_root)
        if self.service:  # the position lives on the service's workers: not checkpointable
            from sr.data.service import parse_address

            self.service = parse_address(self.service)  # a malformed address: at start-up
            self.checkpoint_iterator = False
        self.tfrecord_dir = Path(tfrecord_dir) if tfrecord_dir else self._default_tfrecord_dir()

    def _default_tfrecord_dir(self) -> Path:
        """``<data_root>/tfrecords/<hr_dir name>-<hash of its path>``, with ``-sub<S>`` and
        ``-rgb`` for the other layouts: a run reading one layout while another run of the same
        folder builds a second one would otherwise find its shards replaced under it."""
        digest = hashlib.sha1(str(self.hr_dir.resolve()).encode()).hexdigest()[:8]
        layout = f"-sub{self.subimage_size}" if self.subimage_size else ""
        layout += "-rgb" if self.channels == 3 else ""
        return self.data_root / "tfrecords" / f"{self.hr_dir.name}-{digest}{layout}"

    def params(self) -> PatchParams:
        """What the shards are cut with (stored in the manifest; a change rebuilds them)."""
        return PatchParams(
            patch_size=self.patch_size,
            scale=self.scale,
            margin=self.margin,
            stride=self.stride,
            lr_dir=str(self.lr_dir) if self.lr_dir else None,
            channel=CHANNEL_RGB if self.channels == 3 else CHANNEL,
            subimage=self.subimage_size,
        )

    @property
    def buffer_records(self) -> int:
        """Records in the read-time shuffle buffer: as many as fit in the memory of
        ``shuffle_buffer`` one-channel crops (at least 1): ``shuffle_buffer`` itself for Y
        patches, fewer for sub-images or RGB records."""
        if self.shuffle_buffer <= 1:
            return self.shuffle_buffer
        record = self.params().record
        return max(1, self.shuffle_buffer * self.crop**2 // (record**2 * self.channels))

    def check_images(self) -> None:
        """With sub-images, every training image must hold one (checked at start-up).

        Raises:
            ConfigError: naming the images smaller than ``data.subimage_size`` and the fix.
        """
        if not self.subimage_size:
            return
        small = [
            f"{p.name} ({w}x{h})"
            for p, (h, w) in zip(self.images.files, self.images.sizes)
            if min(h, w) < self.subimage_size
        ]
        if small:
            least = min(min(hw) for hw in self.images.sizes)
            raise ConfigError(
                f"data.subimage_size {self.subimage_size} is larger than {len(small)} image(s) "
                f"of {self.hr_dir}: {', '.join(small[:5])}{' ...' if len(small) > 5 else ''}; "
                f"use at most {least} (the smallest side), or 0 for patch records"
            )

    def prepare(self) -> None:
        """Check the folders and build the shards if missing or stale.

        With ``data.service``, also check that its dispatcher answers (within 10 s), before
        any shard or model work.

        Raises:
            ImageFolderError: if a folder is missing or has no usable image.
            sr.data.service.ServiceError: if no tf.data service dispatcher answers.
        """
        if self.service:
            from sr.data.service import check_reachable

            check_reachable(self.service)
        super().prepare()
        self.check_images()
        self.ensure_shards()

    def ensure_shards(self, force: bool = False) -> dict:
        """The manifest of up-to-date shards for this config, building them first if needed (or
        always, with ``force``).

        An up-to-date set is returned at once. Otherwise the build lock of the folder is taken
        (waiting for another process's build, see :func:`build_lock`), staleness is checked
        again (the other build may have made the set fresh), and only then is the set built.

        Raises:
            ShardError: before anything is decoded, if the set must be built and
                ``tfrecord_dir`` holds files a shard build did not write.
        """
        params = self.params()
        if not force:
            manifest = read_manifest(self.tfrecord_dir)
            if stale_reason(manifest, self.tfrecord_dir, self.images, params) is None:
                return manifest
        check_destination(self.tfrecord_dir)  # refuse before creating anything (the lock file)
        with build_lock(self.tfrecord_dir):
            manifest = read_manifest(self.tfrecord_dir)
            reason = stale_reason(manifest, self.tfrecord_dir, self.images, params)
            if reason is None and not force:
                log.info("using the shards another process just built in %s", self.tfrecord_dir)
                return manifest
            check_destination(self.tfrecord_dir)
            reason = reason or "rebuild forced"
            log.info("building TFRecord shards in %s: %s", self.tfrecord_dir, reason)
            return write_shards(
                self.images,
                self.tfrecord_dir,
                params,
                self.num_shards,
                seed=self.seed,
                workers=self.write_workers,
            )

    def share(self, pipeline: tuple[int, int]) -> str:
        index, count = pipeline
        n = len((read_manifest(self.tfrecord_dir) or {}).get("shards", []))
        return f"shard files {', '.join(map(str, range(index, n, count)))} of {n}"

    def check_pipelines(self, count: int) -> None:
        """Check at start-up that the shard files split over ``count`` input pipelines.

        Raises:
            ShardError: if there are fewer shard files than pipelines (names data.num_shards).
        """
        super().check_pipelines(count)
        shards = len((read_manifest(self.tfrecord_dir) or {}).get("shards", []))
        if count > 1 and shards < count:
            raise ShardError(
                f"{count} workers but {shards} shard file(s) in {self.tfrecord_dir}: each worker "
                f"reads shard files of its own; set data.num_shards to at least {count} (a "
                "multiple of it balances the workers)"
            )

    def explain_data_loss(self, error: tf.errors.DataLossError) -> Exception:
        """The error to raise for a ``DataLossError`` from :meth:`patch_dataset` (a record failed
        its CRC; tf.data does not say in which file): scans the shards (:func:`check_shards`),
        marks the set stale so that the next run rebuilds it, and names the corrupt shards.

        Returns:
            :class:`ShardError` naming the bad shards and the fix; ``error`` itself if no shard
            is found corrupt on a second read.
        """
        manifest = read_manifest(self.tfrecord_dir)
        if manifest is None or manifest_problem(manifest):
            return error
        bad = check_shards(self.tfrecord_dir, manifest)
        if not bad:
            return error
        mark_stale(self.tfrecord_dir)
        log.error("corrupt shards in %s: %s", self.tfrecord_dir, bad)
        return ShardError(describe_bad_shards(self.tfrecord_dir, bad))

    def patch_dataset(
        self, start: int = 0, batch_size: int | None = None, pipeline: tuple[int, int] = (0, 1)
    ) -> tf.data.Dataset:
        """The shards read by :func:`read_patches` with the stream's seed; ``pipeline`` ``(i, n)``
        reads shard files ``i, i + n, ...`` (see there). ``start`` is ignored: a resumed run
        restores this dataset's iterator from its checkpoint (``checkpoint_iterator``), shuffle
        buffer and prefetched batches included.

        Raises:
            ShardError: if there are fewer shard files than pipelines (names ``data.num_shards``).
        """
        manifest = self.ensure_shards()
        if manifest["images"] != [p.name for p in self.images.files]:
            raise RuntimeError(f"manifest of {self.tfrecord_dir} lists other images")
        if self.subimage_size:
            log.info(
                "sub-images of %d px, one random %d px crop each when read; shuffle buffer %d "
                "sub-images (%.0f MB, the memory of data.shuffle_buffer=%d crops)",
                self.subimage_size,
                self.crop,
                self.buffer_records,
                self.buffer_records * self.subimage_size**2 / 2**20,
                self.shuffle_buffer,
            )
        return read_patches(
            self.tfrecord_dir,
            manifest,
            batch_size or self.batch_size,
            self.buffer_records,
            # on tf.data service workers every worker runs this graph: a fixed seed would make
            # two workers handed the same files shuffle them alike (identical batches)
            seed=None if self.service else self.stream_seed,
            deterministic=self.deterministic,
            pipeline=pipeline,
        )

    def stream_identity(self) -> dict:
        # the whole manifest: a rebuilt set (even of the same images) is another stream, since
        # the saved iterator holds byte offsets into the shard files
        manifest = json.dumps(read_manifest(self.tfrecord_dir), sort_keys=True)
        return {
            **super().stream_identity(),
            "shuffle_buffer": self.shuffle_buffer,
            "shards": hashlib.sha256(manifest.encode()).hexdigest()[:16],
        }
