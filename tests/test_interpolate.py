"""PyTorch's ``interpolate`` as matrices (``sr.degradations.interpolate``): bilinear and bicubic
against OpenCV (the same Keys cubic with a = -0.75 and half-pixel centres as PyTorch, without
antialiasing), area against adaptive average pooling written out, and the scale-factor mapping."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import tensorflow as tf
from skimage import data

import sr.degradations.interpolate as I


def image(h=40, w=52) -> np.ndarray:
    return data.astronaut()[100 : 100 + h, 150 : 150 + w].astype(np.float32) / 255


@pytest.mark.parametrize("size", [(30, 70), (64, 33), (40, 52)])
@pytest.mark.parametrize("mode, flag", [(1, cv2.INTER_LINEAR), (2, cv2.INTER_CUBIC)])
def test_bilinear_and_bicubic_equal_opencvs(size, mode, flag):
    """OpenCV maps ``(i + 0.5) in / out - 0.5``, clamps bilinear at 0 and replicates the border
    for the cubic taps: PyTorch's rules with ``size=`` given (upscaling and downscaling)."""
    x = image()
    ours = I.resize(tf.constant(x[None]), size, mode)[0].numpy()
    ref = cv2.resize(x, (size[1], size[0]), interpolation=flag)
    np.testing.assert_allclose(ours, ref, atol=2e-5)


def adaptive_avg_pool(x: np.ndarray, size) -> np.ndarray:
    """PyTorch's ``adaptive_avg_pool2d`` (``F.interpolate(mode="area")``), written out: output
    pixel i averages input pixels ``floor(i in / out) .. ceil((i + 1) in / out) - 1``."""
    out = np.empty((*size, x.shape[-1]), np.float64)
    for i in range(size[0]):
        r0, r1 = (i * x.shape[0]) // size[0], -(-(i + 1) * x.shape[0] // size[0])
        for j in range(size[1]):
            c0, c1 = (j * x.shape[1]) // size[1], -(-(j + 1) * x.shape[1] // size[1])
            out[i, j] = x[r0:r1, c0:c1].mean(axis=(0, 1))
    return out


@pytest.mark.parametrize("size", [(30, 17), (64, 77), (13, 52)])
def test_area_is_adaptive_average_pooling(size):
    x = image()
    ours = I.resize(tf.constant(x[None]), size, 0)[0].numpy()
    np.testing.assert_allclose(ours, adaptive_avg_pool(x, size), atol=2e-6)


def test_a_scale_factor_maps_coordinates_by_itself():
    """``interpolate(scale_factor=f)`` maps ``(i + 0.5) / f - 0.5`` (recompute_scale_factor
    unset): with f = 0.7 on 40 pixels (28 out) the map differs from the sizes' ratio 40/28 =
    1/0.7 only by rounding, but with f = 0.69 (27 out, ratio 1/0.675) it shifts the samples."""
    x = tf.constant(image()[None])
    by_size = I.resize(x, [27, 35], 1)[0].numpy()
    by_factor = I.resize(x, [27, 35], 1, factor=0.69)[0].numpy()
    assert np.abs(by_size - by_factor).max() > 0.01
    rows = I.resize_matrix(40, 27, "bilinear", 0.69).numpy()
    src = (np.arange(27) + 0.5) / 0.69 - 0.5  # the source coordinate of each output row
    left = np.floor(src).astype(int)
    np.testing.assert_allclose(rows[np.arange(27), left], 1 - (src - left), atol=1e-5)


def test_rows_of_every_matrix_sum_to_one_and_bad_modes_are_refused():
    for mode in I.MODES:
        for n_in, n_out in ((40, 13), (13, 40), (21, 21)):
            rows = I.resize_matrix(n_in, n_out, mode).numpy()
            np.testing.assert_allclose(rows.sum(1), 1, atol=1e-5)
    with pytest.raises(ValueError, match="unknown interpolation 'nearest'"):
        I.resize_matrix(4, 2, "nearest")


def test_separable_is_two_matrix_products():
    x = np.random.default_rng(0).random((3, 9, 7, 2)).astype(np.float32)
    rows = np.random.default_rng(1).random((5, 9)).astype(np.float32)
    cols = np.random.default_rng(2).random((4, 7)).astype(np.float32)
    ours = I.separable(tf.constant(x), tf.constant(rows), tf.constant(cols)).numpy()
    np.testing.assert_allclose(ours, np.einsum("oh,bhwc,pw->bopc", rows, x, cols), rtol=1e-5)
