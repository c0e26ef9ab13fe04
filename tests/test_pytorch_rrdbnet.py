"""RRDBNet from PyTorch and back (sr.models.rrdbnet.layout): the fixtures of
tests/fixtures/pytorch/make_rrdbnet.py (BasicSR's RRDBNet, and spandrel's old ESRGAN layout
stored in float16) give PyTorch's output within 1e-4 through our Keras model; the full-size
layouts of RealESRGAN_x4plus and of the 2018 ESRGAN are read by name and shape, without weights;
a model written back is BasicSR's state dict, identical to the file it was read from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from sr.models.rrdbnet import layout as rrdbnet
from sr.models.state_dicts import StateDictError, detect
from sr.models.state_dicts import load_file as load_weights

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pytorch"
TOLERANCE = 1e-4  # max |Keras - PyTorch|, float32, in [0, 1]


def max_difference(name: str) -> float:
    """max |Keras - PyTorch| of fixture ``name`` (its input through our model)."""
    loaded = load_weights(FIXTURES / f"{name}.safetensors")
    ref = np.load(FIXTURES / f"{name}.npz")
    out = loaded.model(ref["input"]).numpy()
    assert out.shape == ref["output"].shape
    return float(np.abs(out - ref["output"]).max())


def test_basicsr_rrdbnet_matches_pytorch():
    loaded = load_weights(FIXTURES / "rrdbnet.safetensors")
    assert loaded.found.model == {
        "arch": "rrdbnet", "features": 8, "blocks": 1, "growth": 4,
    }  # fmt: skip
    assert (loaded.found.scale, loaded.found.channels, loaded.notes) == (4, 3, ())
    assert max_difference("rrdbnet") < TOLERANCE


def test_old_esrgan_layout_in_fp16_matches_pytorch():
    """spandrel's 2018 ESRGAN (model.N.*, growth 32), stored in float16: read, cast, said so."""
    loaded = load_weights(FIXTURES / "rrdbnet_old.safetensors")
    assert loaded.found.model["features"] == 8 and loaded.found.model["growth"] == 32
    assert loaded.notes == (
        "cast 42 fp16 tensor(s) to float32",
        "read the old ESRGAN layout (model.N.*) as BasicSR's RRDBNet",
    )
    assert max_difference("rrdbnet_old") < TOLERANCE


def test_written_back_is_the_same_state_dict():
    """BasicSR's file read and dumped: the same keys (in BasicSR's order: the file's are
    sorted, as safetensors writes them), identical tensors."""
    state = load_file(str(FIXTURES / "rrdbnet.safetensors"))
    loaded = load_weights(FIXTURES / "rrdbnet.safetensors")
    back = rrdbnet.dump(loaded.model, loaded.found)
    assert list(back) == list(rrdbnet.shapes(loaded.found)) and sorted(back) == sorted(state)
    for key, value in state.items():
        assert back[key].flags.c_contiguous and back[key].dtype == np.float32
        np.testing.assert_array_equal(back[key], value)


def shaped(layout: list) -> dict[str, np.ndarray]:
    """A state dict of the given keys and shapes without memory: zeros broadcast."""
    return {k: np.broadcast_to(np.float32(0), tuple(s)) for k, s in layout}


@pytest.fixture(scope="module")
def layouts() -> dict:
    return json.loads((FIXTURES / "rrdbnet_layouts.json").read_text())


def test_realesrgan_x4plus_layout(layouts):
    """RealESRGAN_x4plus by name and shape: 23 blocks, 64 features, growth 32, RGB, x4, its
    16,697,987 parameters, and the keys our model writes are BasicSR's, in its order."""
    ref = layouts["RealESRGAN_x4plus"]
    _, found = detect(shaped(ref))
    assert found.model == {
        "arch": "rrdbnet", "features": 64, "blocks": 23, "growth": 32,
    }  # fmt: skip
    assert (found.arch, found.scale, found.channels) == ("rrdbnet", 4, 3)
    assert [[k, list(s)] for k, s in rrdbnet.shapes(found).items()] == ref
    assert sum(int(np.prod(s)) for _, s in ref) == 16_697_987


def test_old_esrgan_x4_layout(layouts):
    """The 2018 ESRGAN's model.N.* keys of 23 blocks renamed onto BasicSR's, one to one."""
    ref = shaped(layouts["ESRGAN_x4_old"])
    _, found = detect(ref)
    assert found.model["blocks"] == 23 and found.model["features"] == 64
    renamed, variant = rrdbnet.canonical(ref)
    assert variant and set(renamed) == set(rrdbnet.shapes(found))
    rrdbnet.check(renamed, found)  # every shape as BasicSR's


