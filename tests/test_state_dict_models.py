"""PyTorch state dicts of SPAN, BasicSR's EDSR and RLFN (sr/models/state_dicts/{span,edsr,rlfn}.py)
against the reference code's own outputs: the fixtures of tests/fixtures/pytorch/ (made by its
make_*.py with spandrel's SPAN, BasicSR's EDSR and the project's RLFN module after the official
code), read with NumPy and safetensors only. With torch installed, one test (marker ``torch``)
runs the comparison live in both directions."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from sr.deploy import psnr_float, to_onnx
from sr.deploy.export import to_tflite
from sr.deploy.runtimes import open_onnx, open_tflite
from sr.models.edsr import layout as edsr
from sr.models.layers import deployed as reparameterize
from sr.models.rlfn import layout as rlfn
from sr.models.span import layout as span
from sr.models.state_dicts.base import Found, StateDictError
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "pytorch"
LAYOUTS = {"span": span, "edsr": edsr, "rlfn": rlfn}  # fixture name -> layout
EXPECTED = {  # what each fixture's script made, as detect() must read it back
    "span": ("span", {"features": 8, "blocks": 6, "norm": "div2k_mean", "img_range": 255.0}),
    "edsr": ("edsr_baseline", {"features": 8, "blocks": 2, "res_scale": 1.0, "img_range": 255.0}),
    "rlfn": ("rlfn", {"features": 12, "mid_features": 10, "blocks": 2, "esa_channels": 6}),
}


def fixture(name: str):
    """``(state, input, output)`` of a fixture: the state dict, NHWC float32 arrays."""
    data = np.load(FIXTURES / f"{name}.npz")
    return load_file(str(FIXTURES / f"{name}.safetensors")), data["input"], data["output"]


def imported(name: str):
    """``(layout, found, model)``: the fixture's state dict detected, built and loaded."""
    state, _, _ = fixture(name)
    layout = LAYOUTS[name]
    found = layout.detect(state)
    model = layout.build(found)
    layout.load(model, state, found)
    return layout, found, model


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_keras_computes_what_pytorch_computed(name):
    """The imported model's output on the fixture's input is PyTorch's, within 1e-4 on [0, 1]
    (in fact float32 rounding), and detection read the script's hyperparameters."""
    layout, found, model = imported(name)
    arch, keys = EXPECTED[name]
    assert (found.arch, found.kind, found.scale, found.channels) == (arch, "generator", 4, 3)
    assert {k: found.model[k] for k in keys} == keys
    _, x, expected = fixture(name)
    got = model(x, training=False).numpy()
    assert got.shape == expected.shape == (1, 4 * x.shape[1], 4 * x.shape[2], 3)
    assert 0.05 < float(np.std(expected)) < 1.0  # a real signal on the [0, 1] scale
    print(f"{name}: max |Keras - PyTorch| = {np.abs(got - expected).max():.2e}")
    assert np.abs(got - expected).max() < 1e-4


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_dump_of_load_is_the_file(name):
    """Read and written back, a state dict holds the same keys and identical tensors (SPAN's
    eval_conv, derived from the branches, is recomputed: equal within float32 rounding)."""
    state, _, _ = fixture(name)
    layout, found, model = imported(name)
    dumped = layout.dump(model, found)
    assert sorted(dumped) == sorted(state)  # safetensors stores keys sorted
    for key, value in dumped.items():
        assert value.dtype == np.float32 and value.flags.c_contiguous, key
        if ".eval_conv." in key:
            assert np.allclose(value, state[key], rtol=1e-5, atol=1e-6), key
        else:
            assert np.array_equal(value, state[key]), key


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_what_detect_finds_is_a_valid_model_config(name):
    """``Found.model`` is a ``model`` group config: a registered architecture, every key in its
    schema, every value within its bounds, and building it builds the layout's model."""
    from sr.models.registry import build_model, check_model

    _, found, model = imported(name)
    check_model(found.model, found.scale, found.channels)  # unknown key or bad value: error
    again = build_model(found.model, found.scale, found.channels)
    assert again.count_params() == model.count_params()
    assert [type(la) for la in again.layers] == [type(la) for la in model.layers]


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_layout_knows_only_its_own_files(name):
    state, _, _ = fixture(name)
    assert [n for n, layout in LAYOUTS.items() if layout.detect(state) is not None] == [name]


