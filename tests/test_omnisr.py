"""OmniSR (sr/models/omnisr/) against the official class's outputs: the fixtures of
tests/fixtures/pytorch/ made by make_omnisr.py with spandrel's copy of the official Omni-SR code,
read with NumPy and safetensors only; the released x4 OmniSR's layout (keys and shapes) detected
and counted; scripts/upscale.py on a fixture gives PyTorch's pixels; exports (``slow``) and the
live strict loading into the official class and spandrel (``torch``). The helpers are
tests/test_dat.py's."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from sr.models.omnisr import layout as omnisr
from sr.models.state_dicts.base import StateDictError
from tests.conftest import ROOT
from tests.test_dat import (
    FIXTURES,
    check_against_pytorch,
    check_dump_is_the_file,
    check_exports,
    check_live,
    check_upscale_gives_pytorchs_pixels,
    fixture,
)

EXPECTED = {  # what make_omnisr.py made, as detect() must read it back
    "omnisr_tiny": ({"features": 12, "groups": 1, "blocks": 1, "window_size": 8, "pe": True,
                     "bias": True}, 3),
    "omnisr_nope": ({"features": 8, "groups": 2, "blocks": 2, "window_size": 8, "pe": False,
                     "bias": False}, 1),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPECTED))
def test_keras_computes_what_pytorch_computed_and_dump_is_the_file(name):
    keys, channels = EXPECTED[name]
    found, model = check_against_pytorch(omnisr, name, keys, channels)
    assert found.arch == "omnisr"
    check_dump_is_the_file(omnisr, name, found, model)


def test_the_released_layout_is_read_and_counted():
    """The released x4 OmniSR (keys and shapes of the official class): read as
    conf/model/omnisr.yaml's model, and its parameters, counted without building a model, are
    the official class's and the issue's table (805,376); thop's counters are ignored."""
    entry = json.loads(gzip.decompress((FIXTURES / "omnisr_x4_layout.json.gz").read_bytes()))
    state = {k: np.zeros(s, np.float32) for k, s in entry["keys"]}
    state["total_ops"] = state["total_params"] = np.zeros(1, np.float32)
    found = omnisr.detect(state)
    want = {"features": 64, "groups": 5, "blocks": 1, "window_size": 8, "pe": True, "bias": True}
    assert {k: found.model[k] for k in want} == want and (found.scale, found.channels) == (4, 3)
    assert omnisr.expected_parameters(found.model) == entry["parameters"] == 805_376
    assert "805,376 parameters" in (ROOT / "conf" / "model" / "omnisr.yaml").read_text()


def test_other_scales_are_refused_naming_what_was_found():
    state, _, _ = fixture("omnisr_tiny")
    state = dict(state, **{"up.0.weight": np.zeros((12, 12, 3, 3), np.float32),
                           "up.0.bias": np.zeros(12, np.float32)})  # fmt: skip
    with pytest.raises(StateDictError, match=r"scale 2 \(up.0.weight \[12, ...\].*only x4"):
        omnisr.detect(state)


def test_missing_and_extra_keys_are_named():
    state, _, _ = fixture("omnisr_tiny")
    found = omnisr.detect(state)
    model = omnisr.build(found)
    state = {k: v for k, v in state.items() if "layer.5.fn.temperature" not in k}
    state["output.extra"] = np.zeros(1, np.float32)
    with pytest.raises(StateDictError, match="1 missing: .*layer.5.fn.temperature.*1 extra: "
                       "output.extra"):  # fmt: skip
        omnisr.load(model, state, found)


@pytest.mark.slow
def test_upscale_py_gives_pytorchs_pixels(tmp_path, capsys):
    check_upscale_gives_pytorchs_pixels("omnisr_tiny", tmp_path, capsys)


@pytest.mark.slow
def test_tflite_and_onnx_reach_45_db_against_pytorch(tmp_path):
    check_exports(omnisr, "omnisr_tiny", tmp_path)


@pytest.mark.torch
@pytest.mark.slow
def test_live_strict_loading_in_the_official_class_and_spandrel(tmp_path):
    check_live(omnisr, "omnisr_tiny", tmp_path)
