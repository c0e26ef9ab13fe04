"""SAFMN (sr/models/safmn/) against the official class's outputs (the fixtures of
make_safmn.py, spandrel's copy of sunny2109/SAFMN), the released x4 layout detected and
counted, scripts/upscale.py, exports (``slow``) and the live strict loading (``torch``); the
helpers are tests/test_dat.py's and tests/test_rcan.py's."""

from __future__ import annotations

import numpy as np
import pytest

from sr.models.safmn import layout as safmn
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
    "safmn_tiny": {"dim": 16, "blocks": 2, "ffn_scale": 2.0},
    "safmn_ffn": {"dim": 8, "blocks": 1, "ffn_scale": 1.5},
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_keras_computes_what_pytorch_computed_and_dump_is_the_file(name):
    found, model = check_against_pytorch(safmn, name, EXPECTED[name])
    assert found.arch == "safmn"
    check_dump_is_the_file(safmn, name, found, model)


def test_any_input_size_is_padded_to_8_and_cropped():
    """A 13 x 11 input (not multiples of 8): the output is 52 x 44 and its top-left pixels,
    far from the padded border, are those of the 16 x 16 reflect-padded input."""
    from sr.models.swinir.blocks import WindowPad

    _, x, _ = fixture("safmn_tiny")
    from tests.test_dat import imported

    _, model = imported(safmn, "safmn_tiny")
    small = x[:, :13, :11]
    got = model(small, training=False).numpy()
    padded = model(WindowPad(8)(small).numpy(), training=False).numpy()
    assert got.shape == (1, 52, 44, 3)
    assert np.abs(got - padded[:, :52, :44]).max() <= 1e-5


def test_the_released_layout_is_read_and_counted():
    want = {"dim": 36, "blocks": 8, "ffn_scale": 2.0}
    check_released(safmn, "safmn_x4_layout", want, 239_520, "safmn.yaml")


def test_other_scales_are_refused_naming_what_was_found():
    state, _, _ = fixture("safmn_tiny")
    state = dict(state, **{"to_img.0.weight": np.zeros((12, 16, 3, 3), np.float32),
                           "to_img.0.bias": np.zeros(12, np.float32)})  # fmt: skip
    with pytest.raises(StateDictError, match=r"scale 2 \(to_img.0.weight \[12, ...\].*only x4"):
        safmn.detect(state)


def test_missing_and_extra_keys_are_named():
    state, _, _ = fixture("safmn_tiny")
    found = safmn.detect(state)
    model = safmn.build(found)
    state = {k: v for k, v in state.items() if k != "feats.1.safm.mfr.2.weight"}
    state["feats.1.extra"] = np.zeros(1, np.float32)
    with pytest.raises(StateDictError, match="1 missing: feats.1.safm.mfr.2.weight.*1 extra"):
        safmn.load(model, state, found)


@pytest.mark.slow
def test_upscale_py_gives_pytorchs_pixels(tmp_path, capsys):
    check_upscale_gives_pytorchs_pixels("safmn_tiny", tmp_path, capsys)


@pytest.mark.slow
def test_tflite_and_onnx_exports_reach_45_db_against_pytorch(tmp_path):
    check_exports(safmn, "safmn_tiny", tmp_path)


@pytest.mark.torch
@pytest.mark.slow
def test_live_strict_loading_in_the_official_class_and_spandrel(tmp_path):
    check_live_here(safmn, "safmn_tiny", tmp_path)
