import numpy as np
import tensorflow as tf

from sr.data.color import rgb_to_y
from sr.data.images import image_to_y
from sr.metrics import to_y

# MATLAB rgb2ycbcr on uint8 colours (first output channel, before rounding): black 16, white 235,
# pure R/G/B 16 + 65.481 / 128.553 / 24.966, mid gray 16 + 219 * 128/255.
KNOWN = {
    (0, 0, 0): 16.0,
    (255, 255, 255): 235.0,
    (255, 0, 0): 81.481,
    (0, 255, 0): 144.553,
    (0, 0, 255): 40.966,
    (128, 128, 128): 16.0 + 219.0 * 128 / 255,
}


def test_y_of_known_colours_numpy_and_tf_agree():
    rgb = np.array(list(KNOWN), dtype=np.uint8)
    want = np.array(list(KNOWN.values()))
    np.testing.assert_allclose(rgb_to_y(rgb)[:, 0], want, atol=1e-9)
    np.testing.assert_allclose(rgb_to_y(tf.constant(rgb))[:, 0].numpy(), want, atol=1e-4)
    np.testing.assert_allclose(rgb_to_y(rgb.astype(np.float32))[:, 0], want, atol=1e-4)


def test_y_is_not_full_range_luma():
    # PIL "L" (full range) gives 255 for white; BT.601 studio range gives 235.
    assert image_to_y(np.full((1, 1, 3), 255, np.uint8))[0, 0] == 235
    assert image_to_y(np.zeros((1, 1, 3), np.uint8))[0, 0] == 16


def test_gray_is_its_own_y():
    gray = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
    np.testing.assert_array_equal(image_to_y(gray), gray[..., 0])
    np.testing.assert_array_equal(to_y(gray), gray[..., 0])


def test_rejects_non_rgb():
    import pytest

    with pytest.raises(ValueError, match="shape"):
        rgb_to_y(np.zeros((2, 2, 4)))


def test_integer_y_equals_the_rounded_float_y_on_every_colour():
    from sr.data.color import rgb_to_y_uint8

    v = np.arange(256, dtype=np.uint8)
    rgb = np.stack(np.meshgrid(v, v, v, indexing="ij"), axis=-1).reshape(-1, 3)  # all 2^24
    exact = rgb_to_y_uint8(rgb).astype(np.int64)
    y = rgb_to_y(rgb)[:, 0]
    frac = y - np.floor(y)
    clear = np.abs(frac - 0.5) > 1e-9  # off exact halves, float64 rounding is unambiguous
    np.testing.assert_array_equal(exact[clear], np.floor(y[clear] + 0.5))
    ties = rgb[~clear].astype(np.int64)
    num = 65481 * ties[:, 0] + 128553 * ties[:, 1] + 24966 * ties[:, 2]
    assert np.all((num + 127500) % 255000 == 0)  # the only differences are true halves
    np.testing.assert_array_equal(exact[~clear], 16 + (num + 127500) // 255000)  # rounded up
    assert exact.min() == 16 and exact.max() == 235