@pytest.mark.parametrize("channels, factor", [(1, 4), (3, 4), (8, 2)])
def test_shuffle_order_takes_pytorchs_pixel_shuffle_to_depth_to_space(channels, factor):
    """``nn.PixelShuffle`` as PyTorch defines it (``out[c, h r + i, w r + j] =
    in[c r^2 + i r + j, h, w]``) equals the project's ``PixelShuffle`` of the channels in
    ``shuffle_order``'s order; the identity for one channel only."""
    from sr.models.layers import PixelShuffle
    from sr.models.state_dicts.base import shuffle_order

    c, r, h, w = channels, factor, 5, 6
    x = np.random.default_rng(0).random((c * r * r, h, w)).astype(np.float32)
    pytorch = x.reshape(c, r, r, h, w).transpose(0, 3, 1, 4, 2).reshape(c, h * r, w * r)
    order = shuffle_order(c, r)
    keras_out = PixelShuffle(r)(x[order].transpose(1, 2, 0)[np.newaxis]).numpy()[0]
    assert np.array_equal(keras_out.transpose(2, 0, 1), pytorch)
    assert (order == np.arange(c * r * r)).all() == (c == 1)


def _rescaled(state: dict, key: str, scale: int) -> dict:
    """``state`` with the conv ``key`` (and its bias) writing the channels of ``scale``."""
    out = dict(state)
    w = state[key]
    c = 3 * scale * scale
    out[key] = np.zeros((c,) + w.shape[1:], np.float32)
    out[key.replace("weight", "bias")] = np.zeros(c, np.float32)
    return out


@pytest.mark.parametrize("name", ["span", "rlfn"])
@pytest.mark.parametrize("scale", [2, 3])
def test_other_scales_are_refused_naming_what_was_found(name, scale):
    state = _rescaled(fixture(name)[0], "upsampler.0.weight", scale)
    with pytest.raises(StateDictError, match=f"scale {scale} .*upsampler.0.weight.*only x4"):
        LAYOUTS[name].detect(state)


def test_edsr_of_another_scale_is_refused_naming_its_stages():
    state = dict(fixture("edsr")[0])
    for key in ("upsample.2.weight", "upsample.2.bias"):  # one x2 stage: an x2 EDSR
        del state[key]
    with pytest.raises(StateDictError, match=r"scale 2 \(upsample convs of 4 x 8 channels"):
        edsr.detect(state)
    state = {k: v for k, v in state.items() if not k.startswith("upsample.")}
    state["upsample.0.weight"] = np.zeros((72, 8, 3, 3), np.float32)
    with pytest.raises(StateDictError, match="scale 3"):
        edsr.detect(state)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_missing_extra_and_misshapen_keys_are_named_and_nothing_is_set(name):
    state, _, _ = fixture(name)
    layout, found, model = imported(name)
    before = [v.numpy().copy() for v in model.weights]
    keys = list(state)
    bad = {k: v for k, v in state.items() if k != keys[0]}  # missing
    bad["extra.weight"] = np.ones(3, np.float32)
    bad[keys[-1]] = np.ones(state[keys[-1]].shape + (1,), np.float32)  # misshapen
    bad[keys[-2]] = np.zeros_like(state[keys[-2]])  # a right one, which must not be set either
    with pytest.raises(StateDictError) as e:
        layout.load(model, bad, found)
    message = str(e.value)
    assert f"1 missing: {keys[0]}" in message and "1 extra: extra.weight" in message
    assert f"1 misshapen: {keys[-1]} {bad[keys[-1]].shape}" in message
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.weights))


