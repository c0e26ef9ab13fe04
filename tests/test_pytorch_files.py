"""PyTorch weight files where a run is taken (sr.train.pretrained): upscale.py, evaluate.py and
export.py on a .safetensors file print what they found and work as on a run; export.py
--format safetensors writes the reference state dict, identical when read back; train.py's
train.init_from=FILE starts from the file and records it. Bad input (the issue's list): a
truncated file, another architecture, missing and extra keys, a 2x model, a .pth without torch
give exit 2 and one message naming the file and the fix, and write nothing; an fp16 file is
read, cast and said so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from safetensors.numpy import load_file, save_file

from sr.core.errors import ConfigError
from sr.models.state_dicts import load_file as load_weights
from tests.conftest import photo
from tests.fake_run import load_script, make_run

upscale = load_script("upscale")
evaluate = load_script("evaluate")
export = load_script("export")

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pytorch"
RRDBNET = FIXTURES / "rrdbnet.safetensors"
FOUND = "rrdbnet generator x4 RGB: features=8 blocks=1 growth=4; 14,083 parameters"
TINY_RRDB = ("model=rrdbnet", "model.features=8", "model.blocks=1", "model.growth=4")


@pytest.fixture
def image(tmp_path) -> Path:
    path = tmp_path / "cat.png"
    Image.fromarray(np.ascontiguousarray(photo("chelsea")[50:70, 100:123])).save(path)
    return path


def test_upscale_a_weight_file(tmp_path, image, capsys):
    out = tmp_path / "cat_x4.png"
    assert upscale.main([str(RRDBNET), str(image), str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert f"{RRDBNET}: {FOUND}" in text and "of the weight file" in text
    assert Image.open(out).size == (92, 80)


def test_evaluate_a_weight_file(tmp_path, capsys):
    hr = tmp_path / "set"
    hr.mkdir()
    Image.fromarray(np.ascontiguousarray(photo("coffee")[:48, :56])).save(hr / "a.png")
    assert evaluate.main([str(RRDBNET), str(hr), "--out", str(tmp_path / "res"),
                          "--no-progress"]) == 0  # fmt: skip
    assert FOUND in capsys.readouterr().out
    results = json.loads((tmp_path / "res" / "results.json").read_text())
    assert results["set"]["checkpoint_label"] == "rrdbnet.safetensors"


def test_export_to_safetensors_is_the_reference_state_dict(tmp_path, capsys):
    """A weight file written back: the same tensors, BasicSR's keys, metadata for a reader."""
    out = tmp_path / "pt"
    assert export.main([str(RRDBNET), str(out), "--format", "safetensors"]) == 0
    assert "42 tensors, read back identical" in capsys.readouterr().out
    written, original = load_file(str(out / "model.safetensors")), load_file(str(RRDBNET))
    assert sorted(written) == sorted(original)
    for key, value in original.items():
        np.testing.assert_array_equal(written[key], value)
    record = json.loads((out / "export.json").read_text())
    assert record["arch"] == "rrdbnet" and record["channels"] == "rgb"


def test_export_a_run_to_safetensors(tmp_path, compose):
    """A trained run (tiny RRDBNet, RGB) as PyTorch weights: read back, the same model."""
    run = make_run(compose, tmp_path / "run", overrides=(*TINY_RRDB, "data.channels=rgb"))
    assert export.main([str(run), str(tmp_path / "pt"), "--format", "safetensors"]) == 0
    back = load_weights(tmp_path / "pt" / "model.safetensors")
    from sr.loading.models import load_model_from_run

    model = load_model_from_run(run)[0]
    x = np.random.default_rng(0).uniform(0, 1, (1, 7, 9, 3)).astype(np.float32)
    np.testing.assert_array_equal(back.model(x).numpy(), model(x).numpy())


