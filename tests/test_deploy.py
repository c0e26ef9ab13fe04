"""TFLite and ONNX exports (sr/deploy/export.py, scripts/export.py --format, upscale.py --backend):
each checked against Keras when written, at every input size promised, and refused cleanly."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PIL import Image

from sr.deploy import ExportCheckError, Exported, psnr_float, windows
from sr.loading.models import load_model_from_run
from tests.conftest import photo
from tests.fake_run import load_script, make_run

pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert")
pytest.importorskip("tf2onnx")

export = load_script("export")
upscale = load_script("upscale")
MODELS = {
    "edsr_lite": ("model=edsr_lite", "model.features=8", "model.blocks=2"),
    "rlfn": ("model=rlfn", "model.features=8", "model.blocks=1"),
    "span": ("model=span", "model.features=8", "model.blocks=2"),
    # two nearest x2 stages: its TFLite conversion needs the batch-1 signature (to_tflite)
    "rrdbnet": ("model=rrdbnet", "model.features=8", "model.blocks=1", "model.growth=4"),
}
SIZE = 32  # the TFLite exports' LR side in these tests (RLFN: its fallback overlap is 32)
SIZES = {"edsr_lite": SIZE, "span": SIZE, "rlfn": 96, "rrdbnet": 80}  # > 2 x its 21-pixel overlap


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One tiny run per model (random weights), composed as train.py would."""
    from sr.config import compose

    root = tmp_path_factory.mktemp("runs")
    return {name: make_run(compose, root / name, overrides=o) for name, o in MODELS.items()}


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    """``exported(name, fmt, size)``: the folder of export.py's export of ``runs[name]`` (written
    and checked once per module: the tests that only read an export share it)."""
    root = tmp_path_factory.mktemp("shared_exports")
    done = {}

    def get(name: str, fmt: str, size: int):
        out = root / f"{name}_{fmt}_{size}"
        if out not in done:
            argv = [str(runs[name]), str(out), "--format", fmt, "--size", str(size)]
            done[out] = export.main(argv)
        assert done[out] == 0
        return out

    return get


def keras_out(run, x):
    model, _, _ = load_model_from_run(run)
    return model(x, training=False).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("fmt", ["onnx", "tflite"])
def test_export_agrees_with_keras_at_every_size(runs, exported, name, fmt):
    """Written, checked (>= 45 dB, in fact float rounding), and equal to Keras at the sizes the
    docs promise: ONNX any size; TFLite its size, and larger inputs through its windows."""
    size = SIZES[name]
    out = exported(name, fmt, size)
    record = json.loads((out / "export.json").read_text())
    assert record["check"]["psnr_db"] >= 45 and record["check"]["threshold_db"] == 45
    assert (out / record["file"]).stat().st_size == record["bytes"] > 1000
    model = Exported(out)
    rng = np.random.default_rng(0)
    sizes = [(17, 23), (64, 64), (41, 90)] if fmt == "onnx" else [(size, size), (size + 9, 140)]
    for h, w in sizes:
        x = rng.random((1, h, w, 1), dtype=np.float32)
        got, expected = model(x).numpy(), keras_out(runs[name], x)
        assert got.shape == expected.shape == (1, 4 * h, 4 * w, 1)
        floor = 40 if name == "rlfn" and (h, w) != (size, size) else 60  # RLFN pools: close
        assert psnr_float(got, expected) > floor, (h, w)


@pytest.mark.slow
def test_tflite_runs_an_input_smaller_than_its_size_at_its_own(runs, exported):
    """A smaller input runs at its own size (the interpreter resized), not mirrored to the
    export's: equal to Keras at its bottom and right edges too (every convolution pads with
    zeros there, as in Keras; mirrored, they differed: tests/test_export_windows.py)."""
    out = exported("edsr_lite", "tflite", 32)
    y = photo("camera")[200:217, 200:223].astype(np.float32) / 255.0
    x = y[np.newaxis, :, :, np.newaxis]
    got, expected = Exported(out)(x).numpy(), keras_out(runs["edsr_lite"], x)
    assert got.shape == expected.shape == (1, 68, 92, 1)
    edges = np.s_[:, 4 * 17 - 4 * 6 :, 4 * 23 - 4 * 6 :]  # the receptive field of the edges
    assert psnr_float(got, expected) > 60 and psnr_float(got[edges], expected[edges]) > 60


def test_windows_cover_the_image_once_with_the_margin():
    for length, size, margin in [(64, 32, 6), (90, 32, 6), (33, 32, 10), (32, 32, 20)]:
        kept = np.zeros(length, int)
        for start, lo, hi in windows(length, size, margin):
            assert 0 <= start and start + size <= length
            assert lo >= start and hi <= start + size
            assert lo == 0 or lo - start >= margin
            assert hi == length or start + size - hi >= margin
            kept[lo:hi] += 1
        assert (kept == 1).all()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "tflite"])
