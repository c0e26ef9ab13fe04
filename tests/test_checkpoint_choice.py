"""``--checkpoint best|last|ckpt-N`` of evaluate.py, upscale.py and export.py (issue 20, item 2):
the default is ``checkpoints/best`` where the run has one, else the newest of the rotation; every
output names the checkpoint used; ``best`` on a run without one is an error naming the folder."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import tensorflow as tf
from omegaconf import OmegaConf
from PIL import Image

from sr.inference import Upscaler, read_image
from sr.loading.checkpoints import best_dir, make_checkpoint, read_best
from sr.loading.models import build_model, load_model_from_run
from sr.train.checkpoint import make_manager
from tests.conftest import write_photos
from tests.fake_run import TINY, load_script

evaluate = load_script("evaluate")
upscale = load_script("upscale")
export = load_script("export")

# the first kernel of each checkpoint, a distinct constant: the rotation, then checkpoints/best
KERNELS = {"ckpt-4": 0.01, "ckpt-6": 0.02, "ckpt-8": 0.03, "best": 0.05}
BEST_STEP = 6
# --checkpoint given (None: the default) -> (which weights, label, step) on a run with best
CHOICES = {
    None: ("best", "best (ckpt-6)", 6),
    "best": ("best", "best (ckpt-6)", 6),
    "last": ("ckpt-8", "last (ckpt-8)", 8),
    "ckpt-4": ("ckpt-4", "ckpt-4", 4),
}


def make_runs(compose, root):
    """Two fake runs of one tiny ESPCN x4: ``with_best`` (rotation ckpt-4, ckpt-6, ckpt-8, and
    ``checkpoints/best/ckpt-6`` with ``best.json``) and ``without_best`` (the rotation alone);
    every checkpoint has its own first kernel (:data:`KERNELS`). Returns ``(with_best,
    without_best, cfg, {name: weights})``."""
    cfg = compose(*TINY, "data.scale=4")
    model = build_model(cfg)
    step = tf.Variable(0, dtype=tf.int64)
    ckpt = make_checkpoint(model, step=step)
    weights, runs = {}, (root / "with_best", root / "without_best")
    for name, value in KERNELS.items():
        kernel = model.trainable_variables[0]
        kernel.assign(np.full(kernel.shape, value, np.float32))
        weights[name] = [v.numpy() for v in model.weights]
        step.assign(BEST_STEP if name == "best" else int(name.split("-")[1]))
        for run in runs if name != "best" else runs[:1]:
            if name == "best":
                manager = tf.train.CheckpointManager(ckpt, str(best_dir(run)), max_to_keep=1)
            else:
                manager = make_manager(ckpt, run)
            prefix = manager.save(checkpoint_number=int(step))
    record = {"step": BEST_STEP, "psnr": 25.5, "weights": "live", "checkpoint": prefix}
    (best_dir(runs[0]) / "best.json").write_text(json.dumps(record))
    for run in runs:
        (run / ".hydra").mkdir(parents=True)
        OmegaConf.save(cfg, run / ".hydra" / "config.yaml")
    return *runs, cfg, weights


@pytest.fixture
def runs(tmp_path, compose):
    return make_runs(compose, tmp_path)


@pytest.fixture
def image(tmp_path):
    (path,) = write_photos(tmp_path / "in", size=20, names=("chelsea",))  # 20x28
    return path


def expected_output(cfg, weights, image_path) -> np.ndarray:
    """Upscaler's output with the given weights set into a fresh model (not by the loader)."""
    model = build_model(cfg)
    model.set_weights(weights)
    return Upscaler(model, 4)(read_image(image_path))


def argv_of(checkpoint) -> list[str]:
    return [] if checkpoint is None else ["--checkpoint", checkpoint]


def test_the_library_loads_the_weights_chosen(runs):
    with_best, without_best, _, weights = runs
    assert read_best(with_best)["step"] == BEST_STEP and read_best(without_best) is None
    for checkpoint, (name, label, step) in CHOICES.items():
        model, _, loaded = load_model_from_run(with_best, checkpoint)
        assert (model.sr_checkpoint, loaded) == (label, step), checkpoint
        for got, want in zip(model.weights, weights[name]):
            np.testing.assert_array_equal(got.numpy(), want)
    model, _, loaded = load_model_from_run(without_best)
    assert (model.sr_checkpoint, loaded) == ("last (ckpt-8)", 8)
    np.testing.assert_array_equal(model.weights[0].numpy(), weights["ckpt-8"][0])


