import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from sr.core.color import y_channel
from sr.evaluation import evaluate_folder
from sr.metrics import crop_border, psnr, ssim
from tests.conftest import photo, shared_folder


@pytest.fixture
def pair():
    hr = y_channel(photo("astronaut")[:200, :180].astype(np.float64))
    rng = np.random.default_rng(0)
    sr = np.clip(np.rint(hr + rng.normal(0, 6, hr.shape)), 0, 255)
    return sr, hr


def test_psnr_matches_skimage_with_border_crop(pair):
    sr, hr = pair
    for border in (0, 4):
        want = peak_signal_noise_ratio(
            crop_border(hr, border), crop_border(sr, border), data_range=255
        )
        assert psnr(sr, hr, border) == pytest.approx(want, abs=1e-9)
    assert psnr(hr, hr) == float("inf")


def test_ssim_matches_skimage_gaussian_wang2004(pair):
    sr, hr = pair
    for border in (0, 4):
        want = structural_similarity(
            crop_border(hr, border),
            crop_border(sr, border),
            data_range=255,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
        )
        assert ssim(sr, hr, border) == pytest.approx(want, abs=1e-9)
    assert ssim(hr, hr) == pytest.approx(1.0)


def test_metric_errors():
    with pytest.raises(ValueError, match="one shape"):
        psnr(np.zeros((8, 8)), np.zeros((8, 9)))
    with pytest.raises(ValueError, match="too small"):
        psnr(np.zeros((8, 8)), np.zeros((8, 8)), border=4)
    with pytest.raises(ValueError, match="11x11"):
        ssim(np.zeros((12, 12)), np.zeros((12, 12)), border=1)


@pytest.mark.parametrize(
    "folder, want_psnr, want_ssim", [("Set5", 28.42, 0.8104), ("Set14", 26.00, 0.7027)]
)
def test_bicubic_x4_reproduces_the_published_figures(folder, want_psnr, want_ssim):
    res = evaluate_folder(None, shared_folder(folder), scale=4)
    assert res["n"] == {"Set5": 5, "Set14": 14}[folder]
    assert res["psnr_bicubic"] == pytest.approx(want_psnr, abs=0.05)
    assert res["ssim_bicubic"] == pytest.approx(want_ssim, abs=0.002)
