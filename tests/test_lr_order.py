"""benchmarks/lr_order.py: LR Y and PSNR with the LR made from RGB (evaluation) and from Y
(training), for bicubic and a run; the figures agree with sr.evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from sr.core.degrade import bicubic_upscale
from sr.core.images import list_images
from sr.evaluation import evaluate_images
from sr.loading.models import load_model_from_run
from tests.conftest import write_photos
from tests.fake_run import load_script, make_run

lr_order = load_script("lr_order", "benchmarks")


@pytest.fixture
def folder(tmp_path):
    return write_photos(tmp_path / "hr", size=64, names=("coffee", "camera"))[0].parent


def test_rgb_then_y_figures_are_the_evaluation_protocols(folder, compose, tmp_path):
    run = make_run(compose, tmp_path / "run")
    model = load_model_from_run(run)[0]
    files = list_images(folder)
    rows = lr_order.measure(
        files, 4, {"bicubic": lambda x, training=False: bicubic_upscale(x, 4), "model": model}
    )
    protocol = evaluate_images(model, files, 4)["per_image"]
    for row in rows:
        assert row["model/rgb_y"] == pytest.approx(protocol[row["name"]]["psnr"], abs=1e-9)
        assert row["protocol_bicubic"] == pytest.approx(
            protocol[row["name"]]["psnr_bicubic"], abs=1e-9
        )
    gray, colour = rows  # camera (gray) is its own Y: both orders give the same LR
    assert gray["name"].startswith("camera") and gray["max_diff"] == 0
    assert gray["bicubic/rgb_y"] == gray["bicubic/y_lr"]
    assert colour["mean_diff"] > 0.1 and np.isfinite(colour["bicubic/y_lr"])


def test_cli_prints_the_table(folder, capsys):
    assert lr_order.main(["--folder", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "| image | LR Y mean diff | LR Y max diff | bicubic RGB>Y (dB) |" in out
    assert "| camera_00.png | 0.000 | 0.00 |" in out
    assert "| **mean** |" in out and "protocol bicubic baseline" in out


def test_errors_name_the_folder(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert lr_order.main(["--folder", str(missing)]) == 2
    assert f"lr_order.py: error: image folder {missing} does not exist" in capsys.readouterr().err
