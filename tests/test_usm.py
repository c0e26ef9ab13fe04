"""Unsharp masking (``sr.degradations.usm``) against BasicSR's ``usm_sharp`` done by OpenCV.

The reference is BasicSR's formula with ``cv2.filter2D`` (``BORDER_REFLECT_101``) by the
outer product of ``cv2.getGaussianKernel(51, 0)``: the kernel of ``USMSharp`` and the padding
of its ``filter2D``. Blurs differ only by float32 rounding (measured: 3e-7 at most).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import tensorflow as tf

from sr.degradations.usm import gaussian_blur, gaussian_kernel_1d, kernel_side, usm_mask, usm_sharp
from tests.conftest import photo

THRESHOLD = 10.0


def reference(image: np.ndarray, weight=0.5, radius=50, threshold=THRESHOLD):
    """BasicSR ``usm_sharp`` on float32 ``[H, W, C]`` in [0, 1] with OpenCV's filter2D:
    returns ``(out, blurred, mask)``."""
    side = radius + 1 if radius % 2 == 0 else radius
    kernel = cv2.getGaussianKernel(side, 0)
    kernel = np.dot(kernel, kernel.T).astype(np.float32)

    def blur(x):
        return cv2.filter2D(x, -1, kernel, borderType=cv2.BORDER_REFLECT_101).reshape(x.shape)

    blurred = blur(image)
    residual = image - blurred
    mask = (np.abs(residual) * 255 > threshold).astype(np.float32)
    soft_mask = blur(mask)
    sharp = np.clip(image + weight * residual, 0, 1)
    return soft_mask * sharp + (1 - soft_mask) * image, blurred, mask


def crops(size: int) -> np.ndarray:
    """float32 ``[3, size, size, 3]`` in [0, 1]: crops of three real photos."""
    places = (("astronaut", 100, 150), ("coffee", 150, 200), ("chelsea", 60, 120))
    return np.stack(
        [photo(name)[top : top + size, left : left + size] for name, top, left in places]
    ).astype(np.float32) / np.float32(255.0)


@pytest.mark.parametrize("size", [96, 112])
def test_usm_equals_opencv_reference(size):
    """The blur, the hard mask and the output against the OpenCV reference, RGB photo crops.

    A mask sample may only differ where the reference residual is within 1e-3 levels of the
    threshold (rounding); the output then may differ by at most that sample's weight in the
    soft mask (the kernel's peak) times the sharpening step (measured: no mask sample differs,
    output within 2e-7)."""
    images = crops(size)
    kernel = gaussian_kernel_1d(kernel_side(50))
    blurred = gaussian_blur(tf.constant(images), kernel).numpy()
    mask = usm_mask(images, blurred, THRESHOLD).numpy()
    out = usm_sharp(images).numpy()
    for i, image in enumerate(images):
        want, want_blurred, want_mask = reference(image)
        assert np.abs(blurred[i] - want_blurred).max() < 1e-6
        flips = mask[i] != want_mask
        margin = np.abs(np.abs(image - want_blurred)[flips] * 255 - THRESHOLD)
        assert np.all(margin < 1e-3), f"mask differs away from the threshold: {margin.max()}"
        tolerance = 1e-5 + flips.sum() * np.outer(kernel, kernel).max() * 0.5
        assert np.abs(out[i] - want).max() < tolerance
        assert np.abs(want - image).max() > 0.05, "the reference should sharpen visibly"


def test_kernel_is_opencvs():
    """``cv2.getGaussianKernel(side, 0)``: sigma by OpenCV's rule, its fixed small kernels."""
    for side in (1, 3, 5, 7, 9, 11, 21, 51):
        want = cv2.getGaussianKernel(side, 0)[:, 0].astype(np.float32)
        np.testing.assert_allclose(gaussian_kernel_1d(side), want, rtol=0, atol=1e-7)
    assert kernel_side(50) == 51 and kernel_side(51) == 51


def test_gray_and_four_channels_at_the_least_size():
    """26 is the least side for the reflect padding of 25; any number of channels."""
    image = crops(26)[0]
    rgba = np.concatenate([image, image[..., :1]], axis=-1)
    out = usm_sharp(rgba[None]).numpy()[0]
    for c in range(4):
        want = reference(np.ascontiguousarray(rgba[..., c]))[0]
        assert np.abs(out[..., c] - want).max() < 1e-5, c


def test_weight_zero_or_high_threshold_returns_the_input():
    images = crops(64)
    np.testing.assert_allclose(usm_sharp(images, weight=0.0), images, rtol=0, atol=2e-7)
    np.testing.assert_array_equal(usm_sharp(images, threshold=255.0), images)


def test_smaller_than_the_kernel_allows_is_refused():
    with pytest.raises(ValueError, match=r"25x64 pixels are smaller than 26x26"):
        usm_sharp(np.zeros([1, 25, 64, 3], np.float32))
    usm_sharp(np.zeros([1, 25, 64, 3], np.float32), radius=20)  # side 21: 11 suffices


def test_unknown_shapes_in_a_graph_give_the_same_result():
    """The blur matrices are built in the graph from the run-time size."""
    images = crops(40)[:, :, :33]
    spec = [tf.TensorSpec([None, None, None, 3], tf.float32)]
    graph = tf.function(usm_sharp, input_signature=spec)
    np.testing.assert_allclose(graph(images), usm_sharp(images), rtol=0, atol=1e-6)
    assert np.abs(graph(images).numpy()[0] - reference(images[0])[0]).max() < 1e-5
