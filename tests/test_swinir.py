"""SwinIR (sr/models/swinir/) against the official class's own outputs: the fixtures of
tests/fixtures/pytorch/ made by make_swinir.py with spandrel's copy of JingyunLiang/SwinIR's
network (pixelshuffle, pixelshuffledirect with 3conv, nearest+conv; inputs whose sides are not
multiples of the window), read with NumPy and safetensors only; the released x4 layouts by
their keys and shapes (swinir_x4_layouts.json.gz). With torch, one test (marker ``torch``)
loads what dump() writes into the official class with ``strict=True``. The helpers here serve
tests/test_hat.py too."""

from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from sr.models.state_dicts.base import StateDictError
from sr.models.swinir import layout as swinir
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "pytorch"
EXPECTED = {  # fixture -> what make_swinir.py made, as detect() must read it back
    "swinir_tiny": {"embed_dim": 12, "depths": [2, 2], "heads": [2, 3], "window": 4,
                    "mlp_ratio": 2.0, "upsampler": "pixelshuffle", "resi_connection": "1conv",
                    "img_size": 16},
    "swinir_light_tiny": {"depths": [2], "heads": [3], "upsampler": "pixelshuffledirect",
                          "resi_connection": "3conv"},
    "swinir_real_tiny": {"depths": [2], "heads": [2], "upsampler": "nearest+conv"},
}  # fmt: skip
RELEASED = {  # the table: x4 RGB parameters of the official class
    "classical": ("swinir", 11_900_199, {"embed_dim": 180, "depths": [6] * 6,
                                          "upsampler": "pixelshuffle", "img_size": 48}),
    "lightweight": ("swinir_light", 929_628, {"embed_dim": 60, "depths": [6] * 4,
                                               "upsampler": "pixelshuffledirect"}),
    "real_m": ("swinir_real", 11_715_559, {"embed_dim": 180, "upsampler": "nearest+conv"}),
}  # fmt: skip


def fixture(name: str):
    """``(state, input, output)`` of a fixture: the state dict (float32), NHWC arrays."""
    data = np.load(FIXTURES / f"{name}.npz")
    state = load_file(str(FIXTURES / f"{name}.safetensors"))
    state = {k: v.astype(np.float32) for k, v in state.items()}
    return state, data["input"], data["output"]


@functools.cache
def imported(layout, name: str):
    """``(found, model)``: the fixture's state dict detected, built and loaded (once)."""
    state, _, _ = fixture(name)
    found = layout.detect(state)
    model = layout.build(found)
    layout.load(model, state, found)
    return found, model


def released(file: str) -> dict:
    """name -> (zero tensors of the released layout's shapes, its parameters)."""
    data = json.loads(gzip.open(FIXTURES / file).read())
    zero = np.float32(0)
    return {n: ({k: np.broadcast_to(zero, s) for k, s in d["shapes"].items()}, d["parameters"])
            for n, d in data.items()}  # fmt: skip


def check_fixture(layout, name: str, expected: dict) -> None:
    found, model = imported(layout, name)
    assert (found.arch, found.scale, found.channels) == (layout.arch, 4, 3)
    assert {k: found.model[k] for k in expected} == expected
    _, x, want = fixture(name)
    got = model(x, training=False).numpy()
    if "light" not in name:  # the others' sides are not multiples of the window
        assert x.shape[1] % found.model["window"] and x.shape[2] % found.model["window"]
    assert got.shape == want.shape == (1, 4 * x.shape[1], 4 * x.shape[2], 3)
    assert 0.05 < float(np.std(want))
    print(f"{name}: max |Keras - PyTorch| = {np.abs(got - want).max():.2e}")
    assert np.abs(got - want).max() <= 1e-4


def check_dump(layout, name: str) -> None:
    state, _, _ = fixture(name)
    found, model = imported(layout, name)
    dumped = layout.dump(model, found)
    assert sorted(dumped) == sorted(state)
    for key, value in dumped.items():
        assert value.dtype == np.float32 and value.flags.c_contiguous, key
        np.testing.assert_array_equal(value, state[key], err_msg=key)


