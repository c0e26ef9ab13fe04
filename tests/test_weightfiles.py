"""sr.core.weightfiles: .safetensors read with NumPy (fp16 and bf16 cast to float32, said so),
written atomically and contiguous; .pth through torch.load(weights_only=True) with BasicSR's
params / params_ema wrappers; truncated files, a .pth without torch and pickles that are not
state dicts refused with the file named and the fix."""

from __future__ import annotations

import json
import struct
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from sr.core.weightfiles import WeightFileError, is_weight_file, read_weights, write_safetensors


def test_safetensors_round_trip_is_identical(tmp_path):
    """Written, read back: the same tensors bit for bit, the metadata kept, no note."""
    rng = np.random.default_rng(0)
    state = {"conv.weight": rng.normal(size=(4, 3, 3, 3)).astype(np.float32),
             "conv.bias": rng.normal(size=(4,)).astype(np.float32)}  # fmt: skip
    path = write_safetensors(tmp_path / "m.safetensors", state, {"arch": "x"})
    read = read_weights(path)
    assert read.metadata == {"arch": "x"} and read.notes == () and read.wrapper is None
    assert set(read.state) == set(state)
    for key, value in state.items():
        assert read.state[key].dtype == np.float32
        np.testing.assert_array_equal(read.state[key], value)
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # no temporary file left


def test_writing_a_transposed_view_works(tmp_path):
    """A non-contiguous view (a kernel transposed to OIHW) is made contiguous (spandrel #157)."""
    kernel = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    view = np.transpose(kernel, (3, 2, 0, 1))
    assert not view.flags.c_contiguous
    write_safetensors(tmp_path / "t.safetensors", {"w": view}, {})
    np.testing.assert_array_equal(load_file(str(tmp_path / "t.safetensors"))["w"], view)


def test_metadata_must_be_strings(tmp_path):
    with pytest.raises(ValueError, match="scale"):
        write_safetensors(tmp_path / "m.safetensors", {"w": np.ones(2, np.float32)}, {"scale": 4})
    assert not list(tmp_path.iterdir())


def test_fp16_is_cast_and_said(tmp_path):
    save_file({"a": np.full((2, 2), 0.5, np.float16), "b": np.ones(3, np.float32)},
              str(tmp_path / "h.safetensors"))  # fmt: skip
    read = read_weights(tmp_path / "h.safetensors")
    assert read.state["a"].dtype == np.float32 and read.state["a"][0, 0] == 0.5
    assert read.notes == ("cast 1 fp16 tensor(s) to float32",)


def bf16_file(path, values: np.ndarray) -> None:
    """A .safetensors file with one BF16 tensor, written by hand (NumPy has no bfloat16): the
    upper halves of the float32 values."""
    data = (values.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
    header = {"w": {"dtype": "BF16", "shape": list(values.shape), "data_offsets": [0, len(data)]}}
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_bf16_is_widened_and_said(tmp_path):
    values = np.array([[1.0, -2.5], [0.15625, 2.0**100]], np.float32)  # exact in bfloat16
    bf16_file(tmp_path / "b.safetensors", values)
    read = read_weights(tmp_path / "b.safetensors")
    np.testing.assert_array_equal(read.state["w"], values)
    assert read.notes == ("cast 1 bf16 tensor(s) to float32",)


@pytest.mark.parametrize("keep", [20, 7, -3])
def test_truncated_safetensors_is_refused(tmp_path, keep):
    path = write_safetensors(tmp_path / "m.safetensors", {"w": np.ones((8, 8), np.float32)}, {})
    data = path.read_bytes()
    path.write_bytes(data[:keep] if keep > 0 else data[:keep])
    with pytest.raises(WeightFileError, match="truncated or corrupt.*download it again") as e:
        read_weights(path)
    assert str(path) in str(e.value)


def test_missing_file_and_names(tmp_path):
    with pytest.raises(WeightFileError, match="no such weight file"):
        read_weights(tmp_path / "absent.pth")
    assert is_weight_file("a/RealESRGAN_x4plus.pth") and is_weight_file("m.SAFETENSORS")
    assert not is_weight_file("outputs/2024-01-01/12-00-00") and not is_weight_file(tmp_path)


def test_pth_without_torch_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "m.pth"
    path.write_bytes(b"PK\x03\x04 not read")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(WeightFileError) as e:
        read_weights(path)
    text = str(e.value)
    assert str(path) in text and ".[torch]" in text and "\n" not in text


@pytest.mark.torch
def test_pth_layouts_and_refusals(tmp_path):
    """A bare dict, params, params_ema (taken over params, said so); a pickled module and a
    truncated zip refused."""
    torch = pytest.importorskip("torch")
    ema, live = {"w": torch.ones(2, 2)}, {"w": torch.zeros(2, 2)}
    torch.save(ema, tmp_path / "bare.pth")
    torch.save({"params": live, "params_ema": ema}, tmp_path / "both.pth")
    torch.save({"params": {"w": torch.ones(3).half()}}, tmp_path / "params.pth")
    assert read_weights(tmp_path / "bare.pth").wrapper is None
    both = read_weights(tmp_path / "both.pth")
    assert both.wrapper == "params_ema" and both.state["w"].sum() == 4
    assert "params_ema" in both.notes[0] and "params is also there" in both.notes[0]
    params = read_weights(tmp_path / "params.pth")
    assert params.wrapper == "params" and params.state["w"].dtype == np.float32
    assert params.notes[-1] == "cast 1 fp16 tensor(s) to float32"
    torch.save(torch.nn.Conv2d(1, 1, 1), tmp_path / "module.pth")
    with pytest.raises(WeightFileError, match="could run code.*state_dict"):
        read_weights(tmp_path / "module.pth")
    data = (tmp_path / "bare.pth").read_bytes()
    (tmp_path / "cut.pth").write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightFileError, match="cut.pth is truncated or corrupt"):
        read_weights(tmp_path / "cut.pth")
    torch.save({"w": torch.ones(1), "step": 3}, tmp_path / "mixed.pth")
    with pytest.raises(WeightFileError, match="step are not tensors"):
        read_weights(tmp_path / "mixed.pth")


def test_a_0d_tensor_keeps_its_shape(tmp_path):
    """BatchNorm's num_batches_tracked is 0-d: np.ascontiguousarray would write it as [1]."""
    path = write_safetensors(
        tmp_path / "n.safetensors", {"bn.num_batches_tracked": np.array(7)}, {}
    )
    back = read_weights(path).state["bn.num_batches_tracked"]
    assert back.shape == () and back == 7
