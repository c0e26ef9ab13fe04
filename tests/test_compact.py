"""SRVGGNetCompact (Real-ESRGAN's compact model, sr/models/compact.py) and its PyTorch layout
(sr/models/compact/layout.py): the size of realesr-general-x4v3 counted from the
reference's layers, its structure and receptive field; the PyTorch fixture
(tests/fixtures/pytorch/make_compact.py, spandrel's reference class) read, run within 1e-4 of
PyTorch, written back bit for bit, exported to TFLite and ONNX at 45 dB or more against
PyTorch; the full-size key layout; the files refused. No torch needed but for the one test
marked ``torch``. Training, evaluation, upscaling and export of every YAML:
tests/test_recipes.py."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import keras
import numpy as np
import pytest

from sr.inference import receptive_radius
from sr.models.compact import layout as layout
from sr.models.complexity import parameters
from sr.models.layers import LeakyReLU, PixelShuffle, UpSampling2D
from sr.models.registry import make_model
from sr.models.state_dicts.base import Found, StateDictError
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "pytorch"


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
    return make_model("compact", 4, 3, features=64, convs=32)


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
    model = make_model("compact", 4, 3, features=8, convs=2)
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
    model = make_model("compact", 4, 1, features=8, convs=3, activation=activation)
    acts = [la for la in model.layers if la.name.startswith("body_")][1::2]
    assert len(acts) == 4 and all(type(la) is kind for la in acts)
    if slope is not None:
        assert {la.negative_slope for la in acts} == {slope}
    assert parameters(model) == compact_params(1, 8, 3, prelu=False)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"activation": "gelu"}, "model.activation must be one of prelu, relu, leakyrelu"),
        ({"convs": -1}, "model.convs must be an integer >= 0, got -1"),
        ({"features": 0}, "model.features must be an integer >= 1, got 0"),
    ],
)
def test_bad_hyperparameters_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match.replace("(", r"\(")):
        make_model("compact", 4, 1, **kwargs)


@pytest.fixture(scope="module")
def fixture():
    """The PyTorch fixture: its state dict (NumPy, through safetensors), input and output."""
    from safetensors.numpy import load_file

    arrays = np.load(FIXTURES / "compact.npz")
    return load_file(FIXTURES / "compact.safetensors"), arrays["input"], arrays["output"]


@pytest.fixture(scope="module")
def imported(fixture):
    """The fixture's model, read by the layout."""
    state = fixture[0]
    found = layout.detect(state)
    model = layout.build(found)
    layout.load(model, state, found)
    return model, found


def test_the_fixture_is_detected_as_made(fixture):
    found = layout.detect(fixture[0])
    assert (found.arch, found.kind, found.scale, found.channels) == ("compact", "generator", 4, 3)
    assert found.model == {
        "arch": "compact",
        "features": 8,
        "convs": 2,
        "activation": "prelu",
    }
    assert layout.LAYOUT.detect(fixture[0]) == found and layout.LAYOUT.arch == "compact"


def test_keras_output_is_pytorchs(fixture, imported):
    """The imported model on the fixture's input gives PyTorch's output within 1e-4 (float32;
    RGB, so the pixel shuffle's channel order matters)."""
    _, x, expected = fixture
    got = imported[0](x).numpy()
    assert got.shape == expected.shape == (1, 64, 80, 3)
    assert np.abs(expected).max() > 0.5  # a real output, not a flat one
    assert np.abs(got - expected).max() < 1e-4


def test_dump_of_load_is_the_state_dict_bit_for_bit(fixture, imported):
    state = fixture[0]
    model, found = imported
    back = layout.dump(model, found)
    assert list(back) == list(layout.reference_layout(8, 2, 3))  # the reference's key order
    assert set(back) == set(state)
    for key, value in back.items():
        assert value.dtype == np.float32 and value.flags["C_CONTIGUOUS"], key
        np.testing.assert_array_equal(value, state[key], err_msg=key)


def test_no_tensor_of_the_fixture_is_zero_or_ignored(fixture, imported):
    """Every tensor moves the output: zeroing any one of them changes it (a converter that
    dropped or swapped one would not see it otherwise)."""
    state, x, expected = fixture
    model, found = imported
    for key in state:
        changed = dict(state, **{key: np.zeros_like(state[key])})
        layout.load(model, changed, found)
        assert np.abs(model(x).numpy() - expected).max() > 1e-3, key
    layout.load(model, state, found)


