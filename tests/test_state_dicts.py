"""The registry of sr.models.state_dicts: layouts tried in order, a layout module not yet in the
package skipped (one that is there must import), a file of another architecture refused in one
message naming the file, its first keys and what is supported; a model of a run found by its
builder, written back only at x4 and only if it reads back as itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sr.models.state_dicts as registry
from sr.core.weightfiles import read_weights
from sr.models.state_dicts import (
    LAYOUTS,
    StateDictError,
    detect,
    found_from_config,
    layouts,
    load_file,
    save_file,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pytorch"


def test_layouts_present_are_imported_absent_ones_skipped(tmp_path, monkeypatch):
    present = [m.arch for m in layouts()]
    assert "rrdbnet" in present
    files = [n for n in LAYOUTS if (registry.HERE / f"{n}.py").is_file()]
    assert len(present) == len(files) and all(callable(m.detect) for m in layouts())
    monkeypatch.setattr(registry, "HERE", tmp_path)  # no layout file at all
    assert layouts() == []
    (tmp_path / "rrdbnet.py").write_text("")
    assert [m.arch for m in layouts()] == ["rrdbnet"]  # the file there: imported


def test_another_architecture_is_refused_with_its_keys():
    state = {
        "encoder.0.weight": np.zeros((16, 3, 3, 3), np.float32),
        "encoder.0.bias": np.zeros(16, np.float32),
        "head.weight": np.zeros((10, 16), np.float32),
    }
    with pytest.raises(StateDictError) as e:
        detect(state, "swinir.pth")
    text = str(e.value)
    assert text.startswith("swinir.pth: not an architecture read here")
    assert "encoder.0.weight [16, 3, 3, 3], encoder.0.bias [16], head.weight [10, 16]" in text
    assert "rrdbnet (generator)" in text and "x4 only" in text and "\n" not in text


def test_a_generator_is_not_taken_for_a_discriminator():
    state = read_weights(FIXTURES / "rrdbnet.safetensors").state
    with pytest.raises(StateDictError, match="rrdbnet generator, not a discriminator"):
        detect(state, "g.pth", kind="discriminator")


def test_load_file_describes_what_it_found():
    loaded = load_file(FIXTURES / "rrdbnet.safetensors")
    assert loaded.describe() == (
        "rrdbnet generator x4 RGB: features=8 blocks=1 growth=4; 14,083 parameters"
    )


def test_a_run_model_is_written_and_read_back(tmp_path):
    loaded = load_file(FIXTURES / "rrdbnet.safetensors")
    cfg = {"_target_": "sr.models.build_rrdbnet", "features": 8, "blocks": 1, "growth": 4}
    layout, found = found_from_config(cfg, 4, 3)
    path = save_file(tmp_path / "model.safetensors", loaded.model, layout, found, {"a": 1})
    back = read_weights(path)
    assert back.metadata == {"a": "1"}
    again = load_file(path)
    x = np.random.default_rng(0).uniform(0, 1, (1, 5, 6, 3)).astype(np.float32)
    np.testing.assert_array_equal(again.model(x).numpy(), loaded.model(x).numpy())


def test_other_scales_and_unknown_builders_are_not_written():
    with pytest.raises(StateDictError, match="x2 rrdbnet.*only x4"):
        found_from_config({"_target_": "sr.models.build_rrdbnet"}, 2, 3)
    with pytest.raises(StateDictError, match="no PyTorch layout for the model sr.models.x"):
        found_from_config({"_target_": "sr.models.x"}, 4, 3)


def test_a_model_that_would_read_back_otherwise_is_not_written(tmp_path):
    """The Found of a config that disagrees with the model (growth 8 said, 4 built)."""
    loaded = load_file(FIXTURES / "rrdbnet.safetensors")
    cfg = {"_target_": "sr.models.build_rrdbnet", "features": 8, "blocks": 2, "growth": 4}
    layout, found = found_from_config(cfg, 4, 3)
    with pytest.raises((StateDictError, ValueError)):
        save_file(tmp_path / "m.safetensors", loaded.model, layout, found, {})
    assert not list(tmp_path.iterdir())
