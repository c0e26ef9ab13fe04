"""The metric registry (issue 44): the project's metrics declared where they are computed, and a
metric of a module outside ``sr`` registered by import and computed on a folder by name."""

import numpy as np
import pytest
from PIL import Image

from sr import evaluation
from sr.metrics import registry
from sr.metrics.registry import MetricSpec, register


def mae_levels(sr_y, hr_y, scale):
    """Mean absolute error of Y in 8-bit levels, ``scale`` border pixels cropped."""
    s = slice(scale, -scale)
    return float(np.mean(np.abs(sr_y[s, s] - hr_y[s, s])))


MAE = register(MetricSpec("mae_test", mae_levels, direction="min", unit="levels", reads="y"))


def test_the_project_metrics_are_declared():
    assert registry.names()[:4] == ("psnr", "ssim", "psnr_rgb", "niqe")
    psnr, niqe = registry.get("psnr"), registry.get("niqe")
    assert (psnr.reference, psnr.direction, psnr.unit, psnr.reads) == (True, "max", "dB", "y")
    assert (niqe.reference, niqe.direction, niqe.reads) == (False, "min", "output")


def test_unknown_and_bad_names_refused():
    with pytest.raises(KeyError, match="unknown metric 'lpips': registered metrics are psnr, "):
        registry.get("lpips")
    with pytest.raises(ValueError, match="_bicubic"):
        MetricSpec("x_bicubic", mae_levels)
    with pytest.raises(ValueError, match="already registered"):
        register(MetricSpec("mae_test", lambda a, b, s: 0.0))


def test_a_user_metric_scores_a_folder(tmp_path):
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (32, 32, 3), np.uint8)).save(tmp_path / "a.png")
    res = evaluation.evaluate_images(None, [tmp_path / "a.png"], 4, metrics=("mae_test",))
    item = evaluation.prepare(np.asarray(Image.open(tmp_path / "a.png")), 4, "a.png")
    want = mae_levels(item.bicubic_y, item.hr_y, 4)
    assert res["per_image"]["a.png"]["mae_test_bicubic"] == res["mae_test_bicubic"] == want
    assert 0 < want < 255 and "mae_test" not in res  # bicubic alone: no model figure
    with pytest.raises(KeyError, match="unknown metric 'nope'"):
        evaluation.evaluate_images(None, [tmp_path / "a.png"], 4, metrics=("nope",))
