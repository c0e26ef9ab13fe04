"""The pre-activation VGG19 of the perceptual loss: after its ReLUs it is keras.applications.VGG19
on Keras's own preprocessing of the same image, and bad weights are refused at build time naming
the file and where to get it."""

from __future__ import annotations

import logging

import keras
import numpy as np
import pytest

from sr.core.errors import ConfigError
from sr.models.vgg import (
    LAYERS,
    WEIGHTS_FILE,
    WEIGHTS_URL,
    build_vgg_features,
    keras_name,
    vgg_features_from,
)


@pytest.fixture(scope="module")
def keras_vgg():
    keras.utils.set_random_seed(0)
    return keras.applications.VGG19(include_top=False, weights=None)


def test_post_relu_features_are_keras_vgg19s(keras_vgg):
    """RGB in [0, 1] through ours, ReLU'd, equals Keras's VGG19 (random weights copied in) on
    ``vgg19.preprocess_input(255 x)`` (BGR, Caffe's mean subtracted) at block{i}_conv{j}, whose
    ReLU Keras fuses into the conv; the features before the ReLU have negative values."""
    ours = vgg_features_from(keras_vgg)
    theirs = keras.Model(
        keras_vgg.input, {n: keras_vgg.get_layer(keras_name(n)).output for n in LAYERS}
    )
    rgb = np.random.default_rng(0).random((2, 32, 32, 3), dtype=np.float32)
    pre = ours(rgb)
    expected = theirs(keras.applications.vgg19.preprocess_input(255.0 * rgb))
    assert set(pre) == set(LAYERS)
    for name, size, channels in zip(LAYERS, (32, 16, 8, 4, 2), (64, 128, 256, 512, 512)):
        a, b = pre[name].numpy(), expected[name].numpy()
        assert a.shape == b.shape == (2, size, size, channels), name
        assert (a < 0).mean() > 0.2, name  # pre-activation: about half negative
        np.testing.assert_allclose(np.maximum(a, 0), b, atol=1e-5 * np.abs(b).max(), err_msg=name)
    assert not ours.trainable_weights  # a fixed loss network
    # the conv layers after conv5_4 (none) and the last pool are not built
    assert sum(isinstance(la, keras.layers.MaxPooling2D) for la in ours.layers) == 4


def test_the_rgb_order_matters(keras_vgg):
    """The first kernel's channels are reversed for RGB input: swapping R and B of the image
    changes the features (so the check above would catch a missing reversal)."""
    ours = vgg_features_from(keras_vgg, layers=("conv1_2",))
    rgb = np.random.default_rng(1).random((1, 16, 16, 3), dtype=np.float32)
    a, b = ours(rgb)["conv1_2"].numpy(), ours(rgb[..., ::-1].copy())["conv1_2"].numpy()
    assert np.abs(a - b).max() > 0.01 * np.abs(a).max()


def test_a_missing_weights_file_is_refused_naming_it_and_where_to_get_it(tmp_path):
    missing = tmp_path / "vgg19.h5"
    with pytest.raises(ConfigError) as info:
        build_vgg_features(missing)
    message = str(info.value)
    assert str(missing) in message and WEIGHTS_FILE in message and WEIGHTS_URL in message


def test_a_file_that_is_not_the_weights_is_refused(tmp_path):
    bad = tmp_path / WEIGHTS_FILE
    bad.write_bytes(b"not an HDF5 file")
    with pytest.raises(ConfigError, match=f"{bad} is not Keras's {WEIGHTS_FILE}.*{WEIGHTS_URL}"):
        build_vgg_features(bad)


def test_random_weights_warn(caplog):
    with caplog.at_level(logging.WARNING, logger="sr.models.vgg"):
        model = build_vgg_features("random", layers=("conv1_2", "conv2_2"))
    assert "smoke tests only" in caplog.text
    out = model(np.zeros((1, 8, 8, 3), np.float32))
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "conv1_2": (1, 8, 8, 64),
        "conv2_2": (1, 4, 4, 128),
    }


def test_an_unknown_layer_is_refused(keras_vgg):
    with pytest.raises(ValueError, match="block6_conv1"):
        vgg_features_from(keras_vgg, layers=("conv6_1",))
