"""NIQE (sr.metrics.niqe, sr.metrics.niqe): MATLAB R2021a's figure for Set14's baboon, the
pristine model shipped with the package, the AGGD fit against distributions of known shape, the
metric's response to blur and noise; and NIQE in scripts/evaluate.py (--niqe, --real), checked
against images made here independently of sr.evaluation."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats
from scipy.special import gamma

import sr.metrics.niqe as niqe_module
from sr.core.color import y_channel
from sr.core.degrade import bicubic_downscale, bicubic_upscale, quantize
from sr.core.images import load_image
from sr.inference import Upscaler
from sr.loading.models import load_model_from_run
from sr.metrics.niqe import niqe
from tests.conftest import ROOT, SHARED, photo, shared_folder, write_photos
from tests.fake_run import load_script, make_run, read_scalars

evaluate = load_script("evaluate")

# ../shared/datasets/README.md: MATLAB R2021a's niqe of Set14's baboon.png (BasicSR's figure).
BABOON_MATLAB = 5.72957338


@pytest.fixture(scope="module")
def baboon() -> np.ndarray:
    return load_image(shared_folder("Set14") / "baboon.png")


def test_baboon_scores_matlab_r2021a(baboon):
    assert baboon.shape == (480, 500, 3)
    assert niqe(baboon) == pytest.approx(BABOON_MATLAB, abs=1e-3)
    # its Y, as [H, W] or [H, W, 1], is the same image to NIQE
    y = y_channel(baboon)
    assert niqe(y) == niqe(y[..., None]) == niqe(baboon)


def test_only_whole_blocks_count(baboon):
    """500 columns hold 5 blocks of 96: the last 20 play no part."""
    changed = baboon.copy()
    changed[:, 480:] = 0
    assert niqe(changed) == niqe(baboon)
    assert niqe(baboon[:480, :480]) == niqe(baboon)
    assert niqe(baboon[:384, :480]) != niqe(baboon)


def test_blur_and_noise_raise_niqe(baboon):
    """The natural-scene statistics depart from the pristine model with bicubic blur (x4 down
    and up) and with Gaussian noise: both score worse (higher) than the photo."""
    hr = baboon.astype(np.float32)
    blurred = quantize(bicubic_upscale(quantize(bicubic_downscale(hr, 4)), 4)).numpy()
    noisy = np.clip(hr + np.random.default_rng(0).normal(0, 20, hr.shape), 0, 255)
    clean = niqe(baboon)
    assert niqe(blurred.astype(np.uint8)) > clean + 1
    assert niqe(np.floor(noisy + 0.5).astype(np.uint8)) > clean + 1


def test_the_shipped_pristine_model():
    mu, cov, window = niqe_module.pristine_model()
    assert mu.shape == (1, 36) and cov.shape == (36, 36) and window.shape == (7, 7)
    assert np.allclose(cov, cov.T) and np.linalg.eigvalsh(cov).min() > -1e-9
    # the window is MATLAB's fspecial('gaussian', 7, 7/6): the release's
    x = np.arange(-3, 4)
    g = np.exp(-(x**2) / (2 * (7 / 6) ** 2))
    assert np.allclose(window, np.outer(g, g) / np.outer(g, g).sum(), rtol=0, atol=1e-15)
    shipped = ROOT / "sr" / "metrics" / niqe_module.PRISTINE_FILE
    package_data = f'"sr.metrics" = ["{niqe_module.PRISTINE_FILE}"]'
    assert package_data in (ROOT / "pyproject.toml").read_text()
    reference = SHARED.parent / "references" / "niqe" / niqe_module.PRISTINE_FILE
    if reference.is_file():  # the copy shipped is the reference's data, byte for byte
        assert shipped.read_bytes() == reference.read_bytes()


@pytest.mark.parametrize("shape", [0.8, 1.0, 2.0, 3.0])
def test_aggd_fit_recovers_known_shapes(shape):
    """Samples of an asymmetric generalized Gaussian of shape ``shape``, left scale 2 and right
    scale 1 (a side drawn with probability proportional to its scale, the magnitude that of
    scipy's gennorm): the fit finds the shape and the two scales."""
    rng = np.random.default_rng(1)
    size = (3, 200_000)
    magnitude = np.abs(stats.gennorm.rvs(shape, size=size, random_state=rng))
    left = rng.random(size) < 2 / 3
    x = np.where(left, -2.0 * magnitude, magnitude)
    alpha, beta_left, beta_right = niqe_module.aggd_fit(x)
    assert alpha == pytest.approx(np.full(3, shape), rel=0.03)
    assert beta_left == pytest.approx(np.full(3, 2.0), rel=0.03)
    assert beta_right == pytest.approx(np.ones(3), rel=0.03)


def test_nearest_shape_is_the_release_grid_search():
    """The bisection picks what MATLAB's min((r_gam - r).^2) picks on the grid 0.2:0.001:10,
    NaN included (index 1: shape 0.2)."""
    gam = np.arange(0.2, 10.001, 0.001)
    r_gam = gamma(2 / gam) ** 2 / (gamma(1 / gam) * gamma(3 / gam))
    ratios = np.concatenate(
        [np.random.default_rng(2).uniform(0.0, 0.8, 2000), r_gam[[0, 1, 500, -1]], [np.nan]]
    )
    want = gam[np.argmin((r_gam[None, :] - ratios[:, None]) ** 2, axis=1)]
    assert np.array_equal(niqe_module._nearest_shape(ratios), want)


def test_a_single_block_and_a_gray_photo():
    camera = photo("camera")[:100, :100]  # one block: MATLAB's covariance of one observation
    assert np.isfinite(niqe(camera)) and niqe(camera) > 0


@pytest.mark.parametrize(
    "image, error, message",
    [
        (np.zeros((128, 128, 3), np.float32), TypeError, "needs an 8-bit image"),
        (np.zeros((95, 200, 3), np.uint8), ValueError, "at least 96x96"),
        (np.zeros((128, 128, 4), np.uint8), ValueError, "[H, W, 3]"),
        (np.full((128, 128), 77, np.uint8), ValueError, "has texture"),
    ],
)
def test_bad_input_is_refused(image, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        niqe(image)


# scripts/evaluate.py --niqe and --real: NIQE in the protocol, for a run and for bicubic.


def _8_bits(x) -> np.ndarray:
    """Round half up to the 8-bit grid and clip, as a saved uint8 image is."""
    return np.clip(np.floor(np.asarray(x, np.float64) + 0.5), 0, 255).astype(np.uint8)


def test_niqe_beside_psnr_and_ssim_for_a_run(tmp_path, compose, photo_dir, capsys):
    """``--niqe``: every image's NIQE of the model's 8-bit Y and of the 8-bit bicubic upscale,
    ``scale`` border pixels cropped, each made here independently of ``sr.evaluation``."""
    run = make_run(compose, tmp_path / "run", steps=(5,))
    assert evaluate.main([str(run), str(photo_dir), "--niqe", "--no-progress"]) == 0
    entry = json.loads((run / "results.json").read_text())["hr"]
    model, _, _ = load_model_from_run(run)
    for path in sorted(photo_dir.iterdir()):
        hr = load_image(path).astype(np.float64)
        lr = _8_bits(bicubic_downscale(hr, 4).numpy())
        bicubic = _8_bits(bicubic_upscale(lr, 4).numpy())
        x = tf.constant(y_channel(lr.astype(np.float64))[None, :, :, None] / 255.0, tf.float32)
        sr_y = _8_bits(model(x, training=False).numpy()[0, :, :, 0] * 255.0)
        row = entry["per_image"][path.name]
        assert row["niqe_bicubic"] == pytest.approx(niqe(bicubic[4:-4, 4:-4]), abs=1e-9)
        assert row["niqe"] == pytest.approx(niqe(sr_y[4:-4, 4:-4]), abs=1e-9)
    rows = entry["per_image"].values()
    assert entry["niqe"] == pytest.approx(np.mean([r["niqe"] for r in rows]))
    assert entry["niqe_bicubic"] == pytest.approx(np.mean([r["niqe_bicubic"] for r in rows]))
    # beside PSNR and SSIM: the last column of the table and the CSV, and TensorBoard
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| hr |")]
    assert table[1].endswith(f" | {entry['niqe_bicubic']:.3f} |")
    with (run / "results.csv").open() as f:
        mean = [r for r in csv.DictReader(f) if r["file"] == "MEAN"][0]
    assert float(mean["niqe"]) == pytest.approx(entry["niqe"], abs=1e-6)
    assert float(mean["psnr"]) == pytest.approx(entry["psnr"], abs=1e-6)
    assert {"eval/hr/niqe", "eval/hr/niqe_bicubic"} <= set(read_scalars(run / "tb"))


@pytest.mark.slow
def test_real_photos_are_upscaled_and_scored_by_niqe(tmp_path, compose):
    """``--real``: LR photos without HR, upscaled by the run (``sr.inference.Upscaler``) and by
    bicubic, scored by NIQE, saved as PNG with ``--save``; a gray photo stays gray."""
    real = tmp_path / "real"
    write_photos(real, size=40, names=("astronaut", "camera", "coffee"))  # 40x48 LR photos
    run, out, save = make_run(compose, tmp_path / "run"), tmp_path / "out", tmp_path / "look"
    argv = [str(run), "--real", str(real), "--save", str(save), "--out", str(out)]
    assert evaluate.main([*argv, "--no-progress"]) == 0
    entry = json.loads((out / "results.json").read_text())["real"]
    assert entry["real"] is True and entry["n"] == 3 and "psnr" not in entry
    upscaler = Upscaler(load_model_from_run(run)[0], 4)
    for path in sorted(real.iterdir()):
        lr = load_image(path)
        sr_image = load_image(save / "real" / "espcn_x4" / path.name)
        bicubic = load_image(save / "real" / "bicubic" / path.name)
        assert np.array_equal(sr_image, upscaler(lr)) and sr_image.shape == (160, 192, lr.shape[2])
        assert np.array_equal(bicubic, _8_bits(bicubic_upscale(lr, 4).numpy()))
        row = entry["per_image"][path.name]
        assert row["niqe"] == pytest.approx(niqe(sr_image[4:-4, 4:-4]), abs=1e-9)
        assert row["niqe_bicubic"] == pytest.approx(niqe(bicubic[4:-4, 4:-4]), abs=1e-9)
    with (out / "results.csv").open() as f:
        mean = [r for r in csv.DictReader(f) if r["file"] == "MEAN"][0]
    assert mean["psnr"] == "" and float(mean["niqe_bicubic"]) == pytest.approx(
        entry["niqe_bicubic"], abs=1e-6
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bicubic", "--scale", "4"], "give folders of HR images or --real DIR"),
        (["bicubic", "{photos}", "--scale", "4", "--save", "{tmp}/x"], "--save needs --real"),
        (["bicubic", "--real", "{small}", "--scale", "4"], "too small for NIQE at x4"),
        (["bicubic", "{photos}", "--real", "{photos}", "--scale", "4"], "are both named"),
    ],
)
def test_niqe_errors_name_the_fault(tmp_path, photo_dir, capsys, argv, message):
    write_photos(tmp_path / "small", size=20, names=("chelsea",))  # 20x28: 72 pixels at x4
    values = {"photos": photo_dir, "tmp": tmp_path, "small": tmp_path / "small"}
    argv = [a.format(**values) for a in argv] + ["--out", str(tmp_path / "out"), "--no-progress"]
    assert evaluate.main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
