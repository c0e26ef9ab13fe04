"""``data.lr_from=rgb``: training LR made from the RGB HR, then Y, as evaluation makes it."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sr.config
from sr.core.color import y_channel, y_rounded
from sr.core.degrade import crop_margin, flip_batch, make_lr
from sr.core.errors import ConfigError
from sr.core.images import load_image
from sr.data import tfrecord
from sr.data.pairs import make_pairs, random_masks
from sr.evaluation import prepare

from .conftest import photo

S = 4
M = crop_margin(S)


def test_rounded_y_in_the_graph_is_exactly_the_numpy_one():
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (200_000, 3), dtype=np.uint8)
    # every exact half of the formula: 65481 R + 128553 G + 24966 B = 255000 k + 127500
    halves = [
        (r, g, b)
        for r in range(0, 256, 5)
        for g in range(256)
        for b in range(256)
        if (65481 * r + 128553 * g + 24966 * b) % 255000 == 127500
    ]
    rgb = np.concatenate([rgb, np.array(halves, np.uint8).reshape(-1, 3)])
    assert halves, "the sweep found no exact half"
    got = y_rounded(tf.constant(rgb))[..., 0].numpy()
    np.testing.assert_array_equal(got, y_channel(rgb[np.newaxis])[0])


def _crop(image, y, x, c):
    return tf.constant(image[np.newaxis, y : y + c, x : x + c])


def test_rgb_pairs_are_the_evaluation_lr_at_the_crop_and_commute_with_flips():
    image = photo("astronaut")[:200, :200]  # RGB
    ev = prepare(image, S)
    p, c = 24, 24 * S + 2 * M
    for y, x in [(0, 0), (40, 64), (200 - c, 200 - c)]:
        lr, hr = make_pairs(_crop(image, y, x, c), S, M, flips="none", gray=tf.constant([False]))
        want = ev.lr_y[(y + M) // S : (y + M) // S + p, (x + M) // S : (x + M) // S + p]
        np.testing.assert_allclose(lr[0, ..., 0].numpy() * 255, want, atol=1e-3)
        want_hr = y_channel(image[y + M : y + c - M, x + M : x + c - M])
        np.testing.assert_array_equal(np.round(hr[0, ..., 0].numpy() * 255), want_hr)
    # flips and transposes: the pairs of the flipped crop are the flipped pairs
    batch = tf.concat([_crop(image, 8 * k, 4 * k, c) for k in range(8)], axis=0)
    gray = tf.zeros([8], tf.bool)
    seed = tf.constant([3, 9], tf.int64)
    lr, hr = make_pairs(batch, S, M, flips="hv", rot90=True, seed=seed, gray=gray)
    lr0, hr0 = make_pairs(batch, S, M, flips="none", gray=gray)
    masks = random_masks(batch, "hv", True, seed)
    assert 0 < int(tf.reduce_sum(tf.cast(tf.stack(masks), tf.int32))) < 24
    np.testing.assert_allclose(lr, flip_batch(lr0, masks), atol=1e-6)
    np.testing.assert_array_equal(hr, flip_batch(hr0, masks))


def test_gray_crops_give_the_y_order_pairs():
    gray = photo("camera")[:160, :160]
    c = 24 * S + 2 * M
    rgb = np.repeat(gray[..., np.newaxis], 3, axis=-1)
    lr, hr = make_pairs(_crop(rgb, 8, 12, c), S, M, flips="none", gray=tf.constant([True]))
    lr_y, hr_y = make_pairs(_crop(gray[..., np.newaxis], 8, 12, c), S, M, flips="none")
    np.testing.assert_array_equal(lr, lr_y)
    np.testing.assert_array_equal(hr, hr_y)
    # and unflagged, the same values are read as RGB: Y of equal R, G, B is not the gray value
    lr_rgb, _ = make_pairs(_crop(rgb, 8, 12, c), S, M, flips="none", gray=tf.constant([False]))
    assert np.abs(lr_rgb.numpy() - lr_y.numpy()).max() > 5 / 255


def _source(compose, photo_dir, tmp_path, mode, *extra):
    cfg = compose(
        f"data={mode}",
        f"data.hr_dir={photo_dir}",
        "data.val_dir=null",
        "data.lr_from=rgb",
        "data.batch_size=8",
        "data.patch_size=32",
        "data.flips=none",
        *(
            [f"data.tfrecord_dir={tmp_path / 'set'}", "data.num_shards=2"]
            if mode == "tfrecord"
            else []
        ),
        *extra,
    )
    source = sr.config.build_source(cfg)
    source.prepare()
    return source


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["tfrecord", "generator"])
def test_both_modes_feed_rgb_crops_and_make_the_lr_from_them(compose, photo_dir, tmp_path, mode):
    source = _source(compose, photo_dir, tmp_path, mode)
    assert source.hr_channels == 3
    images = [load_image(p) for p in source.images.files]
    seen_gray = set()
    for n, batch in enumerate(source.patch_dataset().take(6)):
        hr = batch["hr"].numpy()
        assert hr.shape == (8, 48, 48, 3)
        lr, target = source.to_pairs(batch, tf.constant(n, tf.int64))
        for k, i in enumerate(batch["image"].numpy()):
            is_gray = images[i].shape[-1] == 1
            assert bool(batch["gray"][k]) == is_gray
            seen_gray.add(is_gray)
            planes = hr[k, ..., :1] if is_gray else hr[k]
            if is_gray:
                assert (hr[k] == hr[k, ..., :1]).all()
            want = y_channel(make_lr(planes.astype(np.float64), S).numpy())  # the definition
            want = want[M // S : -M // S, M // S : -M // S]
            np.testing.assert_allclose(lr[k, ..., 0].numpy() * 255, want, atol=1e-3)
            np.testing.assert_array_equal(
                np.round(target[k, ..., 0].numpy() * 255), y_channel(planes)[M:-M, M:-M]
            )
    assert seen_gray == {True, False}  # the folder's gray photos and its colour ones
    if mode == "tfrecord":
        manifest = tfrecord.read_manifest(source.tfrecord_dir)
        assert manifest["params"]["channel"] == tfrecord.CHANNEL_RGB
        assert tfrecord.verify_shards(source.tfrecord_dir, count=60) == 60
        assert source.buffer_records == source.shuffle_buffer // 3


def test_the_stream_of_each_order_is_its_own(compose, photo_dir, tmp_path):
    rgb = _source(compose, photo_dir, tmp_path, "generator")
    y = _source(compose, photo_dir, tmp_path, "generator", "data.lr_from=y")
    assert rgb.stream_identity() != y.stream_identity()  # a resume cannot continue the other


@pytest.mark.parametrize(
    "overrides, words",
    [
        (("data=generator", "data.lr_from=bgr"), "data.lr_from must be one of y, rgb, got 'bgr'"),
        (("data=tfrecord", "data.lr_from=rgb", "data.lr_dir=/tmp"), "drop one of them"),
        (("data=sequence", "model=espcn_mf", "data.lr_from=rgb"), "set data.lr_from=y"),
    ],
)
def test_lr_from_is_checked_at_start_up(compose, overrides, words):
    with pytest.raises(ConfigError, match=words):
        sr.config.build_source(compose(*overrides))
