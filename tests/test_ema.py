"""Weight averaging (``train.ema``): the averages follow the EMA formula, a run validates and
saves both weights, a resume carries the averages on, and the scripts load the weights chosen."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from sr.config import ConfigError, validate_train
from sr.core.errors import RunDirError
from sr.loading.checkpoints import find_checkpoint
from sr.loading.models import load_model_from_run, model_label
from sr.train.optimizers import ema_variables, make_optimizer
from tests.fake_run import load_script, make_run, read_scalars


@pytest.mark.slow
@pytest.mark.parametrize("mixed, warmup", [(False, True), (True, True), (False, False)])
def test_averages_follow_the_formula(compose, mixed, warmup):
    """average_1 = w_1, average_(n+1) = d_n average_n + (1 - d_n) w_(n+1) with the warm-up
    d_n = min(D, (1 + n) / (10 + n)), or with ``train.ema_warmup=false`` d_n = D (BasicSR's
    fixed decay), per variable in the model's order, after each applied step (and under loss
    scaling, whose optimizer wraps Adam)."""
    import keras

    decay = 0.75
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dense(1)])
    opt = make_optimizer(
        compose(f"train.ema={decay}", "train.lr=0.1", f"train.ema_warmup={warmup}"), mixed
    )
    opt.build(model.trainable_variables)
    averages = ema_variables(opt)
    assert len(averages) == len(model.trainable_variables) == 4
    expected = None
    rng = np.random.default_rng(0)
    for n in range(40):  # the warm-up binds up to n = 26, where (1 + n) / (10 + n) passes 0.75
        grads = [rng.normal(size=v.shape).astype(np.float32) for v in model.trainable_variables]
        opt.apply(grads, model.trainable_variables)
        weights = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
        d = min(decay, (1 + n) / (10 + n)) if warmup else decay
        expected = (
            weights
            if expected is None
            else [d * a + (1 - d) * w for a, w in zip(expected, weights)]
        )
        for average, value in zip(averages, expected):
            np.testing.assert_allclose(keras.ops.convert_to_numpy(average), value, rtol=1e-5)
    assert ema_variables(make_optimizer(compose(), mixed)) is None  # no train.ema: none


@pytest.mark.slow
@pytest.mark.parametrize("value", [0, 1, 1.5, -0.5])  # the schema refuses non-numbers
def test_ema_outside_0_1_is_refused(compose, value):
    with pytest.raises(ConfigError, match=rf"train.ema must be null .* got {value!r}"):
        validate_train(compose(f"train.ema={value}"))
    validate_train(compose("train.ema=0.999"))


def tiny_run(folders, run_dir, compose, *extra):
    """An in-process train.py run, with its config saved as Hydra saves it."""
    from omegaconf import OmegaConf

    from sr.train.app import run

    cfg = compose(
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        "data=generator",
        "data.batch_size=4",
        "data.patch_size=32",
        "model.features=[8,8]",
        "train.lr=1e-2",
        "train.log_every=2",
        *extra,
    )
    if not (run_dir / ".hydra" / "config.yaml").is_file():
        (run_dir / ".hydra").mkdir(parents=True)
        OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    return run(cfg, run_dir)


@pytest.mark.slow
def test_a_run_validates_and_saves_both_weights_and_resume_goes_on_averaging(
    folders, tmp_path, compose, caplog
):
    import keras

    from sr.evaluation import evaluate_images

    run_dir = tmp_path / "run"
    common = ("train.ema=0.5", "train.val_every=3", "train.ckpt_every=3")
    with caplog.at_level(logging.INFO):
        final = tiny_run(folders, run_dir, compose, "train.steps=6", *common)
    assert final["step"] == 6
    assert "averaged weights (train.ema=0.5)" in caplog.text
    scalars = read_scalars(run_dir / "tb")
    assert [s for s, _ in scalars["val/psnr"]] == [s for s, _ in scalars["val_ema/psnr"]] == [3, 6]

    val = sorted((folders / "val").iterdir())
    live, cfg, step = load_model_from_run(run_dir, weights="live")
    ema, _, _ = load_model_from_run(run_dir)  # auto: the averages, present
    assert step == 6 and model_label(live) == live.name and model_label(ema) == f"{ema.name}+ema"
    # what validation scored is what was saved: the trained weights went back after scoring
    # the averages (else the saved trained weights would be the averages)
    assert evaluate_images(live, val, 4)["psnr"] == pytest.approx(final["val/psnr"], abs=1e-9)
    assert evaluate_images(ema, val, 4)["psnr"] == pytest.approx(final["val/ema_psnr"], abs=1e-9)
    assert final["val/ema_psnr"] != final["val/psnr"]

    # a resume restores the averages and goes on: average_7 = d average_6 + (1 - d) w_7 with the
    # warm-up's d = min(0.5, 7 / 16)
    tiny_run(folders, run_dir, compose, "train.steps=7", *common, f"resume={run_dir}")
    # turning averaging off (or on) at a resume is refused: the optimizer state would not match
    with pytest.raises(ConfigError, match=r"trained with train.ema and this run has train.ema="):
        tiny_run(folders, run_dir, compose, "train.steps=8", f"resume={run_dir}")
    avg6 = load_model_from_run(run_dir, "ckpt-6", "ema")[0].trainable_variables
    live7 = load_model_from_run(run_dir, "ckpt-7", "live")[0].trainable_variables
    avg7 = load_model_from_run(run_dir, "ckpt-7", "ema")[0].trainable_variables
    for a6, w7, a7 in zip(avg6, live7, avg7):
        a6, w7, a7 = (keras.ops.convert_to_numpy(v) for v in (a6, w7, a7))
        assert not np.allclose(a6, w7)
        np.testing.assert_allclose(a7, 7 / 16 * a6 + 9 / 16 * w7, rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_scripts_choose_the_weights(tmp_path, compose, folders, capsys):
    """Without train.ema there are no averages: auto loads the trained weights, ema is an error
    naming train.ema; evaluate.py labels its rows with the weights it used."""
    plain = make_run(compose, tmp_path / "plain", steps=(5,))
    assert load_model_from_run(plain)[0].sr_weights == "live"
    with pytest.raises(RunDirError, match=r"holds no averaged weights: .* without train.ema"):
        load_model_from_run(plain, weights="ema")
    with pytest.raises(ValueError, match="weights must be one of auto, ema, live"):
        load_model_from_run(plain, weights="best")

    run_dir = tmp_path / "run"
    tiny_run(folders, run_dir, compose, "train.steps=2", "train.ema=0.9", "data.val_dir=null")
    evaluate = load_script("evaluate")
    val = str(folders / "val")
    labels = {}
    for weights in ("auto", "live", "ema"):
        out = tmp_path / weights
        assert evaluate.main([str(run_dir), val, "--weights", weights, "--out", str(out)]) == 0
        labels[weights] = (out / "results.json").read_text()
    assert '"espcn_x4+ema"' in labels["auto"] and '"espcn_x4+ema"' in labels["ema"]
    assert '"espcn_x4"' in labels["live"]
    assert evaluate.main(["bicubic", val, "--scale", "4", "--weights", "ema"]) == 2
    assert "--weights apply to a run directory" in capsys.readouterr().err

    export = load_script("export")
    source = export.export(run_dir, tmp_path / "saved", weights="live")["source"]
    assert (source["weights"], source["step"]) == ("espcn_x4", 2)
    source = export.export(run_dir, tmp_path / "saved_ema")["source"]
    assert (source["weights"], source["step"]) == ("espcn_x4+ema", 2)
    on_disk = json.loads((tmp_path / "saved_ema" / "export.json").read_text())["source"]
    assert on_disk == source
    assert find_checkpoint(run_dir).endswith("ckpt-2")
