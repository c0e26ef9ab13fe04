"""RealPLKSR (sr/models/realplksr/) against the official class's outputs (the fixtures of
make_realplksr.py, spandrel's copy of the community's RealPLKSR), the released x4 layout
detected and counted, scripts/upscale.py, exports (``slow``) and the live strict loading
(``torch``); the helpers are tests/test_dat.py's and tests/test_rcan.py's."""

from __future__ import annotations

import numpy as np
import pytest

from sr.models.realplksr import layout as realplksr
from sr.models.state_dicts.base import StateDictError
from tests.test_dat import (
    check_against_pytorch,
    check_dump_is_the_file,
    check_exports,
    check_upscale_gives_pytorchs_pixels,
    fixture,
)
from tests.test_rcan import check_live_here, check_released

EXPECTED = {
    "realplksr_tiny": {"dim": 16, "blocks": 2, "kernel_size": 9, "split_ratio": 0.25,
                       "use_ea": True, "layer_norm": False},
    "realplksr_ln": {"dim": 8, "blocks": 1, "kernel_size": 5, "split_ratio": 0.5,
                     "use_ea": False, "layer_norm": True},
}  # fmt: skip


@pytest.mark.parametrize("name", list(EXPECTED))
def test_keras_computes_what_pytorch_computed_and_dump_is_the_file(name):
    found, model = check_against_pytorch(realplksr, name, EXPECTED[name])
    assert found.arch == "realplksr"
    check_dump_is_the_file(realplksr, name, found, model)


def test_the_released_layout_is_read_and_counted():
    want = {"dim": 64, "blocks": 28, "kernel_size": 17, "split_ratio": 0.25, "use_ea": True,
            "layer_norm": False}  # fmt: skip
    check_released(realplksr, "realplksr_x4_layout", want, 7_389_680, "realplksr.yaml")


def test_other_scales_and_dysample_are_refused_naming_what_was_found():
    state, _, _ = fixture("realplksr_tiny")
    state = dict(state, **{"feats.4.weight": np.zeros((12, 16, 3, 3), np.float32),
                           "feats.4.bias": np.zeros(12, np.float32)})  # fmt: skip
    with pytest.raises(StateDictError, match=r"scale 2 \(feats.4.weight \[12, ...\].*only x4"):
        realplksr.detect(state)
    state["to_img.init_pos"] = np.zeros((1, 8, 1, 1), np.float32)
    with pytest.raises(StateDictError, match="to_img.init_pos, the DySample upsampler"):
        realplksr.detect(state)


def test_missing_and_extra_keys_are_named():
    state, _, _ = fixture("realplksr_tiny")
    found = realplksr.detect(state)
    model = realplksr.build(found)
    state = {k: v for k, v in state.items() if k != "feats.2.norm.weight"}
    state["feats.2.extra"] = np.zeros(1, np.float32)
    with pytest.raises(StateDictError, match="1 missing: feats.2.norm.weight.*1 extra"):
        realplksr.load(model, state, found)


@pytest.mark.slow
def test_upscale_py_gives_pytorchs_pixels(tmp_path, capsys):
    check_upscale_gives_pytorchs_pixels("realplksr_tiny", tmp_path, capsys)


@pytest.mark.slow
def test_tflite_and_onnx_exports_reach_45_db_against_pytorch(tmp_path):
    check_exports(realplksr, "realplksr_tiny", tmp_path)


@pytest.mark.torch
@pytest.mark.slow
def test_live_strict_loading_in_the_official_class_and_spandrel(tmp_path):
    check_live_here(realplksr, "realplksr_tiny", tmp_path)
