"""TFRecord shards: exact round trip, manifest, write-time shuffle, rebuild, atomicity."""

import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from sr.data import tfrecord
from sr.data.images import load_y, scan_folder

PARAMS = tfrecord.PatchParams(patch_size=32, scale=4, margin=8, stride=16, lr_dir=None)


@pytest.fixture
def shards(photo_dir, tmp_path):
    images = scan_folder(photo_dir, PARAMS.crop)
    manifest = tfrecord.write_shards(
        images, tmp_path / "shards", PARAMS, 4, seed=0, progress=False
    )
    return images, tmp_path / "shards", manifest


def _records(folder, manifest):
    out = []
    for s in manifest["shards"]:
        for raw in tf.data.TFRecordDataset(str(folder / s["file"])):
            f = tf.io.parse_single_example(raw, tfrecord._feature_spec())
            out.append({k: v.numpy() for k, v in f.items()})
        yield s["file"], out
        out = []


def test_round_trip_is_exact_and_shapes_are_stored(shards):
    images, folder, manifest = shards
    total = 0
    for _, records in _records(folder, manifest):
        for r in records:
            src = load_y(images.files[r["image"]])
            hr = np.frombuffer(r["hr"], np.uint8).reshape(r["hr_height"], r["hr_width"])
            np.testing.assert_array_equal(hr, src[r["y"] : r["y"] + 48, r["x"] : r["x"] + 48])
            total += 1
    assert total == manifest["records"] == sum(manifest["patches_per_image"])
    assert tfrecord.verify_shards(folder, count=50) == 50


def test_manifest_describes_the_shards_on_disk(shards, photo_dir):
    images, folder, manifest = shards
    assert json.loads((folder / "manifest.json").read_text()) == manifest  # as returned
    # every shard file is listed with the number of records it really holds, and nothing else
    on_disk = {p.name for p in folder.iterdir()} - {"manifest.json"}
    listed = {s["file"]: s["records"] for s in manifest["shards"]}
    assert set(listed) == on_disk and len(listed) == 4
    per_image = Counter()
    for name, records in _records(folder, manifest):
        assert listed[name] == len(records)
        per_image.update(int(r["image"]) for r in records)
    assert manifest["records"] == sum(listed.values())
    # images in name order; per image, the count of records and of grid windows over it
    assert manifest["images"] == sorted(p.name for p in photo_dir.iterdir())
    for i, name in enumerate(manifest["images"]):
        h, w = load_y(photo_dir / name).shape

        def windows(n, crop=PARAMS.crop, stride=PARAMS.stride):
            return (n - crop) // stride + 1 + ((n - crop) % stride > 0)

        assert manifest["patches_per_image"][i] == per_image[i] == windows(h) * windows(w)
    assert manifest["params"] == dict(
        patch_size=32, scale=4, margin=8, stride=16, lr_dir=None, channel=tfrecord.CHANNEL
    )
    assert manifest["source"]["hr_dir"] == str(photo_dir.resolve())
    assert not [p for p in folder.parent.iterdir() if ".tmp" in p.name]


def test_every_image_spread_over_all_shards_and_shards_are_shuffled(shards):
    images, folder, manifest = shards
    for name, records in _records(folder, manifest):
        idx = [r["image"] for r in records]
        assert set(idx) == set(range(len(images.files))), f"{name} misses images"
        rho = stats.spearmanr(np.arange(len(idx)), idx).statistic
        assert abs(rho) < 0.2, f"{name} is ordered by image (Spearman {rho:.2f})"
        runs = sum(a == b for a, b in zip(idx, idx[1:])) / len(idx)
        assert runs < 0.35, f"{name}: {runs:.0%} of neighbours come from the same image"


def test_stale_reasons(shards, photo_dir):
    images, folder, manifest = shards
    assert tfrecord.stale_reason(manifest, folder, images, PARAMS) is None
    other = tfrecord.PatchParams(patch_size=32, scale=4, margin=8, stride=24, lr_dir=None)
    assert "parameters changed" in tfrecord.stale_reason(manifest, folder, images, other)
    (folder / manifest["shards"][0]["file"]).unlink()
    assert "missing" in tfrecord.stale_reason(manifest, folder, images, PARAMS)
    first = images.files[0]
    os.utime(first, ns=(first.stat().st_atime_ns, first.stat().st_mtime_ns + 10**9))
    changed = scan_folder(photo_dir, PARAMS.crop)
    assert "changed" in tfrecord.stale_reason(manifest, folder, changed, PARAMS)


def test_read_path_parses_batches_and_checks_shapes(shards):
    images, folder, manifest = shards
    ds = tfrecord.read_patches(folder, manifest, batch_size=8, shuffle_buffer=64, seed=0)
    batch = next(iter(ds))
    assert batch["hr"].dtype == tf.uint8 and batch["hr"].shape == (8, 48, 48, 1)
    assert batch["image"].dtype == tf.int32
    wrong = dict(manifest, params=dict(manifest["params"], patch_size=40))
    with pytest.raises(tf.errors.InvalidArgumentError, match="rebuild the shards"):
        next(iter(tfrecord.read_patches(folder, wrong, 8, 64)))


def test_a_failed_write_leaves_the_old_set_intact(shards, monkeypatch):
    images, folder, manifest = shards

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(tfrecord, "_shuffle_buckets", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        tfrecord.write_shards(images, folder, PARAMS, 4, seed=1, progress=False)
    assert tfrecord.read_manifest(folder) == manifest
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".shards")]


