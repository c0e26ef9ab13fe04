"""Writing a shard set: a two-pass external shuffle.

Pass 1 decodes every image once, in random order, cuts its patches and deals them round-robin
from a random offset over ``num_shards`` temporary buckets (so every image is spread over all
shards); pass 2 loads one bucket at a time, permutes its records uniformly and writes the shard.
Every shard is then a uniform random permutation, whatever the file order of the source folder.
Peak memory: one shard. Files are written under a temporary folder ``.<name>.tmp-*`` beside
``<name>`` and renamed into place once complete, the manifest last (:mod:`.folders`); the whole
build runs under the build lock (:mod:`.buildlock`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from sr.core.images import ImageSet, load_rgb, load_y_pair
from sr.data.tfrecord.buildlock import build_lock
from sr.data.tfrecord.folders import OWNER, check_destination, real_dir, swap_into_place
from sr.data.tfrecord.leftovers import remove_leftovers
from sr.data.tfrecord.manifest import new_manifest
from sr.data.tfrecord.params import MANIFEST, PatchParams, shard_name
from sr.data.tfrecord.records import serialize_patches

log = logging.getLogger(__name__)


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
    out_dir = real_dir(out_dir)
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
        counts = write_buckets(images, work, params, num_shards, rng, workers, progress)
        shards = shuffle_buckets(work, num_shards, rng, progress)
        manifest = new_manifest(images, params, shards, counts, seed)
        manifest["build_seconds"] = round(time.perf_counter() - t0, 2)
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1))
        (work / OWNER).unlink()
        swap_into_place(work, out_dir)
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


def write_buckets(images, work, params, num_shards, rng, workers, progress) -> list[int]:
    """Pass 1: decode the images in random order and deal each one's records, shuffled, over
    the buckets ``work/bucket-<i>`` from a random offset. Returns the records per image."""
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


def shuffle_buckets(work, num_shards, rng, progress) -> list[dict]:
    """Pass 2: permute each bucket's records into its shard. Returns the manifest's shard
    entries ``{"file", "records", "bytes"}``."""
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
