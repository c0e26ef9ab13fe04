"""The LR operator against an independent NumPy transcription of MATLAB ``imresize``; its
geometry (kernel radius, crop margin, minimum sizes); its fast matrix form; and the colour order
each use takes (evaluation: RGB, then LR, then Y; training: Y, then LR)."""

import numpy as np
import pytest
import tensorflow as tf

from sr.core.color import y_channel
from sr.core.degrade import (
    KERNEL_RADIUS,
    MIN_LR_SIZE,
    bicubic_downscale,
    bicubic_upscale,
    crop_margin,
    downscale_matrix,
    flip_batch,
    make_lr,
    min_hr_size,
    quantize,
)
from sr.evaluation import prepare
from tests.conftest import photo


def _cubic(x):
    ax = np.abs(x)
    return np.where(
        ax <= 1,
        1.5 * ax**3 - 2.5 * ax**2 + 1,
        np.where(ax <= 2, -0.5 * ax**3 + 2.5 * ax**2 - 4 * ax + 2, 0.0),
    )


def _matlab_weights(in_len, out_len, scale):
    """MATLAB imresize.m ``contributions`` (bicubic, antialiasing on), 0-based indices."""
    width = 4.0
    if scale < 1:
        kernel = lambda x: scale * _cubic(scale * x)  # noqa: E731
        width /= scale
    else:
        kernel = _cubic
    x = np.arange(1, out_len + 1, dtype=np.float64)
    u = x / scale + 0.5 * (1 - 1 / scale)
    left = np.floor(u - width / 2)
    taps = int(np.ceil(width)) + 2
    idx = left[:, None] + np.arange(taps)[None, :]
    w = kernel(u[:, None] - idx)
    w /= w.sum(axis=1, keepdims=True)
    aux = np.concatenate([np.arange(in_len), np.arange(in_len)[::-1]])  # mirror, MATLAB style
    idx = aux[np.mod(idx - 1, 2 * in_len).astype(int)]
    return w, idx


def matlab_imresize(img, scale):
    """MATLAB ``imresize(img, scale, 'bicubic')`` on a float [H, W] array, rows then columns."""
    out = img.astype(np.float64)
    for axis in (0, 1):
        n = out.shape[axis]
        w, idx = _matlab_weights(n, int(np.ceil(n * scale)), scale)
        moved = np.moveaxis(out, axis, 0)
        res = np.einsum("ok,ok...->o...", w, moved[idx])
        out = np.moveaxis(res, 0, axis)
    return out


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_downscale_equals_matlab_on_a_real_photo(scale):
    hr = photo("camera")[:96, :120].astype(np.float64)
    want = matlab_imresize(hr, 1 / scale)
    got = bicubic_downscale(hr[..., None], scale).numpy()[..., 0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=2e-3)  # float32 sums of 0..255 values


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_upscale_equals_matlab(scale):
    lr = photo("camera")[100:124, 200:230].astype(np.float64)
    want = matlab_imresize(lr, scale)
    got = bicubic_upscale(lr[..., None], scale).numpy()[..., 0]
    np.testing.assert_allclose(got, want, atol=2e-3)


def test_plain_tf_resize_differs_at_borders_only():
    # Why the padding exists: tf.image.resize renormalises truncated kernels at the borders.
    hr = photo("astronaut")[200:296, 200:296, :1].astype(np.float32)[None]
    plain = tf.image.resize(hr, [24, 24], "bicubic", antialias=True).numpy()[0, ..., 0]
    ours = bicubic_downscale(hr, 4).numpy()[0, ..., 0]
    interior = np.abs(plain - ours)[2:-2, 2:-2].max()
    assert interior < 1e-3
    assert np.abs(plain - ours)[0].max() > max(0.05, 100 * interior)


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_crop_margin_is_the_kernel_reach_and_gives_the_lr_of_the_whole_image(scale):
    m = crop_margin(scale)
    assert m == KERNEL_RADIUS * scale == 2 * scale
    img = photo("astronaut")[..., 1].astype(np.float64)[:240, :240, None]
    full = bicubic_downscale(img, scale).numpy()
    # an HR patch of 24 s pixels at (10 s, 16 s), cropped with its margin
    r, c, p = 10 * scale, 16 * scale, 24 * scale
    crop = img[r - m : r + p + m, c - m : c + p + m]
    got = bicubic_downscale(crop, scale, margin=m).numpy()
    assert got.shape == (24, 24, 1)
    np.testing.assert_allclose(got, full[10:34, 16:40], atol=1e-3)
    # Why 2 s: with a margin of s only, the kernel of the outer LR pixels leaves the crop (its
    # tails are small, but far above float rounding and enough to flip 8-bit roundings).
    small = img[r - scale : r + p + scale, c - scale : c + p + scale]
    border = np.abs(bicubic_downscale(small, scale, margin=scale).numpy() - full[10:34, 16:40])
    assert border[0].max() > 0.02 and border[2:-2, 2:-2].max() < 1e-3


