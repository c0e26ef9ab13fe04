"""Sub-image TFRecord layout (``data.subimage_size``): records, coverage, random crops in the
graph, resume, and the start-up checks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import sr.config
from sr.core.errors import ConfigError
from sr.core.images import load_y
from sr.data import tfrecord


def _source(compose, hr_dir, tmp_path, *extra, subimage=80):
    cfg = compose(
        "data=tfrecord",
        f"data.hr_dir={hr_dir}",
        "data.val_dir=null",
        f"data.tfrecord_dir={tmp_path / 'set'}",
        "data.num_shards=3",
        "data.batch_size=8",
        "data.patch_size=32",
        f"data.subimage_size={subimage}",
        "seed=3",
        *extra,
    )
    source = sr.config.build_source(cfg)
    source.prepare()
    return source


def _find(crop: np.ndarray, image: np.ndarray) -> list[tuple[int, int]]:
    """Every (y, x) where ``crop`` sits in ``image``."""
    c = crop.shape[0]
    windows = np.lib.stride_tricks.sliding_window_view(image, (c, c))
    hits = np.argwhere((windows == crop).all(axis=(2, 3)))
    return [tuple(h) for h in hits]


@pytest.mark.slow
def test_records_are_exact_sub_images_and_cover_every_crop_position(compose, photo_dir, tmp_path):
    source = _source(compose, photo_dir, tmp_path)
    params = source.params()
    crop = params.crop  # 32 + 2 x 8
    assert (params.subimage, params.stride) == (80, 80 - crop + 1)
    manifest = tfrecord.read_manifest(source.tfrecord_dir)
    assert (
        tfrecord.verify_shards(source.tfrecord_dir, count=manifest["records"])
        == manifest["records"]
    )
    # every crop position of every image lies inside one of that image's sub-images
    corners: dict[int, list] = {}
    for name in tfrecord.shard_files(source.tfrecord_dir, manifest):
        for raw in tf.data.TFRecordDataset(name):
            f = tf.io.parse_single_example(raw, tfrecord.feature_spec())
            assert int(f["hr_height"]) == int(f["hr_width"]) == 80
            corners.setdefault(int(f["image"]), []).append((int(f["y"]), int(f["x"])))
    for i, (h, w) in enumerate(source.images.sizes):
        inside = np.zeros((h - crop + 1, w - crop + 1), bool)
        for y, x in corners[i]:
            inside[y : y + 80 - crop + 1, x : x + 80 - crop + 1] = True
        assert inside.all(), source.images.files[i].name


@pytest.mark.slow
def test_read_crops_are_uniform_inside_their_sub_image_and_seeded(compose, photo_dir, tmp_path):
    source = _source(compose, photo_dir, tmp_path, "data.deterministic=true")
    params = source.params()
    images = [load_y(p) for p in source.images.files]
    span = 80 - params.crop + 1  # positions per axis inside a sub-image
    batches = list(source.patch_dataset().take(40))
    for batch in batches[:6]:  # the crop is a real window of its image
        for hr, i in zip(batch["hr"].numpy()[..., 0], batch["image"].numpy()):
            assert hr.shape == (params.crop, params.crop)
            assert _find(hr, images[i]), "a crop that is not in its source image"
    # offsets inside the sub-image: crops of sub-images whose pixels hold their own positions
    sub = {"hr": tf.reshape(tf.range(80 * 80, dtype=tf.int32), [1, 80, 80, 1])}
    sub["hr"] = tf.tile(sub["hr"], [4096, 1, 1, 1])
    cut = tfrecord.random_crops(sub, params, seed=tf.constant([5, 7], tf.int64))["hr"].numpy()
    offsets = np.stack([cut[:, 0, 0, 0] // 80, cut[:, 0, 0, 0] % 80], axis=1)
    assert offsets.min() == 0 and offsets.max() == span - 1  # both ends reached
    counts = np.bincount(offsets.ravel(), minlength=span)
    expected = offsets.size / span
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < span + 4 * np.sqrt(2 * span), chi2  # uniform (mean chi2 = span - 1)
    # the same seed reads the same crops; a resumed iterator continues the stream exactly
    again = _source(compose, photo_dir, tmp_path / "b", "data.deterministic=true")
    again = list(again.patch_dataset().take(40))
    for a, b in zip(batches, again):
        np.testing.assert_array_equal(a["hr"], b["hr"])

    def read():
        manifest = tfrecord.read_manifest(source.tfrecord_dir)
        return tfrecord.read_patches(
            source.tfrecord_dir,
            manifest,
            8,
            source.buffer_records,
            seed=source.stream_seed,
            deterministic=True,
        )

    it = iter(read())
    for _ in range(5):
        next(it)
    ckpt = tf.train.Checkpoint(it=it)
    path = ckpt.write(str(tmp_path / "it"))
    want = [next(it)["hr"].numpy() for _ in range(3)]
    fresh = iter(read())
    tf.train.Checkpoint(it=fresh).read(path).assert_consumed()
    for w in want:
        np.testing.assert_array_equal(next(fresh)["hr"].numpy(), w)


@pytest.mark.slow
def test_pre_made_lr_crops_stay_aligned_with_their_hr(compose, photo_dir, tmp_path):
    lr_dir = tmp_path / "lr"
    lr_dir.mkdir()
    for p in sorted(photo_dir.glob("*.png")):  # a stand-in LR: every 4th pixel of the HR
        im = np.asarray(Image.open(p))
        Image.fromarray(im[::4, ::4]).save(lr_dir / p.name)
    source = _source(compose, photo_dir, tmp_path, f"data.lr_dir={lr_dir}")
    params = source.params()
    assert params.align == 4 and params.stride % 4 == 0
    for batch in source.patch_dataset().take(5):
        hr, lr = batch["hr"].numpy()[..., 0], batch["lr"].numpy()[..., 0]
        assert hr.shape[1:] == (32, 32) and lr.shape[1:] == (8, 8)
        for h, low, i in zip(hr, lr, batch["image"].numpy()):
            image = load_y(source.images.files[i])
            (y, x), *_ = _find(h, image)
            assert y % 4 == 0 and x % 4 == 0
            want = load_y(lr_dir / source.images.files[i].name)
            np.testing.assert_array_equal(low, want[y // 4 : y // 4 + 8, x // 4 : x // 4 + 8])


@pytest.mark.parametrize(
    "subimage, extra, error, words",
    [
        (40, (), ConfigError, "smaller than the crop 48"),
        (80, ("data.stride=40",), ConfigError, "use at most 33"),
        (
            170,
            (),
            ConfigError,
            r"than 7 image\(s\) .*astronaut_00.png \(168x160\).*use at most 160",
        ),
    ],
)
def test_bad_sub_image_settings_are_refused_at_start_up(
    compose, photo_dir, tmp_path, subimage, extra, error, words
):
    with pytest.raises(error, match=words):
        _source(compose, photo_dir, tmp_path, *extra, subimage=subimage)
    assert not (tmp_path / "set").exists()  # refused before any shard is written


def test_a_patch_set_written_before_sub_images_existed_is_still_fresh(
    compose, photo_dir, tmp_path
):
    source = _source(compose, photo_dir, tmp_path, subimage=0)
    assert source.params().stride == 64
    path = source.tfrecord_dir / tfrecord.MANIFEST
    manifest = json.loads(path.read_text())
    del manifest["params"]["subimage"]  # as an older version wrote it
    path.write_text(json.dumps(manifest))
    assert (
        tfrecord.stale_reason(manifest, source.tfrecord_dir, source.images, source.params())
        is None
    )
    # and the sub-image layout is another set: it is rebuilt
    sub = _source(compose, photo_dir, tmp_path)
    assert tfrecord.read_manifest(sub.tfrecord_dir)["params"]["subimage"] == 80


def test_memory_of_the_shuffle_buffer_is_that_of_the_patches(compose, photo_dir, tmp_path):
    source = _source(compose, photo_dir, tmp_path, "data.shuffle_buffer=100")
    assert source.buffer_records == 100 * 48**2 // 80**2
    assert (
        _source(
            compose, photo_dir, tmp_path / "p", "data.shuffle_buffer=100", subimage=0
        ).buffer_records
        == 100
    )


def test_each_layout_has_its_own_default_shard_folder(compose, photo_dir):
    """Runs of one folder with different layouts must not rebuild each other's shards (a reader
    would find its files replaced); the patch layout keeps the folder it always had."""
    import hashlib

    def folder(*extra):
        cfg = compose("data=tfrecord", f"data.hr_dir={photo_dir}", "data.patch_size=32", *extra)
        return sr.config.build_source(cfg).tfrecord_dir

    digest = hashlib.sha1(str(photo_dir.resolve()).encode()).hexdigest()[:8]
    patches = folder()
    assert patches.name == f"hr-{digest}"
    layouts = {
        patches,
        folder("data.subimage_size=80"),
        folder("data.lr_from=rgb"),
        folder("data.subimage_size=80", "data.lr_from=rgb"),
    }
    assert {p.name for p in layouts} == {
        f"hr-{digest}",
        f"hr-{digest}-sub80",
        f"hr-{digest}-rgb",
        f"hr-{digest}-sub80-rgb",
    }
