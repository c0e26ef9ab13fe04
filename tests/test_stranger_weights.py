"""Weight files from strangers that were answered silently or misnamed (issue 46): a tensor
holding NaN or inf is refused by the one reader, naming the tensor and the count, so every
command that reads weights refuses it; a model whose output holds NaN writes no image and exits
non-zero (it was written as black); a folder named like a weight file is said to be a folder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from safetensors.numpy import load_file, save_file

from sr.cli import check_source
from sr.core.weightfiles import WeightFileError, is_weight_file, read_weights
from tests.conftest import photo
from tests.fake_run import load_script

ROOT = Path(__file__).resolve().parents[1]
RRDBNET = ROOT / "tests" / "fixtures" / "pytorch" / "rrdbnet.safetensors"
upscale = load_script("upscale")


def nan_file(tmp_path) -> Path:
    """The tiny RRDBNet fixture with ``conv_hr.weight`` (8 x 8 x 3 x 3) all NaN."""
    state = load_file(str(RRDBNET))
    state["conv_hr.weight"] = np.full_like(state["conv_hr.weight"], np.nan)
    path = tmp_path / "nan.safetensors"
    save_file(state, str(path))
    return path


def test_a_nan_tensor_is_refused_by_the_reader(tmp_path):
    with pytest.raises(WeightFileError, match=r"conv_hr\.weight \(576 of 576 values\)"):
        read_weights(nan_file(tmp_path))


def test_an_fp16_overflow_to_inf_is_counted(tmp_path):
    """fp16 casts: 1e5 overflows to inf (fp16's largest is 65504); each tensor named, counted."""
    weights = np.ones((4, 3), np.float32)
    weights[0, :2] = 1e5
    bias = np.array([-1e6, 1.0], np.float32)
    with np.errstate(over="ignore"):
        half = {"a.weight": weights.astype(np.float16), "a.bias": bias.astype(np.float16)}
    save_file(half | {"ok": np.ones(2, np.float16)}, str(tmp_path / "h.safetensors"))
    with pytest.raises(WeightFileError) as e:
        read_weights(tmp_path / "h.safetensors")
    assert "a.weight (2 of 12 values)" in str(e.value) and "a.bias (1 of 2 values)" in str(e.value)
    assert "ok" not in str(e.value).split("weights:")[1].split(";")[0]


def test_integer_tensors_are_not_checked(tmp_path):
    save_file({"w": np.ones(2, np.float32), "step": np.array([7], np.int64)},
              str(tmp_path / "i.safetensors"))  # fmt: skip
    assert read_weights(tmp_path / "i.safetensors").state["step"][0] == 7


@pytest.mark.slow
def test_upscale_refuses_nan_weights_in_a_process(tmp_path):
    """The issue's case: upscale.py wrote a 128 x 128 black image with exit 0."""
    image, out = tmp_path / "in.png", tmp_path / "out.png"
    Image.fromarray(np.ascontiguousarray(photo("coffee")[:32, :32])).save(image)
    cmd = [sys.executable, "scripts/upscale.py", str(nan_file(tmp_path)), str(image), str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "conv_hr.weight (576 of 576 values)" in proc.stderr and "NaN or infinite" in proc.stderr
    assert not out.exists()


class NaNModel:
    """A Y model whose output is NaN in its top-left pixel: finite weights that overflow."""

    def __call__(self, x, training=False):
        import tensorflow as tf

        y = tf.image.resize(x, tf.shape(x)[1:3] * 4, "nearest")
        corner = tf.pad(
            tf.fill([1, 1, 1, 1], np.nan),
            [[0, 0], [0, tf.shape(y)[1] - 1], [0, tf.shape(y)[2] - 1], [0, 0]],
        )
        return y + corner


def test_an_output_with_nan_is_not_written(tmp_path, capsys):
    """A NaN output pixel was rounded to 0; now the image fails, nothing written, exit 1 (one
    NaN of Y is NaN in R, G and B)."""
    from sr.inference import NonFiniteOutputError, Upscaler
    from sr.upscaling import upscale_files

    upscaler = Upscaler(NaNModel(), 4, overlap=2)
    image = np.ascontiguousarray(photo("coffee")[:20, :24])
    with pytest.raises(NonFiniteOutputError, match="3 NaN or infinite value"):
        upscaler(image)
    with pytest.raises(NonFiniteOutputError, match="3 NaN or infinite value"):
        upscaler(image, tile=8)  # the tile holding the corner
    Image.fromarray(image).save(tmp_path / "a.png")
    failures = upscale_files(upscaler, [(tmp_path / "a.png", tmp_path / "b.png")], 0)
    assert len(failures) == 1 and "no image written" in failures[0]
    assert not (tmp_path / "b.png").exists()


def test_a_folder_named_like_a_weight_file(tmp_path):
    folder = tmp_path / "model.safetensors"
    folder.mkdir()
    (folder / "weights.safetensors").write_bytes(b"")
    assert is_weight_file(folder)
    for read in (check_source, read_weights):
        with pytest.raises(WeightFileError, match="is a folder where a weight file was expected"):
            read(folder)
    with pytest.raises(WeightFileError, match=r"holds weights\.safetensors"):
        read_weights(folder)


def test_a_run_folder_named_like_a_weight_file_is_a_run(tmp_path):
    run = tmp_path / "esrgan.pth"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("data: {frames: 1}\n")
    assert not is_weight_file(run)


def test_upscale_says_folder(tmp_path, capsys):
    folder = tmp_path / "model.safetensors"
    folder.mkdir()
    image = tmp_path / "in.png"
    Image.fromarray(np.ascontiguousarray(photo("coffee")[:16, :16])).save(image)
    assert upscale.main([str(folder), str(image), str(tmp_path / "o.png")]) == 2
    err = capsys.readouterr().err
    assert "is a folder where a weight file was expected" in err and "holds nothing" in err


def test_a_tensor_of_the_wrong_shape_is_named_not_read_as_another_model(tmp_path, capsys):
    """conv_last.weight of 4 output channels beside its bias of 3 was refused as "an RRDBNet
    with 3 input and 4 output channels"; now both tensors are named with their shapes."""
    state = load_file(str(RRDBNET))
    extra = state["conv_last.weight"][:1]
    state["conv_last.weight"] = np.concatenate([state["conv_last.weight"], extra])
    save_file(state, str(tmp_path / "edited.safetensors"))
    image = tmp_path / "in.png"
    Image.fromarray(np.ascontiguousarray(photo("coffee")[:16, :16])).save(image)
    argv = [str(tmp_path / "edited.safetensors"), str(image), str(tmp_path / "o.png")]
    assert upscale.main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "conv_last.weight [4, 8, 3, 3] has 4 output channels, but conv_last.bias [3] has 3" in err
    )
    assert "output channels" in err and "an RRDBNet with" not in err


def test_a_tensor_that_disagrees_with_the_layer_before_is_named_with_both_shapes(tmp_path):
    from sr.models.state_dicts import StateDictError
    from sr.models.state_dicts import load_file as load_weights

    state = load_file(str(RRDBNET))
    wide = state["conv_hr.weight"]
    state["conv_hr.weight"] = np.concatenate([wide, wide[:, :1]], axis=1)  # 9 inputs, not 8
    save_file(state, str(tmp_path / "wide.safetensors"))
    with pytest.raises(StateDictError, match=r"conv_hr\.weight \(8, 9, 3, 3\) \(expected \(8, 8"):
        load_weights(tmp_path / "wide.safetensors")


def test_evaluate_scores_no_nan_output():
    """evaluate.py's scores: a NaN output was rounded and scored; now the image is named and
    evaluate.py exits 2 before writing results."""
    from sr.evaluation import prepare, score_image

    item = prepare(np.ascontiguousarray(photo("coffee")[:48, :56]), 4, name="a.png")
    with pytest.raises(ValueError, match="a.png: the model's output holds 1 NaN"):
        score_image(NaNModel(), item, 4, rgb=False)