def test_esrgan_2019_layout(layouts):
    """ESRGAN's 2019 names (RRDB_trunk, trunk_conv, upconv, HRconv), as in RRDB_ESRGAN_x4.pth."""
    ref = layouts["RealESRGAN_x4plus"]
    names = {"conv_body": "trunk_conv", "conv_up1": "upconv1", "conv_up2": "upconv2",
             "conv_hr": "HRconv"}  # fmt: skip
    old = {}
    for key, shape in ref:
        head, _, tail = key.rpartition(".")
        if key.startswith("body."):
            _, i, rdb, conv = head.split(".")
            head = f"RRDB_trunk.{i}.RDB{rdb[-1]}.{conv}"
        old[f"{names.get(head, head)}.{tail}"] = np.broadcast_to(np.float32(0), tuple(shape))
    _, found = detect(old)
    assert found.model["blocks"] == 23 and "2019" in found.notes[0]


@pytest.mark.slow
def test_full_size_model_loads_the_layout(layouts):
    """The Keras RealESRGAN_x4plus takes every tensor of the layout (16,697,987 parameters)."""
    loaded_state = shaped(layouts["RealESRGAN_x4plus"])
    layout, found = detect(loaded_state)
    model = layout.build(found)
    layout.load(model, loaded_state, found)
    assert model.count_params() == 16_697_987


def test_x2_x8_and_unshuffled_models_are_refused(layouts):
    ref = dict(shaped(layouts["RealESRGAN_x4plus"]))
    x2 = {**ref, "conv_first.weight": np.zeros((64, 12, 3, 3), np.float32)}
    with pytest.raises(StateDictError, match="x2 model.*pixel-unshuffled by 2"):
        detect(x2, "RealESRGAN_x2plus.pth")
    one = {k: v for k, v in ref.items() if not k.startswith("conv_up2")}
    with pytest.raises(StateDictError, match="1 upsampling conv.*x2 \\(or x3\\).*only x4"):
        detect(one)
    eight = {
        **ref,
        "conv_up3.weight": ref["conv_up2.weight"],
        "conv_up3.bias": ref["conv_up2.bias"],
    }
    with pytest.raises(StateDictError, match="x8 model"):
        detect(eight)


def test_missing_extra_and_misshapen_keys_are_named():
    """Nothing is set when the file does not fit: each key is named."""
    state = load_file(str(FIXTURES / "rrdbnet.safetensors"))
    _, found = detect(state)
    model = rrdbnet.build(found)
    before = [w.copy() for w in model.get_weights()]
    bad = {k: v for k, v in state.items() if k != "conv_hr.bias"}
    bad["body.0.rdb4.conv1.weight"] = state["body.0.rdb1.conv1.weight"]
    bad["conv_last.weight"] = state["conv_last.weight"][:, :4]
    with pytest.raises(StateDictError) as e:
        rrdbnet.load(model, bad, found)
    text = str(e.value)
    assert "missing: conv_hr.bias" in text and "extra: body.0.rdb4.conv1.weight" in text
    assert "misshapen: conv_last.weight (3, 4, 3, 3) (expected (3, 8, 3, 3))" in text
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("factor", [2, 3, 4])
def test_nearest_upsampling_is_repeat_under_xla(factor):
    """sr.models.layers.UpSampling2D nearest (RRDBNet's upsampler, compact's base), made of
    depth_to_space so that TFLite converts the conv after it (tests/test_pytorch_files.py
    exports the imported RRDBNet): PyTorch's nearest interpolate (each pixel repeated) and its
    gradient, under XLA (train.xla)."""
    import tensorflow as tf

    from sr.models.layers import UpSampling2D

    layer = UpSampling2D(factor, interpolation="nearest")
    x = np.random.default_rng(0).uniform(0, 1, (2, 5, 7, 3)).astype(np.float32)

    @tf.function(jit_compile=True)
    def up_and_grad(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = layer(t)
            total = tf.reduce_sum(y * y)
        return y, tape.gradient(total, t)

    y, grad = up_and_grad(tf.constant(x))
    np.testing.assert_array_equal(y.numpy(), np.repeat(np.repeat(x, factor, 1), factor, 2))
    np.testing.assert_allclose(grad.numpy(), 2 * factor * factor * x, rtol=1e-6)
