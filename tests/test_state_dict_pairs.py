"""The refusal to write a model as a reference state dict (sr/models/state_dicts/pairs.py,
``refuse_unwritable``), shared by the EDSR, RLFN and SPAN layouts: every fault named, the scale
last, the fix after; refused before the model is read."""

from __future__ import annotations

import pytest

from sr.models.edsr import layout as edsr
from sr.models.rlfn import layout as rlfn
from sr.models.span import layout as span
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, StateDictError


def test_the_faults_are_listed_then_the_scale_then_the_fix():
    found = Found("edsr_baseline", "generator", {}, 2, 3)
    with pytest.raises(StateDictError) as e:
        pairs.refuse_unwritable(found, ["model.norm=centre (a)", "b"], "EDSR", "X's", "Do Y.")
    assert str(e.value) == (
        "this EDSR cannot be written as X's, which would compute other pixels: "
        "model.norm=centre (a); b; scale 2 (only x4 is supported). Do Y."
    )


def test_a_x4_model_without_faults_is_written():
    found = Found("edsr_baseline", "generator", {}, 4, 3)
    assert pairs.refuse_unwritable(found, [], "EDSR", "X's", "Do Y.") is None


@pytest.mark.parametrize(
    "layout, model, message",
    [
        (
            edsr,
            {"norm": "centre", "bicubic_skip": True, "direct_upsample": True, "blocks": 2},
            "this EDSR cannot be written as BasicSR's, which would compute other pixels: "
            "model.norm=centre (BasicSR: div2k_mean, RGB); model.bicubic_skip=true (not in "
            "BasicSR's EDSR); model.direct_upsample=true (not in BasicSR's EDSR); scale 2 (only "
            "x4 is supported). Train model=edsr_baseline with model.norm=div2k_mean "
            "model.img_range=255 and data.channels=3 to export to PyTorch",
        ),
        (
            rlfn,
            {"norm": "centre", "bicubic_skip": True, "blocks": 1},
            "this RLFN cannot be written as the official one, which would compute other pixels: "
            "model.norm=centre (the official RLFN: none); model.bicubic_skip=true (not in the "
            "official RLFN); scale 2 (only x4 is supported). Train with model.norm=none (and "
            "model.img_range=255 for the official [0, 255] convention) to export to PyTorch",
        ),
        (
            span,
            {"norm": "centre", "img_range": 1.0, "fuse_silu": False, "blocks": 4},
            "this SPAN cannot be written as the reference's, which would compute other pixels: "
            "model.norm=centre model.img_range=1 (the reference: div2k_mean and 255, or none and "
            "1 with spandrel's no_norm); model.fuse_silu=false (the reference fuses the SiLU of "
            "that conv); model.blocks=4 (the reference has 6); scale 2 (only x4 is supported). "
            "Train with model.norm=div2k_mean model.fuse_silu=true (RGB) to export to PyTorch",
        ),
    ],
)
def test_each_layout_names_what_its_reference_cannot_compute(layout, model, message):
    found = Found(layout.arch, "generator", model, 2, 3)
    with pytest.raises(StateDictError) as e:
        layout.dump(None, found)  # refused before the model is read
    assert str(e.value) == message
