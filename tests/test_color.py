"""sr.core.color against an independent implementation of MATLAB ``rgb2ycbcr``/``ycbcr2rgb``:
scikit-image's ``skimage.color``, on random colours, every colour, and real photos."""

import numpy as np
import pytest
import skimage.color
import tensorflow as tf
from PIL import Image

from sr.core.color import rgb_to_ycbcr, y_channel, ycbcr_to_rgb
from tests.conftest import photo

PHOTOS = ("astronaut", "coffee", "chelsea")


def skimage_y(rgb: np.ndarray) -> np.ndarray:
    """Y of MATLAB ``rgb2ycbcr`` by scikit-image (float64, not rounded) of uint8 ``[..., 3]``."""
    return skimage.color.rgb2ycbcr(rgb)[..., 0]


@pytest.fixture(scope="module")
def random_colours() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, size=(64, 80, 3), dtype=np.uint8)


@pytest.mark.parametrize("name", PHOTOS)
def test_float_y_matches_skimage_on_real_photos(name):
    rgb = photo(name)
    y = y_channel(rgb.astype(np.float64))
    assert y.shape == rgb.shape[:2] and y.dtype == np.float64
    np.testing.assert_allclose(y, skimage_y(rgb), atol=1e-9)
    y32 = y_channel(rgb.astype(np.float32))  # float32 in, float64 out (its values are exact)
    assert y32.dtype == np.float64
    np.testing.assert_allclose(y32, skimage_y(rgb), atol=1e-9)


def test_float_y_matches_skimage_on_random_colours_and_keeps_the_range(random_colours):
    y = y_channel(random_colours.astype(np.float64))
    np.testing.assert_allclose(y, skimage_y(random_colours), atol=1e-9)
    corners = np.array([[[0, 0, 0], [255, 255, 255]]], np.float64)
    np.testing.assert_allclose(y_channel(corners), [[16.0, 235.0]], atol=1e-12)  # studio range


@pytest.mark.parametrize("name", PHOTOS)
def test_uint8_y_is_the_rounded_skimage_y_on_real_photos(name):
    rgb = photo(name)
    y = y_channel(rgb)
    assert y.shape == rgb.shape[:2] and y.dtype == np.uint8
    ref = skimage_y(rgb)
    clear = np.abs(ref - np.floor(ref) - 0.5) > 1e-9  # not an exact .5 tie
    np.testing.assert_array_equal(y[clear], np.floor(ref[clear] + 0.5))
    assert clear.mean() > 0.999


@pytest.mark.slow
def test_uint8_y_on_every_colour_differs_from_skimage_only_on_true_halves_rounded_up():
    v = np.arange(256, dtype=np.uint8)
    rgb = np.stack(np.meshgrid(v, v, v, indexing="ij"), axis=-1).reshape(256, 65536, 3)  # 2^24
    ours = y_channel(rgb).astype(np.int64)
    ref = np.concatenate([skimage_y(rgb[i : i + 16]) for i in range(0, 256, 16)])
    frac = ref - np.floor(ref)
    tie = np.abs(frac - 0.5) < 1e-9  # skimage's float sums land within 1e-13 of a half
    assert np.abs(frac - 0.5)[~tie].min() > 1e-6  # the rest are far from a tie
    np.testing.assert_array_equal(ours[~tie], np.floor(ref[~tie] + 0.5))
    # The ties are true halves: 65481 R + 128553 G + 24966 B = (k + 1/2) 255000 exactly, ...
    t = rgb[tie].astype(np.int64)
    num = 65481 * t[:, 0] + 128553 * t[:, 1] + 24966 * t[:, 2]
    assert len(t) > 0 and np.all(num % 255000 == 127500)
    # ... and are rounded up, as MATLAB's uint8 (half away from zero) does.
    np.testing.assert_array_equal(ours[tie], np.floor(ref[tie]) + 1)
    assert ours.min() == 16 and ours.max() == 235