# ------------------------------------------------------------------------------------------------
# Corrupt shards, incomplete manifests, leftovers of killed builds
# ------------------------------------------------------------------------------------------------
def _source(compose, photo_dir, tmp_path):
    import hydra

    cfg = compose(
        "data=tfrecord",
        f"data.hr_dir={photo_dir}",
        "data.val_dir=null",
        f"data.tfrecord_dir={tmp_path / 'set'}",
        "data.num_shards=3",
        "data.batch_size=16",
    )
    return hydra.utils.instantiate(cfg.data)


def flip_bytes(path, at: float = 0.5, n: int = 4):
    """Invert ``n`` bytes in the middle of a file (same size, broken record CRC)."""
    data = bytearray(path.read_bytes())
    i = int(len(data) * at)
    data[i : i + n] = bytes(b ^ 0xFF for b in data[i : i + n])
    path.write_bytes(bytes(data))


def test_manifest_records_shard_sizes_and_truncation_is_stale_and_rebuilt(
    compose, photo_dir, tmp_path, caplog
):
    source = _source(compose, photo_dir, tmp_path)
    manifest = source.ensure_shards()
    folder = source.tfrecord_dir
    for s in manifest["shards"]:
        assert s["bytes"] == (folder / s["file"]).stat().st_size > 0
    victim = folder / manifest["shards"][1]["file"]
    with open(victim, "r+b") as f:
        f.truncate(victim.stat().st_size // 2)
    reason = tfrecord.stale_reason(manifest, folder, source.images, source.params())
    assert f"shard {victim.name} is {victim.stat().st_size} bytes" in reason
    assert "truncated" in reason
    with caplog.at_level(logging.INFO):
        rebuilt = source.ensure_shards()
    assert any(
        "truncated" in r.getMessage() and "building" in r.getMessage() for r in caplog.records
    )
    assert victim.stat().st_size == rebuilt["shards"][1]["bytes"] == manifest["shards"][1]["bytes"]
    assert tfrecord.check_shards(folder, rebuilt) == []


def test_flipped_bytes_are_named_by_the_scan_and_the_trainer_error(compose, photo_dir, tmp_path):
    source = _source(compose, photo_dir, tmp_path)
    manifest = source.ensure_shards()
    folder = source.tfrecord_dir
    victim = manifest["shards"][2]["file"]
    flip_bytes(folder / victim)
    assert tfrecord.stale_reason(manifest, folder, source.images, source.params()) is None
    bad = tfrecord.check_shards(folder, manifest)
    assert [name for name, _ in bad] == [victim] and "corrupt" in bad[0][1].lower()
    # the read path raises a bare DataLossError; the source turns it into one naming the shard
    with pytest.raises(tf.errors.DataLossError) as raw:
        for _ in source.patch_dataset().take(200):
            pass
    error = source.explain_data_loss(raw.value)
    assert isinstance(error, tfrecord.ShardError)
    assert victim in str(error) and "make_tfrecords.py --force" in str(error)
    assert "marked stale" in str(error) and not (folder / tfrecord.MANIFEST).exists()
    rebuilt = source.ensure_shards()  # the next run rebuilds the set
    assert tfrecord.check_shards(folder, rebuilt) == []


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda m: m.pop("source"), "'source' is missing"),
        (lambda m: m.update(records="many"), "'records' is missing or not a int"),
        (lambda m: m["shards"][0].pop("bytes"), "shard entry 0 lacks"),
        (lambda m: m.update(params={"patch": 3}), "'params' does not describe"),
    ],
)
def test_a_manifest_with_missing_keys_or_wrong_types_is_stale(shards, edit, problem):
    images, folder, manifest = shards
    edit(manifest)
    (folder / tfrecord.MANIFEST).write_text(json.dumps(manifest))
    read = tfrecord.read_manifest(folder)
    reason = tfrecord.stale_reason(read, folder, images, PARAMS)
    assert "manifest.json" in reason and "incomplete" in reason and problem in reason
    (folder / tfrecord.MANIFEST).write_text("[1, 2]")  # JSON, but not a manifest
    assert "unreadable or of another format" in tfrecord.stale_reason(
        tfrecord.read_manifest(folder), folder, images, PARAMS
    )
    (folder / tfrecord.MANIFEST).unlink()
    assert "no shards" in tfrecord.stale_reason(None, folder, images, PARAMS)


def test_leftovers_of_dead_builds_are_removed_and_live_ones_kept(photo_dir, tmp_path):
    images = scan_folder(photo_dir, PARAMS.crop)

    def leftover(name, pid=None, age=0.0):
        path = tmp_path / name
        (path / "bucket-0").parent.mkdir()
        (path / "bucket-0").write_bytes(b"x" * 1000)
        if pid is not None:
            owner = {"host": socket.gethostname(), "pid": pid}
            (path / tfrecord.OWNER).write_text(json.dumps(owner))
        if age:
            old = time.time() - age
            os.utime(path, (old, old))
        return path

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gone = [
            leftover(".shards.tmp-dead", pid=dead.pid),
            leftover(".shards.tmp-legacy", age=3600),  # no owner file, older than this process
            leftover(".shards.new", age=3600),
            leftover(".shards.old", age=3600),
        ]
        kept = [
            leftover(".shards.tmp-live", pid=live.pid),
            leftover(".shards.tmp-fresh"),  # no owner file yet, newer than this process
            leftover(".other.tmp-dead", pid=dead.pid),  # another target's
        ]
        tfrecord.write_shards(images, tmp_path / "shards", PARAMS, 2, seed=0, progress=False)
    finally:
        live.kill()
        live.wait()
    assert not [p for p in gone if p.exists()]
    assert all(p.is_dir() for p in kept)
    assert tfrecord.read_manifest(tmp_path / "shards") is not None
