"""The LR operator against an independent NumPy transcription of MATLAB ``imresize``."""

import numpy as np
import pytest
import tensorflow as tf

from sr.data.degrade import bicubic_downscale, bicubic_upscale, quantize
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


def test_margin_gives_the_lr_of_the_whole_image():
    img = photo("astronaut")[..., 1].astype(np.float64)[:200, :200, None]
    full = bicubic_downscale(img, 4).numpy()
    # an HR crop at (40, 64) of 96x96 with an 8-pixel margin -> LR rows 10..34, cols 16..40
    crop = img[40 - 8 : 40 + 96 + 8, 64 - 8 : 64 + 96 + 8]
    got = bicubic_downscale(crop, 4, margin=8).numpy()
    assert got.shape == (24, 24, 1)
    np.testing.assert_allclose(got, full[10:34, 16:40], atol=1e-3)


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
