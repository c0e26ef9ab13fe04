"""RGB models and paired evaluation: sr.evaluation, sr.results, sr.inference and
scripts/evaluate.py.

RGB evaluation against the protocol written out by hand with skimage (Y of the rounded RGB output,
RGB PSNR over R, G, B), paired evaluation on LR made by ``make_lr`` equal to the unpaired one,
errors naming the HR and LR files before anything runs, ``--save-lr`` sets (fixed, never
overwritten), and upscaling and export of an RGB model (RGB, RGBA, gray, gray + alpha, tiled)."""

from __future__ import annotations

import csv
import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from skimage.color import rgb2ycbcr
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from sr import results as sr_results
from sr.config import degradation_named
from sr.core.degrade import bicubic_downscale, bicubic_upscale, make_lr, quantize
from sr.core.images import ImageFolderError
from sr.evaluation import (
    METRICS,
    RGB_METRICS,
    evaluate_images,
    evaluate_sequences,
    input_channels,
    match_lr_files,
    prepare,
)
from sr.inference import SequenceUpscaler, Upscaler, serving_module
from sr.models.layers import PixelShuffle
from sr.models.registry import make_model
from tests.conftest import photo, write_photos
from tests.fake_run import TINY, load_script, make_run, read_scalars

evaluate = load_script("evaluate")
S = 4


@pytest.fixture(scope="module")
def rgb_model():
    """An RGB model whose output is mid-range and mixes R, G and B: a 3x3 convolution and a pixel
    shuffle, initialised to nearest-neighbour upscaling plus noise on every weight (receptive
    radius 1 LR pixel, which the tiler reads)."""
    lr = keras.Input(shape=(None, None, 3))
    conv = keras.layers.Conv2D(3 * S * S, 3, padding="same")
    model = keras.Model(lr, PixelShuffle(S)(conv(lr)), name="rgbnet")
    rng = np.random.default_rng(3)
    kernel = rng.normal(0.0, 0.04, (3, 3, 3, 3 * S * S)).astype(np.float32)
    for j in range(3 * S * S):  # depth_to_space: output channel j % 3 of sub-pixel j // 3
        kernel[1, 1, j % 3, j] += 1.0
    conv.set_weights([kernel, np.zeros(3 * S * S, np.float32)])
    return model


@pytest.fixture(scope="module")
def y_model():
    keras.utils.set_random_seed(0)
    return make_model("espcn", S, features=(8, 8))


@pytest.fixture
def hr_dir(tmp_path):
    """Three 64x72 photos (RGB, gray, RGB) and one of 67x70, cropped to 64x68 by the protocol."""
    folder = tmp_path / "hr"
    write_photos(folder, size=64, names=("astronaut", "camera", "coffee"))
    Image.fromarray(photo("chelsea")[30:97, 40:110]).save(folder / "odd.png")
    return folder


def _to_8_bits(x) -> np.ndarray:
    return np.clip(np.floor(np.asarray(x, np.float64) + 0.5), 0, 255)


