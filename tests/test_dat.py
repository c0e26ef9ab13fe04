"""DAT (sr/models/dat/) against the official class's outputs: the fixtures of
tests/fixtures/pytorch/ made by make_dat.py with spandrel's copy of the official dat_arch.py, read
with NumPy and safetensors only; the released DAT, DAT-S and DAT-light layouts (keys and shapes)
detected and counted; scripts/upscale.py on a fixture gives PyTorch's pixels. The exports
(``slow``) and the live strict loading into the official class and spandrel (``torch``) run on
the tiny fixtures. tests/test_omnisr.py reuses these helpers."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image
from safetensors.numpy import load_file, save_file

from sr.models.dat import layout as dat
from sr.models.state_dicts.base import StateDictError
from tests.conftest import ROOT
from tests.fake_run import load_script
from tests.test_swinir import check_exports

FIXTURES = ROOT / "tests" / "fixtures" / "pytorch"
EXPECTED = {  # what make_dat.py made, as detect() must read it back
    "dat_tiny": {"embed_dim": 32, "depths": [3, 2], "heads": [2, 4], "split": [2, 4],
                 "expansion": 2.0, "qkv_bias": True, "resi_connection": "1conv",
                 "upsampler": "pixelshuffle", "img_size": 16},
    "dat_light_tiny": {"embed_dim": 32, "depths": [3], "heads": [2], "split": [4, 8],
                       "resi_connection": "3conv", "upsampler": "pixelshuffledirect",
                       "img_size": 8},
}  # fmt: skip
RELEASED = {  # the table and the presets: conf/model/<preset>.yaml
    "DAT": (14_802_051, "dat", {"split": [8, 32], "expansion": 4.0}),
    "DAT-S": (11_212_131, "dat_s", {"split": [8, 16], "expansion": 2.0}),
    "DAT-light": (572_766, "dat_light", {"embed_dim": 60, "depths": [18], "heads": [6],
                                         "resi_connection": "3conv",
                                         "upsampler": "pixelshuffledirect"}),
}  # fmt: skip


def fixture(name: str):
    """``(state, input, output)`` of a fixture: the state dict, NHWC float32 arrays."""
    data = np.load(FIXTURES / f"{name}.npz")
    return load_file(str(FIXTURES / f"{name}.safetensors")), data["input"], data["output"]


def imported(layout, name: str):
    """``(found, model)``: the fixture's state dict detected, built and loaded."""
    state, _, _ = fixture(name)
    found = layout.detect(state)
    model = layout.build(found)
    layout.load(model, {k: v.astype(np.float32) for k, v in state.items()}, found)
    return found, model


def check_against_pytorch(layout, name: str, expected: dict, channels: int = 3):
    """The imported fixture computes PyTorch's output within 1e-4 and detection read the
    script's hyperparameters; returns ``(found, model)``."""
    found, model = imported(layout, name)
    assert (found.kind, found.scale, found.channels) == ("generator", 4, channels)
    assert {k: found.model[k] for k in expected} == expected
    _, x, want = fixture(name)
    got = model(x, training=False).numpy()
    assert got.shape == want.shape == (1, 4 * x.shape[1], 4 * x.shape[2], channels)
    assert 0.02 < float(np.std(want)) < 1.0  # a real signal on the [0, 1] scale
    print(f"{name}: max |Keras - PyTorch| = {np.abs(got - want).max():.2e}")
    assert np.abs(got - want).max() <= 1e-4
    return found, model


def check_dump_is_the_file(layout, name: str, found, model):
    """What dump() writes of the loaded fixture (``found``, ``model``) is the file: the same
    keys, the same values (a batch count saved as [1] by the fixture script is PyTorch's
    scalar)."""
    state, _, _ = fixture(name)
    dumped = layout.dump(model, found)
    assert set(dumped) == set(state)
    for k, v in dumped.items():
        assert np.array_equal(np.asarray(v, np.float32).reshape(-1),
                              state[k].astype(np.float32).reshape(-1)), k  # fmt: skip


def check_upscale_gives_pytorchs_pixels(name: str, tmp_path, capsys):
    """scripts/upscale.py on the fixture file and its input as a PNG writes PyTorch's output
    rounded to 8 bits (within one level: rounding ties)."""
    _, x, want = fixture(name)
    image = tmp_path / "in.png"
    pixels = np.round(x[0] * 255).astype(np.uint8)
    Image.fromarray(pixels if pixels.shape[-1] == 3 else pixels[..., 0]).save(image)
    out = tmp_path / "out.png"
    weights = str(FIXTURES / f"{name}.safetensors")
    assert load_script("upscale").main([weights, str(image), str(out), "--no-progress"]) == 0
    got = np.asarray(Image.open(out), np.int32).reshape(want.shape[1:])
    expected = np.round(np.clip(want[0], 0, 1) * 255).astype(np.int32)
    assert np.abs(got - expected).max() <= 1, capsys.readouterr().out