@pytest.mark.slow
@pytest.mark.parametrize("features, thousands", [(48, 426), (52, 498)])
def test_released_span_x4_layouts_by_name_and_shape(features, thousands):
    """The official x4 SPANs (spanx4_ch48.pth, spanx4_ch52.pth): their keys and shapes,
    written by make_span.py from the reference class, read as SPAN x4 of those features and
    written back with the same names, shapes and order; as deployed, the reference's
    parameters (its eval_conv, conv_cat and upsampler: 426 K and 498 K as the paper).
    No weights: the tensors are zero-stride views."""
    layout = json.loads((FIXTURES / "span_x4_layouts.json").read_text())[str(features)]
    state = {k: np.broadcast_to(np.float32(0), shape) for k, shape in layout}
    found = span.detect(state)
    assert (found.scale, found.channels, found.model["features"]) == (4, 3, features)
    model = span.build(found)
    deployed = sum(
        math.prod(shape)
        for k, shape in layout
        if ".eval_conv." in k or k.startswith(("conv_cat.", "upsampler."))
    )
    assert reparameterize(model).count_params() == deployed
    assert round(deployed / 1000) == thousands
    dumped = span.dump(model, found)
    assert [[k, list(v.shape)] for k, v in dumped.items()] == layout


def test_span_without_normalisation_is_spandrels_no_norm():
    """A SPAN with spandrel's ``no_norm`` buffer computes on the raw input: norm=none,
    img_range 1; written back with the buffer. One channel is then possible."""
    keys = {"arch": "span", **_span_keys(8), "norm": "none", "img_range": 1.0}
    found = Found("span", "generator", keys, 4, 1)
    model = span.build(found)
    state = span.dump(model, found)
    assert np.array_equal(state["no_norm"], np.zeros(1, np.float32))
    again = span.detect(state)
    assert again.model == found.model
    assert again.channels == 1
    del state["no_norm"]
    with pytest.raises(StateDictError, match="1 input channels that subtracts the RGB mean"):
        span.detect(state)


def test_a_stale_span_eval_conv_is_said_and_the_branches_used(caplog):
    """A file saved before an eval forward holds an eval_conv that is not the fusion of its
    branches: the reference's eval forward recomputes it, and so does the import (a warning)."""
    state, x, expected = fixture("span")
    state = dict(state)
    state["block_2.c3_r.eval_conv.weight"] = state["block_2.c3_r.eval_conv.weight"] + 1.0
    found = span.detect(state)
    model = span.build(found)
    with caplog.at_level("WARNING", logger="sr.models.span.layout"):
        span.load(model, state, found)
    assert "eval_conv of 1 Conv3XC (block_2.c3_r)" in caplog.text
    assert np.abs(model(x).numpy() - expected).max() < 1e-4


def _span_keys(features: int) -> dict:
    return {"features": features, "blocks": 6, "bicubic_skip": False, "fuse_silu": True}


@pytest.mark.parametrize(
    "layout, model, fault",
    [
        (span, {"norm": "centre", "img_range": 255.0}, "model.norm=centre model.img_range=255"),
        (span, {"norm": "div2k_mean", "img_range": 255.0, "fuse_silu": False}, "fuse_silu"),
        (edsr, {"norm": "centre", "blocks": 1}, "model.norm=centre"),
        (edsr, {"norm": "div2k_mean", "direct_upsample": True, "blocks": 1}, "direct_upsample"),
        (rlfn, {"norm": "centre", "blocks": 1}, "model.norm=centre"),
        (rlfn, {"norm": "none", "bicubic_skip": True, "blocks": 1}, "bicubic_skip"),
    ],
)
def test_a_model_the_reference_cannot_compute_is_not_written(layout, model, fault):
    """A model trained here with the project's own conventions (the 0.5 centre, a bicubic skip)
    would compute other pixels in the reference: dump() refuses it, naming the key."""
    keys = {**(_span_keys(8) if layout is span else {}), **model}
    found = Found(layout.arch, "generator", keys, 4, 3)
    with pytest.raises(StateDictError, match=fault):
        layout.dump(keras.Model(), found)


def test_edsr_l_is_read_with_basicsrs_residual_scale():
    """BasicSR's EDSR-L (256 features, 32 blocks) trains with res_scale 0.1, which the file does
    not hold: detection takes it from the shapes and says so."""
    f = 256
    shapes = {"conv_first.weight": (f, 3, 3, 3), "conv_after_body.weight": (f, f, 3, 3)}
    shapes |= {f"body.{b}.conv1.weight": (f, f, 3, 3) for b in range(32)}
    shapes |= {"upsample.0.weight": (4 * f, f, 3, 3), "upsample.2.weight": (4 * f, f, 3, 3)}
    shapes |= {"conv_last.weight": (3, f, 3, 3)}
    found = edsr.detect({k: np.broadcast_to(np.float32(0), s) for k, s in shapes.items()})
    assert (found.model["blocks"], found.model["res_scale"]) == (32, 0.1)
    assert any("res_scale 0.1" in note for note in found.notes)


