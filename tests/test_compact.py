"""SRVGGNetCompact (Real-ESRGAN's compact model, sr/models/compact.py): the size of
realesr-general-x4v3 counted from the reference's layers, its structure and receptive field.
Training, evaluation, upscaling and export of every YAML: tests/test_recipes.py."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from sr.inference import receptive_radius
from sr.models import build_compact
from sr.models.complexity import parameters
from sr.models.layers import LeakyReLU, PixelShuffle, UpSampling2D


def conv(k: int, c_in: int, c_out: int) -> int:
    return k * k * c_in * c_out + c_out


def compact_params(c: int, f: int, n: int, s: int = 4, prelu: bool = True) -> int:
    """SRVGGNetCompact by the reference's layers (realesrgan/archs/srvgg_arch.py): the first
    conv, n body convs, a PReLU of f slopes after each of these, the last conv to C s^2."""
    return conv(3, c, f) + n * conv(3, f, f) + (n + 1) * f * prelu + conv(3, f, c * s * s)


@pytest.fixture(scope="module")
def general_x4v3():
    """realesr-general-x4v3's architecture: RGB, x4, 64 features, 32 convs, PReLU."""
    keras.utils.set_random_seed(0)
    return build_compact(4, 3, features=64, convs=32)


def test_parameters_are_realesr_general_x4v3s(general_x4v3):
    """1,213,296, as PyTorch counts realesr-general-x4v3 (spandrel's Compact(num_feat=64,
    num_conv=32, upscale=4): sum of numel), and the reference's layers counted by hand."""
    n = parameters(general_x4v3)
    assert n == general_x4v3.count_params() == compact_params(3, 64, 32) == 1_213_296
    assert compact_params(3, 64, 16) == 621_424  # realesr-animevideov3


def test_structure_is_the_references(general_x4v3):
    """Layers named as the reference's body list: conv, PReLU (one slope per channel, 0.25 at
    start) x 33, the last conv to 3 x 16 channels, a pixel shuffle of 4, the nearest x4 input
    added; the field reaches 34 LR pixels (34 3x3 convs at LR)."""
    body = [la for la in general_x4v3.layers if la.name.startswith("body_")]
    assert [la.name for la in body] == [f"body_{i}" for i in range(2 * 32 + 3)]
    assert all(isinstance(la, keras.layers.Conv2D) for la in body[0::2])
    prelus = body[1::2]
    assert all(isinstance(la, keras.layers.PReLU) for la in prelus) and len(prelus) == 33
    assert {tuple(la.alpha.shape) for la in prelus} == {(1, 1, 64)}
    assert np.all(prelus[0].alpha.numpy() == 0.25)
    assert body[-1].filters == 48
    shuffles = [la.factor for la in general_x4v3.layers if isinstance(la, PixelShuffle)]
    assert shuffles == [4]
    ups = [la for la in general_x4v3.layers if isinstance(la, UpSampling2D)]
    assert [(tuple(la.size), la.interpolation) for la in ups] == [((4, 4), "nearest")]
    assert receptive_radius(general_x4v3) == 34


def test_output_is_the_nearest_upscaling_plus_the_shuffled_residual():
    """With the last conv at zero, the output is the input repeated 4 x 4 (the reference's
    F.interpolate(mode='nearest')); with a bias only, that plus the shuffled bias, in
    depth_to_space's order (channel (i r + j) C + c to sub-pixel (i, j) of channel c: not
    PyTorch's c r^2 + i r + j, which the state-dict layout permutes)."""
    model = build_compact(4, 3, features=8, convs=2)
    last = model.get_layer("body_6")
    kernel, bias = last.get_weights()
    x = np.random.default_rng(0).random((1, 5, 7, 3), dtype=np.float32)
    last.set_weights([np.zeros_like(kernel), np.zeros_like(bias)])
    nearest = np.repeat(np.repeat(x, 4, axis=1), 4, axis=2)
    np.testing.assert_array_equal(model(x).numpy(), nearest)
    last.set_weights([np.zeros_like(kernel), np.arange(48, dtype=np.float32)])
    out = model(x).numpy() - nearest
    np.testing.assert_allclose(out[0, 2, 1], [(4 * 2 + 1) * 3 + c for c in range(3)], atol=1e-5)
    np.testing.assert_allclose(out[0, 6, 5], out[0, 2, 1], atol=1e-5)


@pytest.mark.parametrize(
    "activation, kind, slope",
    [("relu", keras.layers.ReLU, None), ("leakyrelu", LeakyReLU, 0.1)],
)
def test_other_activations_are_the_references(activation, kind, slope):
    """act_type relu and leakyrelu (slope 0.1) have no parameters of their own."""
    model = build_compact(4, 1, features=8, convs=3, activation=activation)
    acts = [la for la in model.layers if la.name.startswith("body_")][1::2]
    assert len(acts) == 4 and all(type(la) is kind for la in acts)
    if slope is not None:
        assert {la.negative_slope for la in acts} == {slope}
    assert parameters(model) == compact_params(1, 8, 3, prelu=False)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"activation": "gelu"}, "model.activation='gelu': choose one of prelu, relu, leakyrelu"),
        ({"convs": -1}, "integer convs >= 0, got -1"),
        ({"features": 0}, "integer features >= 1, got 0"),
    ],
)
def test_bad_hyperparameters_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match.replace("(", r"\(")):
        build_compact(4, 1, **kwargs)