def test_upscale_with_a_backend_gives_the_keras_pixels(runs, exported, tmp_path, backend):
    """upscale.py --backend on an RGB and a gray image: the keras backend's pixels (8-bit
    rounding ties aside)."""
    run, out = runs["edsr_lite"], exported("edsr_lite", backend, 32)
    images = tmp_path / "in"
    images.mkdir()
    Image.fromarray(np.ascontiguousarray(photo("astronaut")[:50, :70])).save(images / "rgb.png")
    Image.fromarray(np.ascontiguousarray(photo("camera")[:45, :60])).save(images / "gray.png")
    for which, source in (("keras", run), (backend, out)):
        argv = [str(source), str(images), str(tmp_path / which), "--no-progress"]
        assert upscale.main([*argv, "--backend", which]) == 0
    for name, shape in (("rgb.png", (200, 280, 3)), ("gray.png", (180, 240))):
        a = np.asarray(Image.open(tmp_path / "keras" / name), int)
        b = np.asarray(Image.open(tmp_path / backend / name), int)
        assert a.shape == b.shape == shape
        assert np.abs(a - b).max() <= 1 and np.mean(a == b) > 0.99


@pytest.mark.slow
def test_int8_export_runs_and_reports_its_agreement(runs, tmp_path, photo_dir):
    common = ["--format", "tflite", "--size", "32", "--calibration", str(photo_dir)]
    records = {}
    for name, extra in (("int8", ["--quantize", "int8"]), ("float", [])):
        argv = [str(runs["edsr_lite"]), str(tmp_path / name), *common, *extra]
        assert export.main(argv) == 0
        records[name] = json.loads((tmp_path / name / "export.json").read_text())
    int8, floats = records["int8"], records["float"]
    assert int8["quantize"] == "int8" and int8["check"]["threshold_db"] is None
    assert int8["check"]["psnr_db"] > 30  # reported, not enforced: int8 rounds
    assert floats["check"]["psnr_db"] > int8["check"]["psnr_db"]
    assert int8["bytes"] < floats["bytes"]


