"""Real-ESRGAN's discriminator from and to PyTorch (``sr.models.state_dicts.unet_sn``), against
the fixture made by BasicSR's ``UNetDiscriminatorSN`` (``tests/fixtures/pytorch/make_unet_sn.py``):
the logits in eval mode, one training-mode forward (power iteration, u and v), three of them (a
GAN step's), and the gradient on ``weight_orig`` through sigma. No torch needed."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from sr.models.spectral_norm import SpectralNorm
from sr.models.state_dicts import unet_sn
from sr.models.state_dicts.base import StateDictError, conv_out
from tests.fixtures.pytorch.common import HERE

SN = tuple(f"conv{k}" for k in range(1, 9))


@pytest.fixture(scope="module")
def fixture():
    return load_file(str(HERE / "unet_sn.safetensors")), dict(np.load(HERE / "unet_sn.npz"))


def loaded(state):
    found = unet_sn.detect(state)
    model = unet_sn.build(found)
    unet_sn.load(model, state, found)
    return model, found


def test_detected_from_the_shapes(fixture):
    state, _ = fixture
    found = unet_sn.detect(state)
    assert (found.arch, found.kind, found.scale, found.channels) == (
        "unet_sn",
        "discriminator",
        1,
        3,
    )
    assert found.model == {"_target_": unet_sn.TARGET, "features": 8, "skip_connection": True}
    assert "skip_connection" in found.notes[0]
    assert unet_sn.detect({"conv_first.weight": np.zeros((8, 3, 3, 3), np.float32)}) is None


def test_eval_logits_are_pytorchs(fixture):
    state, ref = fixture
    model, _ = loaded(state)
    out = model(ref["input"], training=False).numpy()
    assert out.shape == ref["output"].shape == (2, 32, 32, 1)
    assert np.abs(out - ref["output"]).max() < 1e-4
    assert np.abs(ref["output"]).max() > 0.01  # not a trivial output


def test_one_training_forward_and_its_gradient_are_pytorchs(fixture):
    """One power iteration per conv (u, v as PyTorch's buffers after it), the logits with the
    new sigma, and d mean(logits^2) / d weight_orig through W_orig / sigma and sigma."""
    state, ref = fixture
    model, found = loaded(state)
    layers = {name: model.get_layer(name) for name in SN}
    assert all(isinstance(la, SpectralNorm) for la in layers.values())
    kernels = [la.layer.kernel for la in layers.values()]
    with tf.GradientTape() as tape:
        out = model(ref["input"], training=True)
        loss = tf.reduce_mean(tf.square(out))
    grads = tape.gradient(loss, kernels)
    assert np.abs(out.numpy() - ref["train_output"]).max() < 1e-4
    shapes = unet_sn.conv_shapes(8)
    for (name, layer), grad in zip(layers.items(), grads):
        np.testing.assert_allclose(layer.weight_u.numpy(), ref[f"u_{name}"], atol=1e-5)
        np.testing.assert_allclose(
            layer.weight_v.numpy(), unet_sn.v_in(ref[f"v_{name}"], shapes[name]), atol=1e-5
        )
        want = ref[f"grad_{name}"]
        np.testing.assert_allclose(conv_out(grad.numpy()), want, atol=1e-4 * np.abs(want).max(),
                                   err_msg=name)  # fmt: skip


def test_three_training_forwards_are_three_iterations(fixture):
    state, ref = fixture
    model, _ = loaded(state)
    for _ in range(3):
        model(ref["input"], training=True)
    for name in SN:
        np.testing.assert_allclose(model.get_layer(name).weight_u.numpy(), ref[f"u3_{name}"],
                                   atol=1e-5, err_msg=name)  # fmt: skip


def test_written_back_identical(fixture):
    state, _ = fixture
    model, found = loaded(state)
    back = unet_sn.dump(model, found)
    assert list(back) == list(unet_sn.shapes(found)) and set(back) == set(state)
    for key, value in state.items():
        assert back[key].flags["C_CONTIGUOUS"] and back[key].dtype == np.float32
        np.testing.assert_array_equal(back[key], value, err_msg=key)


def test_missing_extra_and_misshapen_keys_are_named_nothing_set(fixture):
    state, _ = fixture
    model, found = loaded(state)
    before = [w.numpy().copy() for w in model.weights]
    bad = {k: v for k, v in state.items() if k != "conv4.weight_v"}
    bad["conv3.weight_orig"] = np.zeros((64, 32, 3, 3), np.float32)
    bad["conv10.weight"] = np.zeros((1,), np.float32)
    with pytest.raises(StateDictError) as info:
        unet_sn.load(model, bad, found)
    message = str(info.value)
    assert "missing: conv4.weight_v" in message and "extra: conv10.weight" in message
    assert "conv3.weight_orig (64, 32, 3, 3) (expected (64, 32, 4, 4))" in message
    for w, b in zip(model.weights, before):
        np.testing.assert_array_equal(w.numpy(), b)
    with pytest.raises(StateDictError, match=r"conv0.weight is \[8, 4, 3, 3\]"):
        unet_sn.detect({**state, "conv0.weight": np.zeros((8, 4, 3, 3), np.float32)})