def test_minimum_sizes():
    assert MIN_LR_SIZE == 3 and min_hr_size(4) == 12 and min_hr_size(2) == 6
    assert bicubic_upscale(np.zeros((3, 3, 1)), 4).shape == (12, 12, 1)
    with pytest.raises(ValueError, match="at least 3x3 pixels, got 2x3"):
        bicubic_upscale(np.zeros((2, 3, 1)), 4)
    rgb = photo("coffee")
    assert prepare(rgb[:12, :13], 4).lr.shape == (3, 3, 3)  # cropped to 12x12
    with pytest.raises(ValueError, match="at least 12 pixels"):
        prepare(rgb[:11, :40], 4, "tiny.png")


def test_make_lr_is_the_quantized_bicubic_downscale():
    rgb = photo("chelsea")[:120, :160]
    want = quantize(bicubic_downscale(rgb, 4)).numpy()
    got = make_lr(rgb, 4).numpy()
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32 and got.shape == (30, 40, 3)
    np.testing.assert_array_equal(got, np.rint(got))
    assert got.min() >= 0 and got.max() <= 255
    crop = rgb[:, :, :1]
    want = quantize(bicubic_downscale(crop, 4, margin=8)).numpy()
    np.testing.assert_array_equal(make_lr(crop, 4, margin=8).numpy(), want)


def _y_crops(n=16, size=112):
    y = photo("astronaut")[..., 1]
    rng = np.random.default_rng(0)
    corners = rng.integers(0, y.shape[0] - size, size=(n, 2))
    return np.stack([y[r : r + size, c : c + size] for r, c in corners])[..., None]


def test_downscale_matrix_is_the_operator():
    x = _y_crops(4).astype(np.float32)
    w = downscale_matrix(112, 4, 8)
    assert w.shape == (24, 112)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-5)  # normalised weights
    got = np.einsum("ik,bkl,jl->bij", w, x[..., 0], w)
    np.testing.assert_allclose(got, bicubic_downscale(x, 4, margin=8).numpy()[..., 0], atol=2e-3)


def test_matrix_form_of_make_lr_with_flips_is_the_lr_of_the_flipped_crops():
    hr = tf.constant(_y_crops())
    coins = np.random.default_rng(1).random((3, 16)) < 0.5
    flips = tuple(tf.constant(c) for c in coins)
    got = make_lr(hr, 4, 8, flips=flips).numpy()  # matrix form, flips in the matrices
    assert got.shape == (16, 24, 24, 1) and got.dtype == np.float32
    want = quantize(bicubic_downscale(flip_batch(hr, flips), 4, margin=8)).numpy()
    # float32 summation order only: at most one grey level, on rare rounding ties
    diff = np.abs(got - want)
    assert diff.max() <= 1.0 and (diff > 0).mean() < 0.01
    assert coins[2].any() and not np.array_equal(got, make_lr(hr, 4, 8).numpy())


