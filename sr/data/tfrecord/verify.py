"""Verification of a shard set: every record read back (:func:`check_shards`: record CRCs,
parsing, shapes, counts and sizes), or a sample compared with its source pixels
(:func:`verify_shards`); a set found corrupt is named (:func:`describe_bad_shards`) and marked
stale."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import tensorflow as tf

from sr.core.images import load_rgb, load_y_pair
from sr.data.tfrecord.manifest import manifest_problem, mark_stale, read_manifest
from sr.data.tfrecord.params import MANIFEST, PatchParams, ShardError, shard_files
from sr.data.tfrecord.records import feature_spec, parse_batch


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


def describe_bad_shards(out_dir, bad: list[tuple[str, str]]) -> str:
    """An error message naming each bad shard and the fix (the set is already marked stale)."""
    lines = "\n  ".join(f"{name}: {reason}" for name, reason in bad)
    return (
        f"{len(bad)} corrupt shard(s) in {out_dir}:\n  {lines}\n"
        f"The set is marked stale ({MANIFEST} removed): run the same command again to rebuild it "
        f"automatically, or rebuild it now with `python scripts/make_tfrecords.py --force "
        f"data.tfrecord_dir={out_dir} <your data.* overrides>`."
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
        f = tf.io.parse_example(serialized, feature_spec())
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