def check_live(layout, name: str, tmp_path):
    """The Keras model of the fixture, perturbed, dumped to .safetensors, loads with
    ``strict=True`` into the official class and spandrel's loader, which compute its output
    (tests/fixtures/pytorch/make_dat.py --live, a process of its own)."""
    for package in ("torch", "spandrel", "einops"):  # spandrel is not imported here (torchvision)
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"the live check needs {package}")
    found, model = imported(layout, name)
    rng = np.random.default_rng(7)
    for v in model.trainable_weights:
        v.assign(v.numpy() + rng.normal(0, 0.02, v.shape).astype(np.float32))
    _, x, _ = fixture(name)
    save_file(layout.dump(model, found), str(tmp_path / "keras.safetensors"))
    np.savez(tmp_path / "x.npz", input=x)
    spec = {"arch": found.arch, "model": found.model, "channels": found.channels,
            "dumped": str(tmp_path / "keras.safetensors"), "input": str(tmp_path / "x.npz"),
            "out": str(tmp_path / "out.npz")}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    argv = [sys.executable, "-m", "tests.fixtures.pytorch.make_dat", "--live",
            str(tmp_path / "spec.json")]  # fmt: skip
    child = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    want = model(x, training=False).numpy()
    assert int(out["scale"]) == 4
    for side in ("official", "spandrel"):
        assert np.abs(out[side] - want).max() <= 1e-4 * max(1.0, float(np.abs(want).max()))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPECTED))
def test_keras_computes_what_pytorch_computed_and_dump_is_the_file(name):
    found, model = check_against_pytorch(dat, name, EXPECTED[name])
    assert found.arch == "dat"
    check_dump_is_the_file(dat, name, found, model)


@pytest.mark.parametrize("name", list(RELEASED))
def test_released_layouts_are_read_and_counted(name):
    """The released DAT, DAT-S and DAT-light (keys and shapes from the official class): read
    as their preset's keys, and their parameters, counted from the keys without building a
    model, are the official class's and the issue's table."""
    layouts = json.loads(gzip.decompress((FIXTURES / "dat_x4_layouts.json.gz").read_bytes()))
    parameters, preset, keys = RELEASED[name]
    entry = layouts[name]
    state = {k: np.zeros(s, np.float32) for k, s in entry["keys"]}
    state["layers.0.blocks.0.attn.attns.0.rpe_biases"][-1] = entry["rpe_biases_last"]
    found = dat.detect(state)
    assert (found.scale, found.channels) == (4, 3)
    assert {k: found.model[k] for k in keys} == keys and found.model["img_size"] == 64
    assert dat.expected_parameters(found.model) == entry["parameters"] == parameters
    text = (ROOT / "conf" / "model" / f"{preset}.yaml").read_text()
    assert f"{parameters:,} parameters" in text.replace("\n# ", " ")


def test_other_scales_are_refused_naming_what_was_found():
    state, _, _ = fixture("dat_light_tiny")
    state = dict(state, **{"upsample.0.weight": np.zeros((12, 32, 3, 3), np.float32),
                           "upsample.0.bias": np.zeros(12, np.float32)})  # fmt: skip
    with pytest.raises(StateDictError, match="scale 2 .*upsample.0.*only x4"):
        dat.detect(state)
    state, _, _ = fixture("dat_tiny")
    state = {k: v for k, v in state.items() if not k.startswith("upsample.2")}
    with pytest.raises(StateDictError, match="scale 2 .*upsample.N.*only x4"):
        dat.detect(state)


def test_missing_extra_and_misshapen_keys_are_named():
    state, _, _ = fixture("dat_light_tiny")
    found = dat.detect(state)
    model = dat.build(found)
    before = [v.numpy().copy() for v in model.weights[:3]]
    state = dict(state)
    del state["layers.0.blocks.1.attn.temperature"]
    state["layers.0.blocks.0.attn.extra"] = np.zeros(1, np.float32)
    state["norm.bias"] = np.zeros(5, np.float32)
    with pytest.raises(StateDictError) as e:
        dat.load(model, state, found)
    for text in (
        "1 missing: layers.0.blocks.1.attn.temperature",
        "1 extra: layers.0.blocks.0.attn.extra",
        "norm.bias (5,) (expected (32,))",
    ):
        assert text in str(e.value)  # fmt: skip
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.weights[:3]))


@pytest.mark.slow
def test_upscale_py_gives_pytorchs_pixels(tmp_path, capsys):
    check_upscale_gives_pytorchs_pixels("dat_light_tiny", tmp_path, capsys)


@pytest.mark.slow
def test_tflite_and_onnx_exports_reach_45_db_against_pytorch(tmp_path):
    check_exports(dat, "dat_light_tiny", tmp_path)


@pytest.mark.slow
def test_mixed_precision_output_is_float32_and_close():
    """Under mixed_bfloat16 the tiny fixture's model returns float32 near PyTorch's output
    (softmax, norms in float32)."""
    import keras

    state, x, want = fixture("dat_light_tiny")
    found = dat.detect(state)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = dat.build(found)
        dat.load(model, {k: v.astype(np.float32) for k, v in state.items()}, found)
        got = model(x, training=False)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert got.dtype == "float32"
    assert np.abs(np.asarray(got) - want).max() < 0.1


@pytest.mark.torch
@pytest.mark.slow
def test_live_strict_loading_in_the_official_class_and_spandrel(tmp_path):
    check_live(dat, "dat_light_tiny", tmp_path)