@pytest.mark.parametrize("rot90", [False, True])
def test_rgb_crops_take_the_lr_and_flips_of_each_channel_alone(rot90):
    """RGB training crops go through the matrix form as stored (channels interleaved, no planes)
    and flip by groups of samples: each channel's LR is the one-channel matrix form's (the Y
    path's), and its flipped pixels that channel's flipped alone."""
    rgb = photo("astronaut")
    corners = np.random.default_rng(0).integers(0, rgb.shape[0] - 112, size=(16, 2))
    hr = tf.constant(np.stack([rgb[r : r + 112, c : c + 112] for r, c in corners]))
    coins = np.random.default_rng(1).random((3, 16)) < 0.5
    flips = (
        tf.constant(coins[0]),
        tf.constant(coins[1]),
        tf.constant(coins[2]) if rot90 else None,
    )
    lr = make_lr(hr, 4, 8, flips=flips).numpy()
    flipped = flip_batch(hr, flips).numpy()
    assert lr.shape == (16, 24, 24, 3) and flipped.dtype == np.uint8
    for k in range(3):
        plane = hr[..., k : k + 1]
        # the same dot products in the same order: measured identical; at most a rounding tie
        diff = np.abs(lr[..., k : k + 1] - make_lr(plane, 4, 8, flips=flips).numpy())
        assert diff.max() <= 1.0 and (diff > 0).mean() < 0.001
        np.testing.assert_array_equal(flipped[..., k : k + 1], flip_batch(plane, flips).numpy())


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_flips_of_several_channels_are_the_numpy_flips(dtype):
    rng = np.random.default_rng(3)
    v, h, t = rng.random((3, 9)) < 0.5
    for shape, transpose in (((9, 10, 14, 3), None), ((9, 12, 12, 2), t)):
        x = rng.integers(0, 256, shape).astype(dtype)
        masks = (tf.constant(v), tf.constant(h), None if transpose is None else tf.constant(t))
        got = flip_batch(tf.constant(x), masks).numpy()
        for i in range(len(x)):
            want = x[i, :: -1 if v[i] else 1, :: -1 if h[i] else 1]
            want = want.transpose(1, 0, 2) if transpose is not None and t[i] else want
            np.testing.assert_array_equal(got[i], want)


# -- which colour order each use takes (sr.core.degrade's module docstring) --


def test_evaluation_makes_lr_from_rgb_then_y():
    rgb = photo("coffee")[:200, :300]  # a real colour photo
    item = prepare(rgb, 4)
    lr_rgb = make_lr(rgb, 4).numpy().astype(np.float64)
    np.testing.assert_array_equal(item.lr, lr_rgb)  # the 8-bit LR of the RGB HR ...
    np.testing.assert_array_equal(item.lr_y, y_channel(lr_rgb))  # ... then its Y
    # Not the LR of the Y (training's order): the 8-bit rounding sits in between.
    lr_of_y = make_lr(y_channel(rgb)[..., None], 4).numpy()[..., 0]
    diff = np.abs(item.lr_y - lr_of_y)
    assert diff.mean() > 0.1 and diff.max() >= 0.5


def test_gray_images_take_the_same_lr_either_way():
    gray = photo("camera")[:96, :128, None]
    item = prepare(gray, 4)
    np.testing.assert_array_equal(
        item.lr_y, make_lr(y_channel(gray)[..., None], 4).numpy()[..., 0]
    )


def test_quantize_rounds_half_away_from_zero_and_clips():
    x = tf.constant([-3.0, 0.49, 0.5, 1.5, 2.5, 254.6, 300.0])
    np.testing.assert_array_equal(quantize(x).numpy(), [0, 0, 1, 2, 3, 255, 255])
    np.testing.assert_allclose(quantize(tf.constant([0.5 / 255]), peak=1.0).numpy(), [1 / 255])


def test_errors_name_the_value():
    with pytest.raises(ValueError, match="not a multiple of scale 4"):
        bicubic_downscale(np.zeros((10, 12, 1)), 4)
    with pytest.raises(ValueError, match="margin 6 must be a multiple of scale 4"):
        bicubic_downscale(np.zeros((16, 16, 1)), 4, margin=6)
    with pytest.raises(ValueError, match="positive integer"):
        bicubic_downscale(np.zeros((16, 16, 1)), 2.5)
    with pytest.raises(ValueError, match="positive integer, got 0"):
        crop_margin(0)
