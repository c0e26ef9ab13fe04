"""The detection of sr.models.state_dicts: the layouts of the registered architectures and of the
GAN's networks tried in order, a file of another architecture refused in one
message naming the file, its first keys and what is supported; a model of a run found by its
builder, written back only at x4 and only if it reads back as itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sr.core.errors import ConfigError
from sr.core.weightfiles import read_weights
from sr.models import registry
from sr.models.state_dicts import (
    NETWORKS,
    StateDictError,
    detect,
    found_from_config,
    layouts,
    load_file,
    save_file,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pytorch"


def test_the_layouts_are_the_registered_architectures_and_the_networks():
    present = [m.arch for m in layouts()]
    declared = [spec for spec in registry.specs() if spec.layout]
    assert len(present) == len(declared) + len(NETWORKS)
    assert {"rrdbnet", "compact", "span", "rlfn", "edsr_baseline", "unet_sn", "vgg19"} <= set(
        present
    )
    assert all(callable(m.detect) and callable(m.dump) for m in layouts())


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
    cfg = {"arch": "rrdbnet", "features": 8, "blocks": 1, "growth": 4}
    layout, found = found_from_config(cfg, 4, 3)
    path = save_file(tmp_path / "model.safetensors", loaded.model, layout, found, {"a": 1})
    back = read_weights(path)
    assert back.metadata == {"a": "1"}
    again = load_file(path)
    x = np.random.default_rng(0).uniform(0, 1, (1, 5, 6, 3)).astype(np.float32)
    np.testing.assert_array_equal(again.model(x).numpy(), loaded.model(x).numpy())


def test_other_scales_and_unknown_builders_are_not_written():
    with pytest.raises(StateDictError, match="x2 rrdbnet.*only x4"):
        found_from_config({"arch": "rrdbnet"}, 2, 3)
    with pytest.raises(StateDictError, match="no PyTorch layout for the model espcn"):
        found_from_config({"arch": "espcn"}, 4, 3)
    with pytest.raises(ConfigError, match="not a registered architecture"):
        found_from_config({"arch": "x"}, 4, 3)
    # a run saved before the registry names its builder
    layout, found = found_from_config({"_target_": "sr.models.build_rrdbnet", "blocks": 1}, 4, 3)
    assert layout.arch == "rrdbnet" and found.model == {"arch": "rrdbnet", "blocks": 1}


def test_a_model_that_would_read_back_otherwise_is_not_written(tmp_path):
    """The Found of a config that disagrees with the model (growth 8 said, 4 built)."""
    loaded = load_file(FIXTURES / "rrdbnet.safetensors")
    cfg = {"arch": "rrdbnet", "features": 8, "blocks": 2, "growth": 4}
    layout, found = found_from_config(cfg, 4, 3)
    with pytest.raises((StateDictError, ValueError)):
        save_file(tmp_path / "m.safetensors", loaded.model, layout, found, {})
    assert not list(tmp_path.iterdir())