def test_y_is_studio_range_not_full_range_luma():
    # PIL "L" (full range, as tf.image.rgb_to_yuv and OpenCV) gives 255 for white, BT.601 235.
    rgb = np.array([[[255, 255, 255], [0, 0, 0]]], np.uint8)
    assert np.asarray(Image.fromarray(rgb).convert("L")).tolist() == [[255, 0]]
    assert y_channel(rgb).tolist() == [[235, 16]]


@pytest.mark.parametrize("dtype", [np.uint8, np.float64])
def test_gray_is_its_own_y_and_alpha_is_ignored(dtype, random_colours):
    gray = np.arange(256, dtype=np.uint8).reshape(16, 16).astype(dtype)
    want_dtype = np.uint8 if dtype == np.uint8 else np.float64
    alpha = np.full((16, 16, 1), 7, dtype)
    for image in (gray, gray[..., None], np.concatenate([gray[..., None], alpha], -1)):
        y = y_channel(image)
        assert y.shape == (16, 16) and y.dtype == want_dtype
        np.testing.assert_array_equal(y, gray)
    rgb = random_colours.astype(dtype)
    rgba = np.concatenate([rgb, np.zeros_like(rgb[..., :1])], axis=-1)
    np.testing.assert_array_equal(y_channel(rgba), y_channel(rgb))


def test_bad_layouts_and_dtypes_are_named():
    for shape in [(4, 4, 5), (2, 4, 4, 3), (12,)]:
        with pytest.raises(ValueError, match=rf"got shape \({', '.join(map(str, shape))},?\)"):
            y_channel(np.zeros(shape, np.uint8))
    with pytest.raises(TypeError, match="got int64"):
        y_channel(np.zeros((4, 4, 3), np.int64))


@pytest.mark.parametrize("name", PHOTOS)
def test_ycbcr_matches_skimage_both_ways(name):
    rgb = photo(name)
    ycbcr = rgb_to_ycbcr(rgb)
    assert ycbcr.dtype == np.float64
    np.testing.assert_allclose(ycbcr, skimage.color.rgb2ycbcr(rgb), atol=1e-9)
    np.testing.assert_array_equal(ycbcr[..., 0], y_channel(rgb.astype(np.float64)))  # one Y row
    # skimage's ycbcr2rgb returns RGB in [0, 1]
    np.testing.assert_allclose(
        ycbcr_to_rgb(ycbcr), skimage.color.ycbcr2rgb(ycbcr) * 255, atol=1e-9
    )
    np.testing.assert_allclose(ycbcr_to_rgb(ycbcr), rgb, atol=1e-9)


def test_ycbcr_inverse_matches_skimage_off_the_gamut_too():
    ycbcr = np.random.default_rng(1).uniform(0, 255, size=(500, 3))
    np.testing.assert_allclose(
        ycbcr_to_rgb(ycbcr), skimage.color.ycbcr2rgb(ycbcr) * 255, atol=1e-9
    )


def test_ycbcr_on_tensors_matches_numpy(random_colours):
    want = skimage.color.rgb2ycbcr(random_colours)
    for x in (tf.constant(random_colours), tf.constant(random_colours, tf.float32)):
        ycbcr = rgb_to_ycbcr(x)
        assert ycbcr.dtype == tf.float32
        np.testing.assert_allclose(ycbcr.numpy(), want, atol=1e-4)
        np.testing.assert_allclose(ycbcr_to_rgb(ycbcr).numpy(), random_colours, atol=1e-3)


def test_ycbcr_rejects_non_rgb():
    with pytest.raises(
        ValueError, match=r"rgb_to_ycbcr needs \[..., 3\] input, got shape \(2, 4\)"
    ):
        rgb_to_ycbcr(np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"ycbcr_to_rgb needs \[..., 3\] input"):
        ycbcr_to_rgb(tf.zeros((2, 2)))
