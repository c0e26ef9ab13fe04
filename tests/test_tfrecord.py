"""TFRecord shards: exact round trip, manifest, write-time shuffle, rebuild, atomicity."""

import json
import os
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
