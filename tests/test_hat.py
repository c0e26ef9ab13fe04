"""HAT (sr/models/hat/) against the official class's own outputs: the fixture of
tests/fixtures/pytorch/ made by make_hat.py with spandrel's copy of XPixelGroup/HAT's network
(hybrid attention blocks, overlapping cross-attention, on a 13 x 10 input: sides not multiples
of the window), read with NumPy and safetensors only; the released x4 HAT-S and HAT by their
keys and shapes (hat_x4_layouts.json.gz). With torch, one test (marker ``torch``) loads what
dump() writes into the official class with ``strict=True``. Helpers: tests/test_swinir.py."""

from __future__ import annotations

import pytest

from sr.models.hat import layout as hat
from sr.models.hat.net import overlap_index
from sr.models.state_dicts.base import StateDictError
from tests.test_swinir import (
    check_dump,
    check_exports,
    check_fixture,
    check_live,
    check_refusals,
    check_upscale,
    released,
)

TINY = {"embed_dim": 12, "depths": [2, 2], "heads": [2, 3], "window": 4, "compress_ratio": 3,
        "squeeze_factor": 4, "overlap_ratio": 0.5, "num_feat": 8, "mlp_ratio": 2.0}  # fmt: skip
RELEASED = {"HAT-S": ("hat_s", 9_621_183), "HAT": ("hat", 20_772_507)}  # the table


@pytest.mark.slow
def test_keras_computes_what_the_official_hat_computed():
    check_fixture(hat, "hat_tiny", TINY)


def test_dump_of_load_is_the_file():
    check_dump(hat, "hat_tiny")


def test_bad_keys_are_named_and_nothing_is_set():
    check_refusals(hat, "hat_tiny")


def test_the_overlap_index_is_the_references_and_wraps_as_pytorch_indexes():
    """HAT's calculate_rpi_oca for window 16, overlap 0.5 (the released models'): [256, 576],
    entries from -880 to 640; negative ones index the 39^2-row table from its end."""
    index = overlap_index(16, 0.5)
    assert index.shape == (256, 576) and (index.min(), index.max()) == (-880, 640)
    assert index[0, 0] == -7 * 39 - 7 and index[-1, -1] == (23 - 15 - 7) * 39 + (23 - 15 - 7)


@pytest.mark.parametrize("name", list(RELEASED))
def test_released_layouts_are_detected_and_counted_as_the_presets(name):
    from sr.config import compose

    state, parameters = released("hat_x4_layouts.json.gz")[name]
    preset, count = RELEASED[name]
    found = hat.detect(state)
    model = {k: v for k, v in dict(compose(f"model={preset}").model).items()
             if k != "drop_path_rate"}  # fmt: skip
    assert {k: found.model[k] for k in model} == model
    shapes = hat.shapes_of(found.model, 3)
    assert {k: tuple(v.shape) for k, v in state.items()} == shapes
    assert hat.parameters(shapes) == parameters == count


def test_another_scale_is_refused_naming_what_was_found():
    state, _ = released("hat_x4_layouts.json.gz")["HAT-S"]
    state = {k: v for k, v in state.items() if not k.startswith("upsample.2")}
    with pytest.raises(StateDictError, match="scale 2.*only x4"):
        hat.detect(state)


@pytest.mark.slow
def test_upscale_py_gives_pytorchs_pixels(tmp_path):
    """scripts/upscale.py on the one-group fixture's input (13 x 10: sides not multiples of the
    window) writes PyTorch's output within one level."""
    check_upscale("hat_one_tiny", tmp_path)


@pytest.mark.slow
def test_tflite_and_onnx_exports_reach_45_db_against_pytorch(tmp_path):
    """The one-group fixture (hybrid attention, a shifted block, the overlapping
    cross-attention, pixelshuffle) on 13 x 10 exported to TFLite and ONNX: a converter's cost
    grows with the blocks it traces, not with what they check."""
    check_exports(hat, "hat_one_tiny", tmp_path)


@pytest.mark.torch
@pytest.mark.slow
def test_live_dump_loads_strictly_in_the_official_class(tmp_path):
    kwargs = {"embed_dim": 12, "depths": [2, 2], "num_heads": [2, 3], "window_size": 4,
              "compress_ratio": 3, "squeeze_factor": 4, "mlp_ratio": 2.0, "num_feat": 8,
              "img_size": 16}  # fmt: skip
    check_live(hat, "hat_tiny", "hat", kwargs, tmp_path)
