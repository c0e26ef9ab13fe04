"""NIQE (sr.core.metrics.niqe, sr.core.niqe): MATLAB R2021a's figure for Set14's baboon, the
pristine model shipped with the package, the AGGD fit against distributions of known shape, and
the metric's response to blur and noise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import gamma

from sr.core import niqe as niqe_module
from sr.core.color import y_channel
from sr.core.degrade import bicubic_downscale, bicubic_upscale, quantize
from sr.core.images import load_image
from sr.core.metrics import niqe
from tests.conftest import ROOT, SHARED, photo, shared_folder

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
    shipped = ROOT / "sr" / "core" / niqe_module.PRISTINE_FILE
    assert f'"sr.core" = ["{niqe_module.PRISTINE_FILE}"]' in (ROOT / "pyproject.toml").read_text()
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