def test_full_size_layout_is_the_references():
    """realesr-general-x4v3's keys and shapes, as the reference class makes them (the committed
    JSON of make_compact.py), are the layout's; a state dict of those shapes (no weights) is
    detected as 64 features, 32 convs, x4 RGB, loads, and has 1,213,296 parameters."""
    ref = json.loads((FIXTURES / "compact_general_x4v3_layout.json").read_text())
    keys = [(k, tuple(shape)) for k, shape in ref["keys"]]
    assert keys == list(layout.reference_layout(64, 32, 3).items())
    assert ref["parameters"] == 1_213_296
    state = {k: np.full(shape, 0.01, np.float32) for k, shape in keys}
    found = layout.detect(state)
    assert found.model["features"] == 64 and found.model["convs"] == 32
    assert (found.scale, found.channels) == (4, 3)
    model = layout.build(found)
    assert parameters(model) == ref["parameters"]
    layout.load(model, state, found)
    dumped = layout.dump(model, found)
    assert [(k, v.shape) for k, v in dumped.items()] == keys


def test_float16_tensors_are_cast(fixture, imported):
    state, x, expected = fixture
    model, found = imported
    layout.load(model, {k: v.astype(np.float16) for k, v in state.items()}, found)
    assert np.abs(model(x).numpy() - expected).max() < 5e-2
    assert all(v.dtype == "float32" for v in model.weights)
    layout.load(model, state, found)


def _with(state, **changes):
    out = dict(state)
    for key, value in changes.items():
        key = key.replace("_", ".")
        if value is None:
            out.pop(key)
        else:
            out[key] = value
    return out


def test_other_architectures_are_not_detected(fixture):
    """RRDBNet's, EDSR's and SPAN's keys are not this layout's (None: the registry asks the
    next one)."""
    w = np.zeros((8, 3, 3, 3), np.float32)
    b = np.zeros(8, np.float32)
    others = [
        {"conv_first.weight": w, "body.0.rdb1.conv1.weight": w},  # RRDBNet
        {"conv_first.weight": w, "body.0.conv1.weight": w, "body.0.conv1.bias": b},  # EDSR
        {"conv_1.sk.weight": w, "block_1.c1_r.sk.weight": w},  # SPAN
        {"model.0.weight": w, "model.0.bias": b},  # old ESRGAN
    ]
    for state in others:
        assert layout.detect(state) is None