def _hr(path) -> np.ndarray:
    hr = np.asarray(Image.open(path), np.float64)
    hr = hr[..., None] if hr.ndim == 2 else hr
    return hr[: hr.shape[0] // S * S, : hr.shape[1] // S * S]


def hand_scores(model, path) -> dict:
    """The protocol for an RGB model by hand: LR of the RGB HR by the project's bicubic (tested
    against MATLAB in test_degrade.py), rounded; the model on the LR RGB / 255 (gray
    replicated); output rounded to 8 bits (gray: 0.299 R + 0.587 G + 0.114 B, rounded); Y by
    skimage; PSNR and SSIM by skimage with S border pixels cropped."""
    hr = _hr(path)
    gray = hr.shape[-1] == 1
    lr = _to_8_bits(bicubic_downscale(hr, S).numpy())
    bicubic = _to_8_bits(bicubic_upscale(lr, S).numpy())
    x = np.repeat(lr, 3, axis=-1) if gray else lr
    out = model(tf.constant((x / 255.0)[None], tf.float32)).numpy()[0] * np.float32(255)
    if gray:
        out = out.astype(np.float64) @ np.array([[0.299], [0.587], [0.114]])
    sr = _to_8_bits(out)

    def y(im):
        return im[..., 0] if im.shape[-1] == 1 else rgb2ycbcr(im / 255.0)[..., 0]

    def crop(im):
        return im[S:-S, S:-S]

    def scores(im):
        ref, test = crop(y(hr)), crop(y(im))
        ssim = structural_similarity(
            ref,
            test,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
            data_range=255,
        )
        rgb = peak_signal_noise_ratio(crop(hr), crop(im), data_range=255)
        return peak_signal_noise_ratio(ref, test, data_range=255), ssim, rgb

    (p, s, p_rgb), (pb, sb, pb_rgb) = scores(sr), scores(bicubic)
    return dict(psnr=p, ssim=s, psnr_bicubic=pb, ssim_bicubic=sb, psnr_rgb=p_rgb,
                psnr_rgb_bicubic=pb_rgb)  # fmt: skip


def test_input_channels_tells_y_from_rgb_models(rgb_model, y_model):
    assert input_channels(rgb_model) == 3 and input_channels(y_model) == 1
    assert input_channels(make_model("espcn", S, channels=3, features=(4, 4))) == 3
    assert input_channels(lambda x, training=False: x) == 1  # a plain callable: a Y model
    four = keras.Model(i := keras.Input((None, None, 4)), i, name="four")
    with pytest.raises(ValueError, match="model four reads 4 channels: .* 1 \\(Y\\) or 3"):
        input_channels(four)


def test_rgb_model_is_scored_on_y_of_its_rounded_output(rgb_model, hr_dir):
    files = sorted(hr_dir.iterdir())
    res = evaluate_images(rgb_model, files, S)
    assert list(res["per_image"]) == [p.name for p in files]
    for path in files:
        row, ref = res["per_image"][path.name], hand_scores(rgb_model, path)
        assert set(row) == {*METRICS, *RGB_METRICS}
        gray = path.name.startswith("camera")
        # gray: float32 vs float64 luma may round one pixel differently (< 1e-3 dB)
        tol = 1e-3 if gray else 1e-6
        for key in ("psnr", "psnr_rgb"):
            assert row[key] == pytest.approx(ref[key], abs=tol), (path.name, key)
        assert row["ssim"] == pytest.approx(ref["ssim"], abs=1e-5 if gray else 1e-8)
        for key in ("psnr_bicubic", "ssim_bicubic", "psnr_rgb_bicubic"):
            assert row[key] == pytest.approx(ref[key], abs=1e-6), (path.name, key)
        if gray:  # one channel: the RGB PSNR of a gray image is its gray PSNR
            assert row["psnr_rgb"] == row["psnr"]
            assert row["psnr_rgb_bicubic"] == row["psnr_bicubic"]
        else:  # colour: Y and RGB PSNR are different figures
            assert abs(row["psnr_rgb"] - row["psnr"]) > 0.05
    for key in (*METRICS, *RGB_METRICS):
        assert res[key] == pytest.approx(np.mean([r[key] for r in res["per_image"].values()]))
    assert res["psnr"] > 20  # a real upscale, not clipped noise


def test_rgb_results_json_csv_table_and_tensorboard(tmp_path, rgb_model, y_model, hr_dir):
    results = sr_results.evaluate(rgb_model, [hr_dir], S, "rgbnet", 7, None, progress=False)
    entry = results["hr"]
    keys = list(entry)
    assert keys.index("psnr_rgb") == keys.index("ssim_bicubic") + 1
    assert keys.index("psnr_rgb_bicubic") == keys.index("psnr_rgb") + 1
    assert all(set(row) == {*METRICS, *RGB_METRICS} for row in entry["per_image"].values())
    sr_results.write_results(results, tmp_path / "out")
    with (tmp_path / "out" / "results.csv").open() as f:
        rows = list(csv.reader(f))
    old = ["folder", "file", "model", "scale", "step", *METRICS, "checkpoint"]
    assert rows[0] == [*old, "psnr_rgb", "psnr_rgb_bicubic"]  # old columns in place
    mean = rows[-1]
    assert mean[:2] == ["hr", "MEAN"] and mean[9] == ""
    assert float(mean[10]) == pytest.approx(entry["psnr_rgb"], abs=1e-6)
    assert float(mean[11]) == pytest.approx(entry["psnr_rgb_bicubic"], abs=1e-6)
    table = sr_results.markdown_table(results).splitlines()
    assert table[0].endswith("| SSIM | RGB PSNR (dB) |")
    assert table[2].startswith("| hr | rgbnet (step 7) | 4 |")
    assert table[2].endswith(f"| {entry['psnr_rgb']:.2f} |")
    assert table[3].endswith(f"| {entry['psnr_rgb_bicubic']:.2f} |")
    sr_results.write_tensorboard(results, tmp_path / "tb", 7)
    scalars = read_scalars(tmp_path / "tb")
    assert set(scalars) == {f"eval/hr/{k}" for k in (*METRICS, *RGB_METRICS)}
    assert scalars["eval/hr/psnr_rgb"] == [(7, pytest.approx(entry["psnr_rgb"], abs=1e-4))]

    # bicubic with rgb=True: its RGB PSNR is the method's; a Y model has none
    bicubic = sr_results.evaluate(None, [hr_dir], S, "bicubic", 0, None, False, rgb=True)["hr"]
    assert bicubic["psnr_rgb"] == bicubic["psnr_rgb_bicubic"] == entry["psnr_rgb_bicubic"]
    y = sr_results.evaluate(y_model, [hr_dir], S, "espcn_x4", 0, None, progress=False)["hr"]
    assert not set(RGB_METRICS) & {*y, *next(iter(y["per_image"].values()))}
    assert "RGB" not in sr_results.markdown_table({"hr": y})


def test_an_rgb_run_through_the_cli(tmp_path, compose, hr_dir, capsys):
    run = make_run(compose, tmp_path / "rgb_run", overrides=(*TINY, "data.channels=rgb"))
    assert evaluate.main([str(run), str(hr_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    entry = json.loads((run / "results.json").read_text())["hr"]
    assert {"psnr_rgb", "psnr_rgb_bicubic"} <= set(entry) and entry["n"] == 4
    assert "RGB PSNR: over R, G and B" in out and "| SSIM | RGB PSNR (dB) |" in out
    y_run = make_run(compose, tmp_path / "y_run")
    assert evaluate.main([str(y_run), str(hr_dir), "--rgb", "--no-progress"]) == 2
    assert "is a Y-channel model, with no RGB output: --rgb applies to bicubic" in (
        capsys.readouterr().err
    )


def _write_lr(hr_path, folder, name, rgb=False):
    """Save make_lr of the cropped HR as ``folder/name`` (gray saved as RGB with ``rgb``)."""
    lr = make_lr(_hr(hr_path), S).numpy().astype(np.uint8)
    lr = np.repeat(lr, 3, axis=-1) if rgb and lr.shape[-1] == 1 else lr
    folder.mkdir(exist_ok=True)
    Image.fromarray(lr[..., 0] if lr.shape[-1] == 1 else lr).save(folder / name)


def test_paired_evaluation_on_make_lr_equals_unpaired(tmp_path, rgb_model, y_model, hr_dir):
    lr_dir = tmp_path / "lr"
    _write_lr(hr_dir / "astronaut_00.png", lr_dir, "astronaut_00.png")
    _write_lr(hr_dir / "camera_00.png", lr_dir, "camera_00x4.png", rgb=True)  # DIV2K, as RGB
    _write_lr(hr_dir / "coffee_00.png", lr_dir, "coffee_00.PNG")
    _write_lr(hr_dir / "odd.png", lr_dir, "odd.png")  # 16x17: the HR cropped to 64x68
    for model in (rgb_model, y_model, None):
        paired = sr_results.evaluate(model, [hr_dir], S, "m", 0, None, False, lr_dirs=[lr_dir])
        unpaired = sr_results.evaluate(model, [hr_dir], S, "m", 0, None, progress=False)
        assert paired["hr"].pop("lr_dir") == str(lr_dir)
        assert paired == unpaired  # the same figures, to the last bit


def test_a_given_lr_is_brought_to_the_hr_channels():
    gray, colour = photo("camera")[:64, :72, None], photo("coffee")[:64, :72]
    lr_colour = photo("coffee")[200:216, 300:318]
    item = prepare(gray, S, "gray.png", lr=lr_colour)  # a gray HR: the LR's gray, rounded
    expected = _to_8_bits(lr_colour.astype(np.float64) @ np.array([[0.299], [0.587], [0.114]]))
    assert item.lr.shape == (16, 18, 1) and np.abs(item.lr - expected).max() <= 1
    assert np.mean(item.lr == expected) > 0.99
    item = prepare(colour, S, "colour.png", lr=gray[:16, :18])  # an RGB HR: the gray replicated
    np.testing.assert_array_equal(item.lr, np.repeat(gray[:16, :18], 3, axis=-1))
    with pytest.raises(
        ValueError, match=r"the LR of colour.png is 17x16, expected 18x16 \(the HR"
    ):
        prepare(colour, S, "colour.png", lr=lr_colour[:, :17])


class NeverRun:
    """A model that fails the test if it is ever called."""

    inputs = None

    def __call__(self, *args, **kwargs):
        raise AssertionError("the model ran before every LR image was checked")


def test_missing_ambiguous_and_wrong_size_lr_are_named_before_any_scoring(tmp_path, hr_dir):
    good, bad = tmp_path / "lr_good", tmp_path / "lr_bad"
    for path in sorted(hr_dir.iterdir()):
        _write_lr(path, good, path.name)
    _write_lr(hr_dir / "camera_00.png", bad, "camera_00.png")
    _write_lr(hr_dir / "camera_00.png", bad, "camera_00x4.jpg")  # two candidates
    Image.fromarray(photo("coffee")[:16, :16]).save(bad / "coffee_00.png")  # 16x16, not 18x16
    _write_lr(hr_dir / "odd.png", bad, "odd.png")
    bad_hr = tmp_path / "other" / "hr2"
    bad_hr.mkdir(parents=True)
    for path in hr_dir.iterdir():
        (bad_hr / path.name).write_bytes(path.read_bytes())
    with pytest.raises(ImageFolderError) as error:
        sr_results.evaluate(
            NeverRun(), [hr_dir, bad_hr], S, "m", 0, None, False, lr_dirs=[good, bad]
        )
    message = str(error.value)
    assert f"3 of 4 HR image(s) have no usable LR image in {bad} at x4" in message
    assert (
        "astronaut_00.png: no LR image (looked for astronaut_00.png, astronaut_00.jpg, "
        "astronaut_00.jpeg, astronaut_00x4.png, astronaut_00x4.jpg, astronaut_00x4.jpeg)"
    ) in message
    assert "camera_00.png: several LR images match (camera_00.png, camera_00x4.jpg)" in message
    assert (
        "coffee_00.png (72x64, cropped to 72x64): LR coffee_00.png is 16x16, expected 18x16"
    ) in message
    assert "odd.png" not in message  # 70x67 cropped to 68x64: its 17x16 LR is right
    assert match_lr_files([hr_dir / "odd.png"], bad, S) == [bad / "odd.png"]

    argv = ["bicubic", str(bad_hr), "--scale", "4", "--lr-dir", str(bad), "--no-progress"]
    assert evaluate.main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()
    argv = ["bicubic", str(hr_dir), str(bad_hr), "--scale", "4", "--lr-dir", str(good)]
    assert evaluate.main(argv) == 2  # one LR folder for two HR folders


def test_save_lr_writes_a_fixed_set_scores_it_and_never_overwrites(tmp_path, hr_dir, capsys):
    lr_dir, out = tmp_path / "set", tmp_path / "out"
    argv = ["bicubic", str(hr_dir), "--scale", "4", "--degradation", "bicubic", "--no-progress"]
    assert evaluate.main([*argv, "--save-lr", str(lr_dir), "--out", str(out)]) == 0
    files = sorted(hr_dir.iterdir())
    assert sorted(p.name for p in lr_dir.glob("*.png")) == [f"{p.stem}.png" for p in files]
    for path in files:
        saved = np.asarray(Image.open(lr_dir / f"{path.stem}.png"))
        expected = make_lr(_hr(path), S).numpy().astype(np.uint8)
        np.testing.assert_array_equal(saved.reshape(expected.shape), expected)  # gray stays gray
    record = json.loads((lr_dir / "lr_set.json").read_text())
    assert (record["degradation"], record["seed"], record["scale"]) == ("bicubic", 0, 4)
    entry = json.loads((out / "results.json").read_text())["hr"]
    assert (entry["degradation"], entry["seed"], entry["lr_dir"]) == ("bicubic", 0, str(lr_dir))
    unpaired = sr_results.evaluate(None, [hr_dir], S, "bicubic", 0, None, progress=False)["hr"]
    assert entry["per_image"] == unpaired["per_image"]

    before = {p.name: p.read_bytes() for p in lr_dir.iterdir()}
    capsys.readouterr()
    assert evaluate.main([*argv, "--save-lr", str(lr_dir), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert f"LR folder {lr_dir} already holds astronaut_00.png, " in err
    assert "nothing was written" in err and f"--lr-dir {lr_dir}" in err
    assert {p.name: p.read_bytes() for p in lr_dir.iterdir()} == before
    assert not (tmp_path / "o2").exists()
    assert evaluate.main([*argv]) == 2  # --degradation without --save-lr
    assert "--degradation needs --save-lr DIR" in capsys.readouterr().err


class Stub:
    """A degradation recording its calls: the LR is filled with 10 (index + 1) + seed."""

    name = "stub"

    def __init__(self):
        self.calls = []

    def lr_image(self, hr, scale, seed, index):
        self.calls.append((hr.shape, seed, index))
        shape = (hr.shape[0] // scale, hr.shape[1] // scale, 3)
        return np.full(shape, 10 * (index + 1) + seed, np.uint8)


def test_save_lr_set_degrades_image_i_with_seed_and_index(tmp_path, hr_dir):
    stub = Stub()
    written = sr_results.save_lr_set(stub, hr_dir, tmp_path / "set", S, seed=2, progress=False)
    names = [p.name for p in sorted(hr_dir.iterdir())]  # astronaut, camera, coffee, odd
    assert written == [tmp_path / "set" / name for name in names]  # <HR stem>.png
    assert [(c[1], c[2]) for c in stub.calls] == [(2, i) for i in range(4)]
    assert stub.calls[-1][0] == (64, 68, 3)  # cropped to a multiple of 4, RGB (gray replicated)
    for i, path in enumerate(written):
        image = np.asarray(Image.open(path))
        assert np.all(image == 10 * (i + 1) + 2)
        assert image.ndim == (2 if names[i].startswith("camera") else 3)  # gray stays gray


class WrongSize(Stub):
    """Returns an LR one pixel too narrow from the third image on."""

    def lr_image(self, hr, scale, seed, index):
        lr = super().lr_image(hr, scale, seed, index)
        return lr[:, 1:] if index >= 2 else lr


def test_a_failing_set_leaves_nothing_behind(tmp_path, hr_dir):
    with pytest.raises(
        ValueError, match=r"degradation stub made a uint8 LR of shape \(16, 17, 3\)"
    ):
        sr_results.save_lr_set(WrongSize(), hr_dir, tmp_path / "new", S, 0, progress=False)
    assert not (tmp_path / "new").exists()  # the two images written were removed
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="expected uint8 \\(16, 18, 3\\)"):
        sr_results.save_lr_set(WrongSize(), hr_dir, tmp_path / "kept", S, 0, progress=False)
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["notes.txt"]


@pytest.mark.slow
def test_realesrgan_sets_are_a_function_of_the_seed(tmp_path):
    hr = tmp_path / "hr"
    write_photos(hr, size=48, names=("astronaut", "camera"))
    degradation = degradation_named("realesrgan")
    sets = {}
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        sr_results.save_lr_set(degradation, hr, tmp_path / name, S, seed, progress=False)
        sets[name] = [np.asarray(Image.open(p)) for p in sorted((tmp_path / name).glob("*.png"))]
    assert [im.shape for im in sets["a"]] == [(12, 14, 3), (12, 14)]
    assert all(np.array_equal(x, y) for x, y in zip(sets["a"], sets["b"]))
    assert not np.array_equal(sets["a"][0], sets["c"][0])


def test_upscale_rgb_rgba_gray_and_tiles_with_an_rgb_model(rgb_model):
    upscaler = Upscaler(rgb_model, S)
    assert upscaler.overlap == 1 + 2  # the 3x3 convolution + the bicubic reach of alpha
    rgb = np.ascontiguousarray(photo("coffee")[100:121, 200:226])
    alpha = np.ascontiguousarray(photo("camera")[100:121, 200:226])[..., None]
    out = upscaler(rgb)
    expected = _to_8_bits(rgb_model(tf.constant(rgb[None] / 255.0, tf.float32))[0] * 255.0)
    assert out.shape == (84, 104, 3) and out.dtype == np.uint8
    assert np.abs(out - expected).max() <= 1 and np.mean(out == expected) > 0.99
    assert len(np.unique(out[..., 0].astype(int) - out[..., 1])) > 10  # channels really differ

    rgba = upscaler(np.concatenate([rgb, alpha], axis=-1))
    np.testing.assert_array_equal(rgba[..., :3], out)
    np.testing.assert_array_equal(rgba[..., 3:], quantize(bicubic_upscale(alpha, S)).numpy())

    gray = alpha  # a gray image: replicated for the model, the output's gray written
    rgb3 = np.repeat(gray, 3, axis=-1)
    model_out = rgb_model(tf.constant(rgb3[None] / 255.0, tf.float32))[0].numpy() * 255.0
    expected = _to_8_bits(model_out.astype(np.float64) @ np.array([[0.299], [0.587], [0.114]]))
    out_gray = upscaler(gray)
    assert out_gray.shape == (84, 104, 1)
    assert np.abs(out_gray - expected).max() <= 1 and np.mean(out_gray == expected) > 0.99
    out_la = upscaler(np.concatenate([gray, gray[::-1]], axis=-1))
    np.testing.assert_array_equal(out_la[..., :1], out_gray)
    np.testing.assert_array_equal(out_la[..., 1:], quantize(bicubic_upscale(gray[::-1], S)))

    big = np.ascontiguousarray(photo("astronaut")[50:95, 80:141])  # 45x61
    big = np.concatenate([big, photo("camera")[50:95, 80:141, None]], axis=-1)
    for image in (big[..., :3], big, big[..., 3:]):  # RGB, RGBA, gray
        whole, tiled = upscaler(image), upscaler(image, tile=16)
        assert tiled.shape == whole.shape == (180, 244, image.shape[-1])
        assert np.abs(tiled.astype(int) - whole).max() <= 1
        assert np.mean(tiled == whole) > 0.999


def test_sequences_refuse_rgb_models(rgb_model, hr_dir):
    with pytest.raises(ValueError, match="rgbnet is an RGB model: sequences are upscaled"):
        SequenceUpscaler(rgb_model, S, frames=1)
    with pytest.raises(ValueError, match="rgbnet is an RGB model: sequences are scored"):
        evaluate_sequences(rgb_model, [], S, 1, 1, 0)


def test_exported_rgb_model_reproduces_the_upscaler(tmp_path):
    keras.utils.set_random_seed(1)
    model = make_model("espcn", S, channels=3, features=(8, 8))
    module = serving_module(model, S)
    tf.saved_model.save(
        module, str(tmp_path / "saved"), signatures={"serving_default": module.serve}
    )
    serve = tf.saved_model.load(str(tmp_path / "saved")).signatures["serving_default"]
    rgb = np.ascontiguousarray(photo("chelsea")[50:87, 100:145])  # 37x45
    sr = serve(lr=tf.constant(rgb[np.newaxis]))["sr"][0].numpy()
    expected = Upscaler(model, S)(rgb)
    assert sr.shape == (148, 180, 3) and len(np.unique(sr)) > 10
    np.testing.assert_array_equal(sr, expected)