def _deployed(model, x: np.ndarray):
    """The model as sr.deploy.export_model converts it: Conv3XC fused, called once."""
    model = reparameterize(model)
    model(x, training=False)  # Keras exports need a call
    return model


def _tflite_output(model, x: np.ndarray, path) -> np.ndarray:
    to_tflite(_deployed(model, x), path)
    interpreter = open_tflite(path, 1, "-", x.shape)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def _onnx_output(model, x: np.ndarray, path) -> np.ndarray:
    import onnxruntime as ort

    to_onnx(_deployed(model, x), path)
    session = open_onnx(path, ort.SessionOptions(), "-")
    return session.run(None, {session.get_inputs()[0].name: x})[0]


# One conversion per architecture, EDSR both: SPAN's ONNX and RLFN's TFLite of the project's own
# models agree with Keras in tests/test_deploy.py::test_export_agrees_with_keras_at_every_size
# (onnx-span, tflite-rlfn), and Keras computes PyTorch's output here
# (test_keras_computes_what_pytorch_computed).
EXPORTS = [("span", "tflite"), ("rlfn", "onnx"), ("edsr", "tflite"), ("edsr", "onnx")]


@pytest.mark.slow
@pytest.mark.parametrize("name, fmt", EXPORTS)
def test_tflite_and_onnx_exports_of_an_imported_model_reach_45_db_against_pytorch(
    name, fmt, tmp_path
):
    pytest.importorskip({"tflite": "ai_edge_litert", "onnx": "onnxruntime"}[fmt])
    _, _, model = imported(name)
    _, x, expected = fixture(name)
    run = {"tflite": _tflite_output, "onnx": _onnx_output}[fmt]
    got = run(model, x, tmp_path / f"model.{fmt}")
    print(f"{name} {fmt}: {psnr_float(got, expected):.1f} dB against PyTorch")
    assert psnr_float(got, expected) >= 45, fmt


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_live_both_ways_against_the_reference_class(name, tmp_path):
    """PyTorch -> Keras: a new reference module (random, perturbed) imported computes its
    output. Keras -> PyTorch: a Keras model (random, perturbed) written by dump() loads into the
    reference class with ``strict=True`` and computes the Keras output. The PyTorch side runs in
    a child process (tests/fixtures/pytorch/live.py)."""
    for package in ("torch", "safetensors", {"span": "spandrel", "edsr": "basicsr"}.get(name)):
        if package and importlib.util.find_spec(package) is None:  # not imported here: see live.py
            pytest.skip(f"the live comparison needs {package}")
    layout, found, model = imported(name)
    rng = np.random.default_rng(7)
    for v in model.weights:
        v.assign(v.numpy() + rng.normal(0, 0.05, v.shape).astype(np.float32))
    _, x, _ = fixture(name)
    save_file(layout.dump(model, found), str(tmp_path / "keras.safetensors"))
    np.savez(tmp_path / "x.npz", input=x)
    spec = {"arch": found.arch, "model": found.model, "channels": found.channels, "seed": 11}
    spec |= {"input": str(tmp_path / "x.npz"), "dumped": str(tmp_path / "keras.safetensors")}
    (tmp_path / "spec.json").write_text(json.dumps(spec | {"out": str(tmp_path)}))
    argv = [sys.executable, "-m", "tests.fixtures.pytorch.live", str(tmp_path / "spec.json")]
    child = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]

    def close(a, b):  # 1e-4 on [0, 1]; random weights may leave it: float32's relative error
        return np.abs(a - b).max() <= 1e-4 * max(1.0, float(np.abs(b).max()))

    assert close(model(x).numpy(), np.load(tmp_path / "dumped.npz")["output"])
    fresh = load_file(str(tmp_path / "fresh.safetensors"))
    found = layout.detect(fresh)
    imported_model = layout.build(found)
    layout.load(imported_model, fresh, found)
    assert close(imported_model(x).numpy(), np.load(tmp_path / "fresh.npz")["output"])
    assert not math.isclose(float(np.std(model(x).numpy())), 0.0)