def test_refused_files_say_what_was_found(fixture):
    """A 2x model, a relu file, a 4-channel one: StateDictError naming what was found, the first
    keys and what is supported."""
    state = fixture[0]
    x2 = _with(state, body_6_weight=np.zeros((12, 8, 3, 3), np.float32))
    with pytest.raises(StateDictError, match=r"scale 2: 12 = 3 x 2\^2") as e:
        layout.detect(x2)
    assert "first keys body.0.bias" in str(e.value) and "x4 with PReLU" in str(e.value)
    relu = {k: v for k, v in state.items() if v.ndim != 1 or k.endswith(".bias")}
    with pytest.raises(StateDictError, match="no PReLU weights .* relu or leakyrelu"):
        layout.detect(relu)
    odd = _with(state, body_6_weight=np.zeros((40, 8, 3, 3), np.float32))
    with pytest.raises(StateDictError, match="40 output channels, not C s\\^2 for its C = 3"):
        layout.detect(odd)
    gray4 = {k: v for k, v in state.items()}
    gray4["body.0.weight"] = np.zeros((8, 4, 3, 3), np.float32)
    gray4["body.6.weight"] = np.zeros((64, 8, 3, 3), np.float32)
    with pytest.raises(StateDictError, match="4 image channels"):
        layout.detect(gray4)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"body_3_weight": None}, "missing: body.3.weight"),
        ({"body_7_weight": np.ones(8, np.float32)}, "extra: body.7.weight"),
        ({"upsampler_weight": np.ones(8, np.float32)}, "extra: upsampler.weight"),
        (
            {"body_2_bias": np.ones(9, np.float32)},
            r"misshapen: body.2.bias \(9,\) \(expected \(8,\)\)",
        ),
    ],
)
def test_a_state_dict_that_does_not_fit_loads_nothing(fixture, imported, change, message):
    state = fixture[0]
    model, found = imported
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(StateDictError, match=message) as e:
        layout.load(model, _with(state, **change), found)
    assert "nothing was loaded" in str(e.value)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_a_model_of_other_hyperparameters_is_refused_before_any_weight_is_set(fixture):
    state = fixture[0]
    found = layout.detect(state)
    other = make_model("compact", 4, 3, features=16, convs=2)
    before = [w.copy() for w in other.get_weights()]
    with pytest.raises(StateDictError, match="layer body_0 of .* holds shapes"):
        layout.load(other, state, found)
    assert all(np.array_equal(a, b) for a, b in zip(before, other.get_weights()))
    with pytest.raises(StateDictError, match="has no layer body_5"):
        layout.load(make_model("compact", 4, 3, features=8, convs=1), state, found)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_exports_of_the_imported_model_are_pytorchs(fixture, imported, tmp_path, fmt):
    """The TFLite (16 x 16 windows) and ONNX exports of the imported fixture reach 45 dB PSNR
    against PyTorch's own output on the fixture's input: PReLU and the pixel shuffle of an RGB
    model, where ONNX/TF conversions have gone wrong (onnx2tf #91), survive both converters."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("tf2onnx")
    from sr.deploy import Exported, export_model, psnr_float

    _, x, expected = fixture
    record = export_model(imported[0], tmp_path / fmt, fmt, scale=4, size=16)
    assert record["check"]["psnr_db"] >= 45  # against Keras, on the astronaut
    got = Exported(tmp_path / fmt)(x).numpy()
    psnr = psnr_float(got, expected)
    print(f"{fmt}: {psnr:.1f} dB against PyTorch, max |diff| {np.abs(got - expected).max():.2e}")
    assert psnr >= 45


@pytest.mark.torch
@pytest.mark.slow
def test_live_both_ways_against_the_reference_class(tmp_path):
    """With torch, spandrel and safetensors installed: a random reference model (Y, 4 features,
    3 convs) read into Keras gives its output within 1e-4, and a Keras model (RGB, random PReLU
    slopes) written out loads into the reference class with strict=True and gives Keras's output
    within 1e-4. PyTorch runs in a child process (make_compact.py --live): torch's CUDA build
    imports triton, which crashes in a process that has loaded TensorFlow."""
    pytest.importorskip("torch")
    if importlib.util.find_spec("spandrel") is None:  # not imported here: it loads triton
        pytest.skip("spandrel is not installed (the reference class)")
    from safetensors.numpy import load_file, save_file

    keras.utils.set_random_seed(2)
    ours = make_model("compact", 4, 3, features=8, convs=2)
    rng = np.random.default_rng(2)
    for w in ours.weights:  # slopes and biases off their zero / constant starts
        w.assign(w.numpy() + rng.normal(0, 0.05, w.shape).astype(np.float32))
    found = Found("compact", "generator", {"features": 8, "convs": 2}, 4, 3)
    save_file(layout.dump(ours, found), str(tmp_path / "ours.safetensors"))
    x_ref = rng.random((2, 9, 13, 1), dtype=np.float32)
    x_ours = rng.random((1, 11, 7, 3), dtype=np.float32)
    np.save(tmp_path / "x_ref.npy", x_ref)
    np.save(tmp_path / "x_ours.npy", x_ours)
    argv = [sys.executable, "-m", "tests.fixtures.pytorch.make_compact", "--live", str(tmp_path)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]

    state = load_file(str(tmp_path / "ref.safetensors"))
    found = layout.detect(state)
    assert (found.model["features"], found.model["convs"], found.channels) == (4, 3, 1)
    model = layout.build(found)
    layout.load(model, state, found)
    expected = np.load(tmp_path / "ref_out.npy")
    assert np.abs(model(x_ref).numpy() - expected).max() < 1e-4
    got = np.load(tmp_path / "ours_out.npy")
    assert got.shape == (1, 44, 28, 3)
    assert np.abs(got - ours(x_ours).numpy()).max() < 1e-4
