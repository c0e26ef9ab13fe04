"""RCAN (sr/models/rcan/) against the official class's outputs: the fixtures of
tests/fixtures/pytorch/ made by make_rcan.py with spandrel's copy of the official RCAN code, read
with NumPy and safetensors only; the released x4 RCAN's layout (keys and shapes) detected and
counted; scripts/upscale.py on a fixture gives PyTorch's pixels; exports (``slow``) and the live
strict loading into the official class and spandrel (``torch``). The helpers are
tests/test_dat.py's; :func:`check_released` and :func:`check_live_here` are shared with
tests/test_safmn.py and tests/test_realplksr.py."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file

from sr.models.rcan import layout as rcan
from sr.models.state_dicts.base import StateDictError
from tests.conftest import ROOT
from tests.test_dat import (
    FIXTURES,
    check_against_pytorch,
    check_dump_is_the_file,
    check_exports,
    check_upscale_gives_pytorchs_pixels,
    fixture,
    imported,
)

EXPECTED = {  # what make_rcan.py made, as detect() must read it back
    "rcan_tiny": ({"features": 16, "groups": 2, "blocks": 2, "reduction": 4, "kernel_size": 3,
                   "norm": True}, 3),
    "rcan_y": ({"features": 8, "groups": 1, "blocks": 2, "reduction": 2, "norm": False}, 1),
}  # fmt: skip


def check_released(layout, name: str, want: dict, parameters: int, preset: str):
    """The released layout ``NAME.json.gz`` (keys and shapes of the official class) is read as
    the preset's model, and its parameters, counted without a model, are the official class's
    and the issue's table."""
    entry = json.loads(gzip.decompress((FIXTURES / f"{name}.json.gz").read_bytes()))
    state = {k: np.zeros(s, np.float32) for k, s in entry["keys"]}
    found = layout.detect(state)
    assert {k: found.model[k] for k in want} == want and (found.scale, found.channels) == (4, 3)
    assert layout.expected_parameters(found.model) == entry["parameters"] == parameters
    assert f"{parameters:,} parameters" in (ROOT / "conf" / "model" / preset).read_text()


def check_live_here(layout, name: str, tmp_path):
    """The Keras model of the fixture, perturbed, dumped to .safetensors, loads with
    ``strict=True`` into the official class and spandrel's loader, which compute its output
    (make_rcan.py --live, a process of its own)."""
    for package in ("torch", "spandrel"):
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
    argv = [sys.executable, "-m", "tests.fixtures.pytorch.make_rcan", "--live",
            str(tmp_path / "spec.json")]  # fmt: skip
    child = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    want = model(x, training=False).numpy()
    assert int(out["scale"]) == 4
    for side in ("official", "spandrel"):
        assert np.abs(out[side] - want).max() <= 1e-4 * max(1.0, float(np.abs(want).max()))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_keras_computes_what_pytorch_computed_and_dump_is_the_file(name):
    keys, channels = EXPECTED[name]
    found, model = check_against_pytorch(rcan, name, keys, channels)
    assert found.arch == "rcan"
    check_dump_is_the_file(rcan, name, found, model)


def test_the_released_layout_is_read_and_counted():
    want = {"features": 64, "groups": 10, "blocks": 20, "reduction": 16, "norm": True}
    check_released(rcan, "rcan_x4_layout", want, 15_592_379, "rcan.yaml")


def test_other_scales_are_refused_naming_what_was_found():
    state, _, _ = fixture("rcan_tiny")
    state = {k: v for k, v in state.items() if not k.startswith("tail.0.2")}
    with pytest.raises(StateDictError, match=r"scale 2 \(tail.0.*only x4"):
        rcan.detect(state)
    unshuffle = {k.replace("head.0", "head.1"): v for k, v in state.items()}
    with pytest.raises(StateDictError, match=r"head.1.weight.*pixel-unshuffle.*only x4"):
        rcan.detect(unshuffle)


def test_missing_and_extra_keys_are_named():
    state, _, _ = fixture("rcan_tiny")
    found = rcan.detect(state)
    model = rcan.build(found)
    state = {k: v for k, v in state.items() if k != "add_mean.bias"}
    state["tail.9.weight"] = np.zeros(1, np.float32)
    with pytest.raises(StateDictError, match="1 missing: add_mean.bias.*1 extra: tail.9.weight"):
        rcan.load(model, state, found)


def test_upscale_py_gives_pytorchs_pixels(tmp_path, capsys):
    check_upscale_gives_pytorchs_pixels("rcan_tiny", tmp_path, capsys)


@pytest.mark.slow
def test_tflite_and_onnx_exports_reach_45_db_against_pytorch(tmp_path):
    check_exports(rcan, "rcan_tiny", tmp_path)


@pytest.mark.torch
@pytest.mark.slow
def test_live_strict_loading_in_the_official_class_and_spandrel(tmp_path):
    check_live_here(rcan, "rcan_tiny", tmp_path)