def test_evaluate_scores_and_names_the_checkpoint(runs, tmp_path, capsys):
    with_best = runs[0]
    hr = tmp_path / "hr"
    write_photos(hr, size=48, names=("astronaut", "camera"))
    psnr = {}
    for checkpoint, (name, label, step) in CHOICES.items():
        out = tmp_path / f"out_{checkpoint}"
        argv = [str(with_best), str(hr), "--out", str(out), "--no-progress", *argv_of(checkpoint)]
        assert evaluate.main(argv) == 0
        stdout = capsys.readouterr().out
        assert f"espcn_x4 of {with_best}: checkpoint {label}, step {step}" in stdout.splitlines()
        entry = json.loads((out / "results.json").read_text())["hr"]
        assert (entry["checkpoint_label"], entry["step"]) == (label, step)
        assert entry["checkpoint"].endswith(f"best/ckpt-{step}" if name == "best" else name)
        with (out / "results.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 3 and {r["checkpoint"] for r in rows} == {label}
        assert rows[-1]["file"] == "MEAN" and rows[-1]["step"] == str(step)  # columns kept
        psnr[checkpoint] = entry["psnr"]
    assert psnr[None] == psnr["best"]
    assert len({psnr["best"], psnr["last"], psnr["ckpt-4"]}) == 3  # three different weights

    assert evaluate.main(["bicubic", str(hr), "--scale", "4", "--out", str(tmp_path / "b")]) == 0
    assert "checkpoint" not in capsys.readouterr().out
    entry = json.loads((tmp_path / "b" / "results.json").read_text())["hr"]
    assert entry["checkpoint"] is None and entry["checkpoint_label"] is None
    with (tmp_path / "b" / "results.csv").open() as f:
        assert {r["checkpoint"] for r in csv.DictReader(f)} == {""}


@pytest.mark.slow
def test_upscale_uses_and_names_the_checkpoint(runs, image, tmp_path, capsys):
    with_best, _, cfg, weights = runs
    for checkpoint, (name, label, step) in CHOICES.items():
        out = tmp_path / f"x4_{checkpoint}.png"
        argv = [str(with_best), str(image), str(out), "--no-progress", *argv_of(checkpoint)]
        assert upscale.main(argv) == 0
        line = (
            f"upscaled 1 of 1 image(s) x4 with espcn_x4 (step {step}) of checkpoint {label} "
            f"into {out}"
        )
        assert capsys.readouterr().out.splitlines()[-1] == line
        expected = expected_output(cfg, weights[name], image)
        np.testing.assert_array_equal(np.asarray(Image.open(out)), expected)
    best, last = (np.asarray(Image.open(tmp_path / f"x4_{c}.png")) for c in ("best", "last"))
    assert not np.array_equal(best, last)


@pytest.mark.slow
def test_export_uses_and_names_the_checkpoint(runs, image, tmp_path, capsys):
    with_best, _, cfg, weights = runs
    lr = read_image(image)
    for checkpoint, (name, label, step) in [(None, CHOICES[None]), ("ckpt-4", CHOICES["ckpt-4"])]:
        saved = tmp_path / f"saved_{checkpoint}"
        assert export.main([str(with_best), str(saved), *argv_of(checkpoint)]) == 0
        source = json.loads((saved / "export.json").read_text())["source"]
        assert source == {
            "weights": "espcn_x4",
            "step": step,
            "run": str(with_best),
            "checkpoint": label,
        }
        assert (
            f"(checkpoint {label}, step {step}, x4, espcn_x4 weights)" in capsys.readouterr().out
        )
        serve = tf.saved_model.load(str(saved)).signatures["serving_default"]
        sr = serve(lr=tf.constant(lr[np.newaxis]))["sr"][0].numpy()
        np.testing.assert_array_equal(sr, expected_output(cfg, weights[name], image))


def test_a_run_without_best_defaults_to_last_and_refuses_best(runs, image, tmp_path, capsys):
    without_best = runs[1]
    hr = tmp_path / "hr"
    write_photos(hr, size=48, names=("camera",))
    out = tmp_path / "out"
    assert evaluate.main([str(without_best), str(hr), "--out", str(out), "--no-progress"]) == 0
    assert "checkpoint last (ckpt-8), step 8" in capsys.readouterr().out
    entry = json.loads((out / "results.json").read_text())["hr"]
    assert entry["checkpoint_label"] == "last (ckpt-8)"
    assert upscale.main([str(without_best), str(image), str(tmp_path / "o.png")]) == 0
    assert "(step 8) of checkpoint last (ckpt-8) into" in capsys.readouterr().out

    missing = best_dir(without_best)
    commands = {
        "evaluate": (evaluate, [str(hr), "--out", str(tmp_path / "e"), "--no-progress"]),
        "upscale": (upscale, [str(image), str(tmp_path / "u.png"), "--no-progress"]),
        "export": (export, [str(tmp_path / "saved")]),
    }
    for script, (module, args) in commands.items():
        assert module.main([str(without_best), *args, "--checkpoint", "best"]) == 2, script
        err = capsys.readouterr().err
        assert err.startswith(f"{script}.py: error: no best checkpoint in {missing} "), err
        assert "use --checkpoint last or ckpt-N" in err
    assert not any((tmp_path / name).exists() for name in ("e", "u.png", "saved"))