def check_refusals(layout, name: str) -> None:
    """Missing, extra and misshapen keys are named and nothing is set; an x2 upsampler is
    refused naming what was found."""
    state, _, _ = fixture(name)
    found, model = imported(layout, name)
    before = [v.numpy().copy() for v in model.weights]
    bad = dict(state)
    gone = next(k for k in bad if k.endswith("mlp.fc1.weight"))
    del bad[gone]
    bad["extra.weight"] = np.zeros(3, np.float32)
    bad["norm.weight"] = np.zeros(5, np.float32)
    with pytest.raises(StateDictError) as err:
        layout.load(model, bad, found)
    assert gone in str(err.value) and "extra.weight" in str(err.value)
    assert "norm.weight (5,)" in str(err.value)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.weights))


def check_live(layout, name: str, arch: str, kwargs: dict, tmp_path) -> None:
    """dump() of a perturbed imported model loads into the official class with strict=True
    (a child process: tests/fixtures/pytorch/make_swinir.py --live) and computes Keras's
    output."""
    import importlib.util

    for package in ("torch", "safetensors", "einops"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"the live comparison needs {package}")
    found, model = imported(layout, name)
    _, x, _ = fixture(name)
    saved = [v.numpy().copy() for v in model.weights]
    rng = np.random.default_rng(7)
    try:
        for v in model.weights:
            v.assign(v.numpy() + rng.normal(0, 0.02, v.shape).astype(np.float32))
        save_file(layout.dump(model, found), str(tmp_path / "keras.safetensors"))
        want = model(x).numpy()
    finally:
        for v, a in zip(model.weights, saved):
            v.assign(a)
    np.savez(tmp_path / "x.npz", input=x)
    spec = {"arch": arch, "kwargs": kwargs, "weights": str(tmp_path / "keras.safetensors"),
            "input": str(tmp_path / "x.npz"), "out": str(tmp_path / "y.npz")}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    argv = [sys.executable, "-m", "tests.fixtures.pytorch.make_swinir", "--live",
            str(tmp_path / "spec.json")]  # fmt: skip
    child = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    assert np.abs(np.load(tmp_path / "y.npz")["output"] - want).max() <= 1e-4


@pytest.mark.parametrize("name", list(EXPECTED))
def test_keras_computes_what_the_official_swinir_computed(name):
    """Each upsampler's fixture, on an input whose sides are not multiples of the window,
    within 1e-4 (in fact 4e-6), its hyperparameters read back by detection."""
    check_fixture(swinir, name, EXPECTED[name])


def test_dump_of_load_is_the_file():
    check_dump(swinir, "swinir_light_tiny")


def test_bad_keys_are_named_and_nothing_is_set():
    check_refusals(swinir, "swinir_light_tiny")


@pytest.mark.parametrize("name", list(RELEASED))
def test_released_layouts_are_detected_and_counted_as_the_presets(name):
    """The released x4 files' keys and shapes read as the preset of that name, whose
    parameters (counted from the layout's shapes, no model built) are the issue's table."""
    from sr.config import compose

    state, parameters = released("swinir_x4_layouts.json.gz")[name]
    preset, count, keys = RELEASED[name]
    found = swinir.detect(state)
    assert {k: found.model[k] for k in keys} == keys
    model = {k: v for k, v in dict(compose(f"model={preset}").model).items()
             if k not in ("drop_path_rate",)}  # fmt: skip
    assert {k: found.model[k] for k in model} == model
    shapes = swinir.shapes_of(found.model, 3)
    assert {k: tuple(v.shape) for k, v in state.items()} == shapes
    assert swinir.parameters(shapes) == parameters == count


@pytest.mark.parametrize("factor", [2, 8])
def test_other_scales_are_refused_naming_what_was_found(factor):
    state, _ = released("swinir_x4_layouts.json.gz")["lightweight"]
    state = dict(state)
    state["upsample.0.weight"] = np.zeros((3 * factor**2, 60, 3, 3), np.float32)
    state["upsample.0.bias"] = np.zeros(3 * factor**2, np.float32)
    with pytest.raises(StateDictError, match=f"scale {factor}.*only x4"):
        swinir.detect(state)


