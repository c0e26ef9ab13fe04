"""Sharded TFRecord patches (``data=tfrecord``), one module per concept:

- ``params``: what a set is cut with (:class:`PatchParams`), file names, :class:`ShardError`;
- ``records``: the ``tf.train.Example`` of a record, written and parsed (the key table);
- ``write``: building a set, a two-pass external shuffle (:func:`write_shards`);
- ``manifest``: ``manifest.json`` and staleness (:func:`stale_reason`);
- ``folders``: the destination, which only ever loses shard sets; the swap into place;
- ``buildlock``: one build at a time (:func:`build_lock`); ``leftovers``: killed builds' folders;
- ``verify``: every record read back, or a sample compared with its source pixels;
- ``read``: the tf.data read path (:func:`read_patches`, :func:`random_crops`);
- ``source``: :class:`TFRecordSource` and its keys, :class:`TFRecordConfig`.

Guarantees of a build of ``<name>`` (:func:`write_shards`, :meth:`TFRecordSource.ensure_shards`):

* **Only shard sets are ever replaced or deleted.** Before anything is decoded, a destination that
  exists and holds anything but what a build writes (``manifest.json`` and
  ``patches-XXXXX-of-YYYYY.tfrecord`` files) is refused with a :class:`ShardError` naming the
  folder and the foreign files (pick an empty or new ``data.tfrecord_dir``, or move them out).
  An empty existing folder is built into. The swap re-checks the destination just before it
  moves the old set aside, and removes old sets and leftovers file by file, only files a build
  writes; a folder still holding anything else is kept (and named in a warning).
* **One build at a time.** "Check staleness -> build -> swap" runs under an exclusive lock on
  ``.<name>.lock`` beside ``<name>`` (``sr.core.lock``: ``fcntl.flock``, recording the holder's
  host and pid; deleted on release). A second process (or thread) that finds the set missing or
  stale waits for the lock, logging the holder's pid, then re-checks and uses the fresh set
  without rebuilding. The kernel releases the lock when its holder dies, so a killed build never
  blocks the next one. A fresh set is returned without taking the lock (read-only folders work).
* **A killed build never leaves a half-written set in place.** The new set is complete
  (manifest written last) before it is renamed into place; until then ``<name>`` still holds the
  old set, readable. A killed build leaves its temporary folder ``.<name>.tmp-*`` beside
  ``<name>``; the next build of the same folder removes those whose owner process
  (``owner.pid`` inside) is dead, never a live build's.
* **Damaged shards are found.** The manifest records each shard's size in bytes, so a truncated
  shard makes the set stale (rebuilt) before it is read; a shard with flipped bytes fails its
  record CRC when read, and :func:`check_shards` names it.

A destination given as a symlink is resolved: the set is built beside, and swapped into, the
folder it points to. Log messages of every module go to the ``sr.data.tfrecord`` logger's
children.
"""

from sr.data.tfrecord.buildlock import build_lock, lock_busy, lock_path
from sr.data.tfrecord.folders import OWNER, check_destination, foreign_files
from sr.data.tfrecord.leftovers import remove_leftovers
from sr.data.tfrecord.manifest import manifest_problem, mark_stale, read_manifest, stale_reason
from sr.data.tfrecord.params import (
    CHANNEL,
    CHANNEL_RGB,
    FORMAT,
    MANIFEST,
    PatchParams,
    ShardError,
    full_coverage_stride,
    normalized,
    shard_files,
    shard_name,
)
from sr.data.tfrecord.read import random_crops, read_patches
from sr.data.tfrecord.records import feature_spec, grid_positions, parse_batch, serialize_patches
from sr.data.tfrecord.source import TFRecordConfig, TFRecordSource
from sr.data.tfrecord.verify import check_shards, describe_bad_shards, verify_shards
from sr.data.tfrecord.write import write_shards

__all__ = [
    "CHANNEL",
    "CHANNEL_RGB",
    "FORMAT",
    "MANIFEST",
    "OWNER",
    "PatchParams",
    "ShardError",
    "TFRecordConfig",
    "TFRecordSource",
    "build_lock",
    "check_destination",
    "check_shards",
    "describe_bad_shards",
    "feature_spec",
    "foreign_files",
    "full_coverage_stride",
    "grid_positions",
    "lock_busy",
    "lock_path",
    "manifest_problem",
    "mark_stale",
    "normalized",
    "parse_batch",
    "random_crops",
    "read_manifest",
    "read_patches",
    "remove_leftovers",
    "serialize_patches",
    "shard_files",
    "shard_name",
    "stale_reason",
    "verify_shards",
    "write_shards",
]
