"""RRDBNet (ESRGAN / Real-ESRGAN's generator): Real-ESRGAN's size counted from the reference's
layers, its structure, the scales it takes and refuses, and its receptive field at each scale.
Training, evaluation, upscaling and export: tests/test_recipes.py (every YAML of conf/model/)
and tests/test_efficient_models.py (both data modes, Y and RGB)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from sr.core.errors import ConfigError
from sr.inference import receptive_radius
from sr.models.complexity import parameters
from sr.models.layers import LeakyReLU, UpSampling2D
from sr.models.registry import make_model


def conv(k: int, c_in: int, c_out: int) -> int:
    return k * k * c_in * c_out + c_out


def rrdbnet_params(c: int, f: int = 64, blocks: int = 23, g: int = 32, stages: int = 2) -> int:
    """RRDBNet by BasicSR's layers (basicsr/archs/rrdbnet_arch.py): conv_first, blocks x 3 RDBs
    of five dense convs, conv_body, one conv per upsampling stage, conv_hr, conv_last."""
    rdb = sum(conv(3, f + k * g, g) for k in range(4)) + conv(3, f + 4 * g, f)
    return conv(3, c, f) + blocks * 3 * rdb + conv(3, f, f) * (2 + stages) + conv(3, f, c)


@pytest.fixture(scope="module")
def x4plus():
    """Real-ESRGAN's RRDBNet_x4plus: RGB, x4, 23 blocks, 64 features, growth 32 (the defaults)."""
    keras.utils.set_random_seed(0)
    return make_model("rrdbnet", 4, 3)


@pytest.mark.slow
def test_parameters_are_real_esrgans(x4plus):
    """16.70 M (Real-ESRGAN's RRDBNet_x4plus: 16,697,987 in PyTorch), within 0.5 % and exactly
    the reference's layers counted by hand."""
    n = parameters(x4plus)
    assert n == x4plus.count_params() == rrdbnet_params(3) == 16_697_987
    assert abs(n - 16.70e6) / 16.70e6 < 0.005


def test_structure_is_the_papers(x4plus):
    """23 x 3 x 5 dense convs + 6 others; nearest x2 upsampling twice; leaky ReLU 0.2 after
    every dense conv but the fifth and after the three convs of the upsampler; residual scaling
    0.2 on 23 x 3 RDBs and 23 RRDBs; a receptive field of 1 + 345 + 1 LR convs and the
    upsampler's four convs at 2x and 4x."""
    layers = x4plus.layers
    assert sum(isinstance(la, keras.layers.Conv2D) for la in layers) == 23 * 15 + 6
    ups = [la for la in layers if isinstance(la, UpSampling2D)]
    assert [(tuple(la.size), la.interpolation) for la in ups] == [((2, 2), "nearest")] * 2
    slopes = [la.negative_slope for la in layers if isinstance(la, LeakyReLU)]
    assert slopes == [0.2] * (23 * 3 * 4 + 3)
    scales = [la.scale for la in layers if isinstance(la, keras.layers.Rescaling)]
    assert scales == [0.2] * (23 * 4)
    assert receptive_radius(x4plus) == 1 + 345 + 1 + 1 / 2 + 3 / 4


def test_dense_convs_start_small_as_the_reference():
    """BasicSR's default_init_weights(scale=0.1): He normal times 0.1, zero bias."""
    keras.utils.set_random_seed(0)
    model = make_model("rrdbnet", 4, 1, features=64, blocks=1)
    convs = [la for la in model.layers if isinstance(la, keras.layers.Conv2D)]
    dense = convs[1:16]  # after the head: the 15 convs of the RRDB
    for layer in dense:
        kernel, bias = (w.numpy() for w in layer.weights)
        fan_in = np.prod(kernel.shape[:3])
        assert kernel.std() == pytest.approx(0.1 * np.sqrt(2 / fan_in), rel=0.05)
        assert not bias.any()
    body = convs[16].kernel.numpy()  # the trunk's last conv: Keras's default, Glorot uniform
    assert body.std() == pytest.approx(np.sqrt(2 / (2 * 9 * 64)), rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("scale, stages", [(2, [2]), (3, [3]), (4, [2, 2]), (8, [2, 2, 2])])
def test_scales_and_their_receptive_fields(scale, stages):
    """x2, x3, x8: nearest stages as ESRGAN's first code; any LR size; the tiler's radius is the
    LR convs plus each upsampler conv at its resolution, the last two at the output's."""
    model = make_model("rrdbnet", scale, 3, features=8, blocks=1, growth=8)
    out = model(np.zeros((1, 7, 9, 3), np.float32))
    assert tuple(out.shape) == (1, 7 * scale, 9 * scale, 3) and out.dtype == "float32"
    ups = [la.size[0] for la in model.layers if isinstance(la, UpSampling2D)]
    assert ups == stages
    factors = np.cumprod(stages)
    expected = 1 + 15 + 1 + sum(1 / factors) + 2 / scale
    assert receptive_radius(model) == pytest.approx(expected)
    assert parameters(model) == rrdbnet_params(3, 8, 1, 8, len(stages))


@pytest.mark.parametrize("scale", [1, 5, 6, 16])
def test_other_scales_are_refused_naming_data_scale(scale):
    expected = f"supports data.scale 2, 3, 4 and 8.*data.scale={scale}"
    with pytest.raises(ConfigError, match=expected):
        make_model("rrdbnet", scale, 3, features=8, blocks=1)


def test_an_empty_trunk_is_refused():
    with pytest.raises(ConfigError, match="model.blocks must be an integer >= 1, got 0"):
        make_model("rrdbnet", 4, 3, blocks=0)