@pytest.mark.slow
def test_upscale_py_gives_pytorchs_pixels(tmp_path):
    """scripts/upscale.py on the PNG of a fixture's input (8-bit values) writes PyTorch's
    output, rounded to 8 bits (one level for rounding at .5)."""
    check_upscale("swinir_light_tiny", tmp_path)


def check_upscale(name: str, tmp_path) -> None:
    """scripts/upscale.py on the PNG of fixture ``name``'s input (8-bit values) writes PyTorch's
    output, rounded to 8 bits (one level for rounding at .5)."""
    from PIL import Image

    from tests.fake_run import load_script

    _, x, want = fixture(name)
    Image.fromarray(np.round(x[0] * 255).astype(np.uint8)).save(tmp_path / "in.png")
    out = tmp_path / "out.png"
    argv = [str(FIXTURES / f"{name}.safetensors"), str(tmp_path / "in.png"), str(out)]
    assert load_script("upscale").main([*argv, "--no-progress"]) == 0
    got = np.asarray(Image.open(out), dtype=np.float32)
    assert np.abs(got - np.clip(want[0], 0, 1) * 255).max() <= 1.0


def exported_outputs(model, x: np.ndarray, tmp_path, formats=("tflite", "onnx")):
    """``{format: output on x}`` of the TFLite and ONNX exports in ``formats`` (sr.deploy's
    converters and runtimes)."""
    from sr.deploy import to_onnx
    from sr.deploy.export import to_tflite
    from sr.deploy.runtimes import open_onnx, open_tflite

    model(x, training=False)
    out = {}
    if "tflite" in formats:
        to_tflite(model, tmp_path / "model.tflite")
        interpreter = open_tflite(tmp_path / "model.tflite", 1, "-", x.shape)
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        out["tflite"] = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    if "onnx" in formats:
        import onnxruntime as ort

        to_onnx(model, tmp_path / "model.onnx")
        session = open_onnx(tmp_path / "model.onnx", ort.SessionOptions(), "-")
        out["onnx"] = session.run(None, {session.get_inputs()[0].name: x})[0]
    return out


def check_exports(layout, name: str, tmp_path, formats=("tflite", "onnx")) -> None:
    """The exports in ``formats`` of the imported fixture ``name`` reach 45 dB against PyTorch.

    ONNX (tf2onnx of the same Keras graph that TFLite converts) is checked for SwinIR's window
    attention and OmniSR's; the other attention networks are built of the same ops and check
    TFLite alone, which keeps each export test at one conversion (20-60 s on a 2-core EPYC).
    """
    pytest.importorskip("ai_edge_litert")
    if "onnx" in formats:
        pytest.importorskip("onnxruntime")
    from sr.deploy import psnr_float

    _, model = imported(layout, name)
    _, x, want = fixture(name)
    for fmt, got in exported_outputs(model, x, tmp_path, formats).items():
        print(f"{name} {fmt}: {psnr_float(got, want):.1f} dB against PyTorch")
        assert psnr_float(got, want) >= 45, fmt


@pytest.mark.slow
def test_tflite_and_onnx_exports_reach_45_db_against_pytorch(tmp_path):
    """The real-world fixture (window attention on an input whose sides are not multiples of
    the window, and the nearest+conv upsampler) exported to TFLite and ONNX. The classical
    fixture's pixelshuffle upsampler, the only part it has that this one has not, is converted
    in tests/test_hat.py::test_tflite_and_onnx_exports_reach_45_db_against_pytorch (HAT's
    upsampler is SwinIR's) and tests/test_deploy.py::test_export_agrees_with_keras_at_every_size
    (both formats)."""
    check_exports(swinir, "swinir_real_tiny", tmp_path)


@pytest.mark.torch
@pytest.mark.slow
def test_live_dump_loads_strictly_in_the_official_class(tmp_path):
    kwargs = {"embed_dim": 12, "depths": [2], "num_heads": [3], "window_size": 4,
              "mlp_ratio": 2.0, "img_size": 16, "resi_connection": "3conv",
              "upsampler": "pixelshuffledirect"}  # fmt: skip
    check_live(swinir, "swinir_light_tiny", "swinir", kwargs, tmp_path)
