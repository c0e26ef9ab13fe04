"""torchvision's VGG19 for the paper's perceptual loss (``vgg_weights=PATH.pth|.safetensors``,
``sr.models.state_dicts.vgg19``): the pre-ReLU features with BasicSR's normalisation against
the fixture made in PyTorch (``tests/fixtures/pytorch/make_vgg19.py``: a VGG19-shaped net at
torchvision's ``features.N`` indices), the perceptual term built from it, torchvision's full
key layout, and the refusals. No torch needed."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from sr.core.errors import ConfigError
from sr.losses import Loss
from sr.models.state_dicts import vgg19
from sr.models.state_dicts.base import StateDictError
from sr.models.vgg import LAYERS, TORCHVISION_URL, VGG19_CHANNELS
from tests.fixtures.pytorch.common import HERE

FILE = HERE / "vgg19.safetensors"
WIDTHS = [4, 4, 6, 6, 8, 8, 8, 8, 12, 12, 12, 12, 16, 16, 16, 16]


@pytest.fixture(scope="module")
def ref():
    return dict(np.load(HERE / "vgg19.npz"))


def test_torchvisions_indices():
    assert vgg19.INDICES == (0, 2, 5, 7, 10, 12, 14, 16, 19, 21, 23, 25, 28, 30, 32, 34)


def test_pre_relu_features_are_pytorchs_with_basicsrs_normalisation(ref):
    model, found = vgg19.load_features(FILE)
    assert found.model["channels"] == WIDTHS and found.kind == "features"
    assert "classifier.* (the fully connected head) ignored" in found.notes
    out = model(ref["input"])
    assert set(out) == set(LAYERS)
    for name in LAYERS:
        got = out[name].numpy()
        assert got.shape == ref[name].shape, name
        assert np.abs(got - ref[name]).max() < 1e-4, name
        assert (ref[name] < 0).any(), name  # before the ReLU
    assert not model.trainable_weights


def test_the_perceptual_term_on_torchvisions_vgg(ref, caplog):
    """``loss.terms.perceptual.vgg_weights=vgg19.safetensors``: sum_k w_k mean|phi_k(SR) -
    phi_k(HR)| with the fixture's PyTorch features of the two images."""
    loss = Loss({"perceptual": {"vgg_weights": str(FILE)}}).terms[0]
    with caplog.at_level(logging.INFO, logger="sr.losses.perceptual"):
        loss.build()
    assert "torchvision's VGG19" in caplog.text and "BasicSR's normalisation" in caplog.text
    x = ref["input"]
    got = loss(x[:1], x[1:]).numpy()
    want = sum(
        w * np.abs(ref[k][1] - ref[k][0]).mean() for k, w in zip(LAYERS, (0.1, 0.1, 1, 1, 1))
    )
    np.testing.assert_allclose(got, [want], rtol=1e-4)


def test_torchvisions_full_layout_is_read():
    """The keys and shapes of ``torchvision.models.vgg19().state_dict()`` (vgg19-dcbb9e9d.pth),
    without weights: VGG19's widths, the classifier ignored."""
    layout = json.loads((HERE / "vgg19_torchvision_layout.json").read_text())
    state = {k: np.broadcast_to(np.float32(0), shape) for k, shape in layout["keys"]}
    found = vgg19.detect(state)
    assert tuple(found.model["channels"]) == VGG19_CHANNELS
    assert found.notes == ("classifier.* (the fully connected head) ignored",)
    assert sum(k.startswith("features.") for k in state) == 32
    vgg19.check(state, found)


def test_written_back_identical():
    state = load_file(str(FILE))
    model, found = vgg19.load_features(FILE)
    back = vgg19.dump(model, found)
    features = {k: v for k, v in state.items() if k.startswith("features.")}
    assert list(back) == list(vgg19.shapes(found)) and set(back) == set(features)
    for key, value in features.items():
        np.testing.assert_array_equal(back[key], value, err_msg=key)


def test_other_vggs_and_other_files_are_refused(tmp_path):
    state = load_file(str(FILE))
    assert vgg19.detect({"conv_first.weight": state["features.0.weight"]}) is None
    vgg16 = {k.replace("features.34.", "features.33."): v for k, v in state.items()}
    with pytest.raises(StateDictError, match="VGG19's 16 at"):
        vgg19.detect(vgg16)
    with pytest.raises(StateDictError, match="batch norm"):
        vgg19.detect({**state, "features.1.running_mean": np.zeros(4, np.float32)})
    broken = {**state, "features.2.weight": np.zeros((4, 5, 3, 3), np.float32)}
    with pytest.raises(StateDictError, match=r"features.2.weight is \[4, 5, 3, 3\]"):
        vgg19.detect(broken)
    other = tmp_path / "other.safetensors"
    save_file({"conv_first.weight": np.ones((8, 3, 3, 3), np.float32)}, str(other))
    with pytest.raises(ConfigError) as info:
        Loss({"perceptual": {"vgg_weights": str(other)}}).build()
    message = str(info.value)
    assert str(other) in message and "not torchvision's VGG19" in message
    assert TORCHVISION_URL in message


VGG = "++loss.terms.perceptual.vgg_weights"


def test_the_schema_names_the_paper_s_file(compose, tmp_path):
    from sr.config import validate

    missing = tmp_path / "vgg19-dcbb9e9d.pth"
    with pytest.raises(ConfigError, match=r"torchvision's VGG19 \(vgg19-dcbb9e9d.pth .*paper's"):
        validate(compose("loss=realesrgan", "~loss.terms.gan", f"{VGG}={missing}"))
    validate(compose("loss=realesrgan", "~loss.terms.gan", f"{VGG}={FILE}"))


@pytest.mark.slow
@pytest.mark.torch
def test_a_pth_file_as_torch_saves_it(tmp_path, ref):
    """The same state dict saved by ``torch.save`` (as ``vgg19-dcbb9e9d.pth`` is) gives the
    same features."""
    torch = pytest.importorskip("torch")
    path = tmp_path / "vgg19-small.pth"
    torch.save({k: torch.from_numpy(v) for k, v in load_file(str(FILE)).items()}, path)
    loss = Loss({"perceptual": {"vgg_weights": str(path)}}).terms[0]
    loss.build()
    got = loss.vgg(ref["input"])["conv5_4"].numpy()
    assert np.abs(got - ref["conv5_4"]).max() < 1e-4