def test_a_failed_check_leaves_nothing(runs, tmp_path, monkeypatch, capsys):
    import sr.deploy
    import sr.deploy.export

    monkeypatch.setattr(sr.deploy.export, "check", lambda *a: 12.0)
    out = tmp_path / "export"
    assert export.main([str(runs["edsr_lite"]), str(out), "--format", "onnx"]) == 2
    assert "12.0 dB PSNR on the calibration image, below 45 dB" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_missing_extra_names_the_install_command(runs, tmp_path, monkeypatch, capsys):
    import importlib

    real = importlib.import_module

    def without_litert(name, *args):
        if name == "ai_edge_litert":
            raise ImportError("No module named 'ai_edge_litert'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_litert)
    out = tmp_path / "export"
    assert export.main([str(runs["edsr_lite"]), str(out), "--format", "tflite"]) == 2
    err = capsys.readouterr().err
    assert "need the ai-edge-litert package" in err and 'pip install -e ".[export]"' in err
    assert not out.exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--format", "onnx", "--quantize", "int8"], "--quantize int8 is for --format tflite"),
        (["--format", "tflite", "--size", "32", "--overlap", "16"], "leaves nothing of a"),
    ],
)
def test_options_that_do_not_go_together_are_refused(runs, tmp_path, capsys, extra, message):
    assert export.main([str(runs["edsr_lite"]), str(tmp_path / "x"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_runtime_output_of_another_shape_is_an_error(tmp_path):
    """A runtime that returns another shape (as one ONNX Runtime graph rewrite did on another
    CPU: [1, 1, 4h, 4w, 1]) fails loudly instead of being broadcast into a PSNR."""
    import keras

    from sr.deploy import to_onnx

    lr = keras.Input((None, None, 1))
    up = keras.layers.UpSampling2D(4)(lr)
    five = keras.layers.Lambda(lambda t: keras.ops.expand_dims(t, 1))(up)  # [1, 1, 4h, 4w, 1]
    wrong = keras.Model(lr, five)
    wrong(np.zeros((1, 8, 8, 1), np.float32))  # Keras exports need a call
    to_onnx(wrong, tmp_path / "model.onnx")  # a 5-D model: the declared rank is its own
    record = {"format": "onnx", "file": "model.onnx", "scale": 4, "channels": 1, "overlap": 0}
    model = Exported(tmp_path, record)
    with pytest.raises(RuntimeError, match=r"returned shape \(1, 1, 68, 92, 1\) .* not \(1, 68"):
        model.run(np.zeros((1, 17, 23, 1), np.float32))
    with pytest.raises(ExportCheckError, match="differ"):
        psnr_float(np.zeros((1, 1, 8, 8, 1)), np.zeros((1, 8, 8, 1)))


@pytest.mark.slow
def test_an_onnx_conversion_of_the_wrong_rank_is_done_again_then_refused(
    exported, tmp_path, monkeypatch
):
    """tf2onnx now and then drops the output's final Squeeze (a 5-D file): such a conversion is
    redone, and after ONNX_ATTEMPTS wrong ones the export is refused and nothing written. The
    redone conversions are of a one-convolution model (tf2onnx's work, a smaller graph); the
    tiny EDSR's own export declares rank 4."""
    import keras

    import sr.deploy
    import sr.deploy.export

    onnx_file = exported("edsr_lite", "onnx", 32) / "model.onnx"
    assert sr.deploy.export.onnx_output_rank(onnx_file) == 4

    lr = keras.Input((None, None, 1))
    model = keras.Model(lr, keras.layers.Conv2D(1, 3, padding="same")(lr))
    model(np.zeros((1, 16, 16, 1), np.float32))  # Keras exports need a call
    path = tmp_path / "model.onnx"
    ranks = iter([5, 4])  # the first conversion is wrong, the second right
    monkeypatch.setattr(sr.deploy.export, "onnx_output_rank", lambda p: next(ranks))
    sr.deploy.to_onnx(model, path)
    assert next(ranks, "used") == "used"

    calls = []
    monkeypatch.setattr(sr.deploy.export, "onnx_output_rank", lambda p: calls.append(p) or 5)
    out = tmp_path / "refused"
    with pytest.raises(ExportCheckError, match=r"rank 5 for a model of rank 4, 3 times"):
        sr.deploy.export_model(model, out, "onnx", 4)
    assert len(calls) == 3
    assert not out.exists() and not list(tmp_path.glob(".refused*"))


@pytest.fixture(scope="module")
def exports(exported):
    """``{format: folder}``: a TFLite export of the tiny EDSR at a side of 96 (larger than the
    default tiles' edge bands below) and an ONNX export."""
    return {
        "tflite": exported("edsr_lite", "tflite", 96),
        "onnx": exported("edsr_lite", "onnx", 32),
    }


@pytest.mark.slow
def test_tflite_tiles_give_the_keras_pixels_at_every_tile(runs, exports):
    """An image of at least the export's side, of a size that is a multiple of neither the
    tile nor the side (300x270, side 96): at the default --tile (256: its bottom and right
    tiles are 44 and 14 pixels plus the overlap, widened to 96 where the image has them)
    and at others, the TFLite backend gives the Keras backend's pixels."""
    from sr.inference import Upscaler
    from sr.upscaling import DEFAULT_TILE

    image = np.ascontiguousarray(photo("astronaut")[100:370, 50:350])  # 270x300 RGB
    model, cfg, _ = load_model_from_run(runs["edsr_lite"])
    expected = Upscaler(model, int(cfg.data.scale))(image, tile=0).astype(int)
    exported = Exported(exports["tflite"])
    assert exported.input_size == 96
    tiled = Upscaler(exported, exported.scale, overlap=exported.overlap)  # as upscale.py
    for tile in (DEFAULT_TILE, 100, 0):
        got = tiled(image, tile=tile).astype(int)
        assert got.shape == expected.shape == (1080, 1200, 3)
        assert np.abs(got - expected).max() <= 1, tile  # 8-bit rounding ties only
        assert psnr_float(got / 255.0, expected / 255.0) >= 45, tile


def test_tiles_are_widened_to_a_fixed_input_side():
    from sr.inference import widened

    assert widened(506, 640, 640, 256) == (384, 640)  # the bottom band, moved inward
    assert widened(-10, 100, 640, 256) == (0, 256)
    assert widened(200, 520, 640, 256) == (200, 520)  # large enough already
    assert widened(90, 200, 200, 256) == (0, 200)  # the image is smaller: run at its size
    assert widened(-6, 70, 640, 0) == (0, 70)  # a model of any size: clipped only


@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_a_damaged_export_names_the_file_and_the_fix(exports, tmp_path, capsys, fmt):
    """The issue's cases: a truncated model.tflite (LiteRT: "not a valid Flatbuffer", no path)
    and model.onnx (a raw InvalidProtobuf), and a truncated export.json: exit 2, the file and
    the fix named."""
    from sr.core.runfiles import RunFileError

    folder = tmp_path / "export"
    shutil.copytree(exports[fmt], folder)
    record = json.loads((folder / "export.json").read_text())
    model = folder / record["file"]
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    photo_path = tmp_path / "in.png"
    Image.fromarray(np.ascontiguousarray(photo("astronaut")[:40, :40])).save(photo_path)
    argv = [str(folder), str(photo_path), str(tmp_path / "out.png"), "--backend", fmt]
    assert upscale.main(argv) == 2
    err = capsys.readouterr().err
    said = {"tflite": "not a valid Flatbuffer", "onnx": "InvalidProtobuf"}[fmt]
    assert f"upscale.py: error: {model} is unreadable (" in err and said in err
    assert f"python scripts/export.py {runs_of(record)} <new folder> --format {fmt}" in err
    meta = folder / "export.json"
    meta.write_text(meta.read_text()[:50])
    with pytest.raises(RunFileError, match=r"export.json is unreadable \(JSONDecodeError"):
        Exported(folder)
    assert not (tmp_path / "out.png").exists()


def runs_of(record: dict) -> str:
    return record["source"]["run"]