def test_export_refuses_a_model_without_a_pytorch_layout(tmp_path, compose, capsys):
    run = make_run(compose, tmp_path / "run")  # ESPCN
    assert export.main([str(run), str(tmp_path / "pt"), "--format", "safetensors"]) == 2
    assert "no PyTorch layout for the model espcn" in capsys.readouterr().err
    assert not (tmp_path / "pt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_exports_of_a_weight_file_match_pytorch(tmp_path, fmt, capsys):
    """The TFLite and ONNX networks of the imported file against PyTorch's own output for the
    fixture's square input: >= 45 dB PSNR. ONNX through export.py; TFLite converted by
    sr.deploy.export.to_tflite (any height and width) and run on the 16 x 16 input, one window
    (export.py's windows need a side beyond twice the receptive field, 74 here: a larger fixture
    than is kept)."""
    for module in ("onnxruntime", "ai_edge_litert", "tf2onnx"):
        pytest.importorskip(module)
    from sr.deploy import Exported, psnr_float
    from sr.deploy.export import to_tflite

    folder, record = tmp_path / fmt, None
    if fmt == "onnx":
        assert export.main([str(RRDBNET), str(folder), "--format", "onnx"]) == 0
    else:
        folder.mkdir()
        to_tflite(load_weights(RRDBNET).model, folder / "model.tflite")
        record = {"format": "tflite", "file": "model.tflite", "scale": 4, "channels": 3,
                  "size": 16, "overlap": 0}  # fmt: skip
    ref = np.load(FIXTURES / "rrdbnet.npz")
    got = Exported(folder, record)(ref["input_square"]).numpy()
    psnr = psnr_float(got, ref["output_square"])
    with capsys.disabled():
        print(f"\n{fmt}: {psnr:.1f} dB against PyTorch, max |diff| "
              f"{np.abs(got - ref['output_square']).max():.2e}")  # fmt: skip
    assert psnr >= 45


# --- bad input: exit 2, one message naming the file and the fix, nothing written -----------


def refused(capsys, tmp_path, weights: Path, *more: str) -> str:
    out = tmp_path / "out.png"
    image = tmp_path / "in.png"
    Image.fromarray(np.ascontiguousarray(photo("coffee")[:16, :16])).save(image)
    assert upscale.main([str(weights), str(image), str(out), "--no-progress", *more]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip()
    assert err.startswith("upscale.py: error: ") and "\n" not in err and str(weights) in err
    return err


def test_truncated_file(tmp_path, capsys):
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(RRDBNET.read_bytes()[:30000])
    assert "truncated or corrupt" in refused(capsys, tmp_path, cut)


def test_another_architecture(tmp_path, capsys):
    other = tmp_path / "swinir.safetensors"
    save_file({"layers.0.attn.qkv.weight": np.ones((6, 2), np.float32)}, str(other))
    err = refused(capsys, tmp_path, other)
    assert "not an architecture read here" in err and "layers.0.attn.qkv.weight [6, 2]" in err
    assert "supported: " in err and "rrdbnet (generator)" in err


def test_missing_and_extra_keys(tmp_path, capsys):
    state = load_file(str(RRDBNET))
    state["body.0.rdb1.conv9.weight"] = state.pop("conv_hr.weight")
    save_file(state, str(tmp_path / "bad.safetensors"))
    err = refused(capsys, tmp_path, tmp_path / "bad.safetensors")
    assert "missing: conv_hr.weight" in err and "extra: body.0.rdb1.conv9.weight" in err


def test_a_2x_model(tmp_path, capsys):
    state = load_file(str(RRDBNET))
    state["conv_first.weight"] = np.tile(state["conv_first.weight"], (1, 4, 1, 1))  # unshuffled
    save_file(state, str(tmp_path / "x2.safetensors"))
    err = refused(capsys, tmp_path, tmp_path / "x2.safetensors")
    assert "a x2 model" in err and "only x4 models are read" in err


def test_a_pth_without_torch(tmp_path, capsys, monkeypatch):
    pth = tmp_path / "RealESRGAN_x4plus.pth"
    pth.write_bytes(b"PK\x03\x04")
    monkeypatch.setitem(sys.modules, "torch", None)
    assert ".[torch]" in refused(capsys, tmp_path, pth)


def test_a_run_option_with_a_file(tmp_path, capsys):
    assert "drop them" in refused(capsys, tmp_path, RRDBNET, "--checkpoint", "last")


def test_an_fp16_file_is_read_and_said(tmp_path, image, capsys):
    old = FIXTURES / "rrdbnet_old.safetensors"
    assert upscale.main([str(old), str(image), str(tmp_path / "o.png"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "cast 42 fp16 tensor(s) to float32" in out and "old ESRGAN layout" in out


# --- train.py ------------------------------------------------------------------------------


@pytest.mark.slow
def test_train_init_from_a_weight_file(folders, compose, tmp_path):
    """The run starts from the file's weights (one step at lr 1e-9) and records the file."""
    from sr.loading.models import load_model_from_run
    from sr.train.app import run

    cfg = compose(
        *TINY_RRDB, "data=generator", "data.channels=rgb", f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null", "data.batch_size=2", "data.patch_size=32", "train.steps=1",
        "train.lr=1e-9", f"train.init_from={RRDBNET}",
    )  # fmt: skip
    run(cfg, tmp_path / "new")
    record = json.loads((tmp_path / "new" / "init_from.json").read_text())["generator"]
    assert record["file"] == str(RRDBNET) and record["arch"] == "rrdbnet"
    assert len(record["sha256"]) == 64 and record["model"]["growth"] == 4
    (tmp_path / "new" / ".hydra").mkdir()
    from omegaconf import OmegaConf

    OmegaConf.save(cfg, tmp_path / "new" / ".hydra" / "config.yaml")
    trained = load_model_from_run(tmp_path / "new")[0]
    for got, want in zip(trained.get_weights(), load_weights(RRDBNET).model.get_weights()):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_train_init_from_a_file_of_another_model_is_refused(compose, tmp_path):
    from sr.train.app import run

    cfg = compose(
        "model=rrdbnet", "model.blocks=1", "data=generator", f"data.hr_dir={tmp_path / 'never'}",
        "data.val_dir=null", f"train.init_from={RRDBNET}",
    )  # fmt: skip
    with pytest.raises(ConfigError) as info:
        run(cfg, tmp_path / "new")
    text = str(info.value)
    assert text.startswith(f"train.init_from={RRDBNET}: the file is a rrdbnet generator")
    assert "model.features: 64 -> 8" in text and "data.channels: 'y' -> 'rgb'" in text
    assert "model=rrdbnet model.features=8 model.blocks=1 model.growth=4" in text
    assert not (tmp_path / "new").exists()


GENERATORS = sorted(
    p.stem
    for p in FIXTURES.glob("*.safetensors")
    if p.stem not in ("unet_sn", "vgg19")  # a discriminator and VGG features: no SR model
)


@pytest.mark.slow
@pytest.mark.parametrize("name", GENERATORS)
def test_every_generator_fixture_goes_through_export_and_back(name, tmp_path, capsys):
    """Every architecture's fixture: described by export.py, written as the reference state
    dict, detected back as the same architecture and hyperparameters, the same outputs."""
    source = FIXTURES / f"{name}.safetensors"
    assert export.main([str(source), str(tmp_path / "pt"), "--format", "safetensors"]) == 0
    assert f"{source}: " in capsys.readouterr().out
    before, after = load_weights(source), load_weights(tmp_path / "pt" / "model.safetensors")
    assert (after.found.arch, after.found.model) == (before.found.arch, before.found.model)
    c = before.found.channels  # 3, or 1 for a Y model
    x = np.random.default_rng(0).uniform(0, 1, (1, 24, 28, c)).astype(np.float32)  # RLFN: >= 15
    np.testing.assert_allclose(after.model(x).numpy(), before.model(x).numpy(), atol=1e-5)
