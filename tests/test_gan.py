"""The GAN stage (``discriminator=unet_sn``, ``loss=realesrgan``): each loss term against a hand
computation, the step against a hand-written Real-ESRGAN update, the config's refusals, and tiny
in-process runs: the two stages (``train.init_from``), exact resume with the discriminator, and
the guard that judges the pixel loss and the discriminator's collapse, not the PSNR."""

from __future__ import annotations

import json
import logging
import math
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from omegaconf import OmegaConf

from sr.config import ConfigError, build_source, validate
from sr.core.batch import SharpenedBatch
from sr.losses import Loss
from sr.train.gan import AdversarialTraining, GANStep, gan_terms
from sr.train.guard import DivergenceGuard
from sr.train.window import LossWindow
from tests.conftest import write_photos


def bce(logits: np.ndarray, real: bool) -> np.ndarray:
    """Per-example binary cross-entropy with logits, by the formula (float64)."""
    p = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    per_pixel = -np.log(p) if real else -np.log(1.0 - p)
    return per_pixel.reshape(len(logits), -1).mean(axis=1)


def fake_vgg():
    """A stand-in for the VGG19 features: five maps of known linear functions of the input."""
    x = keras.Input((None, None, 3))
    outs = {
        "conv1_2": x * 2.0,
        "conv2_2": keras.layers.AveragePooling2D(2)(x),
        "conv3_4": x[..., :1] - x[..., 2:],
        "conv4_4": keras.layers.AveragePooling2D(4)(x) * 3.0,
        "conv5_4": x[..., 1:2],
    }
    return keras.Model(x, outs)


def test_each_loss_term_is_its_hand_computation():
    rng = np.random.default_rng(0)
    hr, sr = rng.random((2, 8, 8, 3), np.float32), rng.random((2, 8, 8, 3), np.float32)
    loss = Loss({"l1": {}, "perceptual": {"layer_weights": [0.1, 0.2, 1.0, 0.5, 2.0]}, "gan": {}})
    l1, perceptual, gan = loss.terms
    np.testing.assert_allclose(l1(hr, sr), np.abs(hr - sr).mean(axis=(1, 2, 3)), rtol=1e-6)

    perceptual.vgg = fake_vgg()  # perceptual: sum_k w_k mean|phi_k(sr) - phi_k(hr)|

    def pool(x, k):
        return x.reshape(2, 8 // k, k, 8 // k, k, 3).mean(axis=(2, 4))

    phis = [
        lambda x: 2 * x,
        lambda x: pool(x, 2),
        lambda x: x[..., :1] - x[..., 2:],
        lambda x: 3 * pool(x, 4),
        lambda x: x[..., 1:2],
    ]
    want = sum(
        w * np.abs(phi(sr) - phi(hr)).reshape(2, -1).mean(axis=1)
        for w, phi in zip((0.1, 0.2, 1.0, 0.5, 2.0), phis)
    )
    np.testing.assert_allclose(perceptual(hr, sr), want, rtol=1e-5)
    y_hr, y_sr = hr[..., :1], sr[..., :1]  # a Y image goes in as three equal channels

    def rgb(y):
        return np.repeat(y, 3, axis=-1)

    want_y = sum(
        w
        * np.abs(phi(np.repeat(y_sr, 3, -1)) - phi(np.repeat(y_hr, 3, -1))).reshape(2, -1).mean(1)
        for w, phi in zip((0.1, 0.2, 1.0, 0.5, 2.0), phis)
    )
    np.testing.assert_allclose(perceptual(y_hr, y_sr), want_y, rtol=1e-5, atol=1e-7)

    logits_real = rng.normal(size=(2, 8, 8, 1)).astype(np.float32) * 3
    logits_fake = rng.normal(size=(2, 8, 8, 1)).astype(np.float32) * 3
    np.testing.assert_allclose(gan.generator(logits_fake), bce(logits_fake, True), rtol=1e-5)
    d_real, d_fake = gan.discriminator(logits_real, logits_fake)
    np.testing.assert_allclose(d_real, bce(logits_real, True), rtol=1e-5)
    np.testing.assert_allclose(d_fake, bce(logits_fake, False), rtol=1e-5)
    assert abs(float(bce(np.zeros((1, 1)), True)[0]) - math.log(2)) < 1e-12  # the formula


def tiny_models(channels=3):
    keras.utils.set_random_seed(1)
    lr = keras.Input((None, None, channels))
    g = keras.Model(
        lr, keras.layers.UpSampling2D(2)(keras.layers.Conv2D(channels, 3, padding="same")(lr))
    )
    x = keras.Input((None, None, channels))
    h = keras.layers.SpectralNormalization(keras.layers.Conv2D(4, 3, padding="same"))(x)
    d = keras.Model(x, keras.layers.Conv2D(1, 3, padding="same")(keras.layers.LeakyReLU(0.2)(h)))
    return g, d


@pytest.mark.slow
def test_the_step_is_real_esrgans_update_written_out():
    """One GANStep against Real-ESRGAN's ``optimize_parameters`` written step by step: the
    generator's update on L1 + 0.1 GAN (D frozen), then the discriminator's on its real term
    (the HR as it is) and fake term (the SR made before the generator's update)."""
    rng = np.random.default_rng(3)
    lr = tf.constant(rng.random((2, 8, 8, 3), np.float32))
    target = tf.constant(rng.random((2, 16, 16, 3), np.float32))
    hr = tf.constant(rng.random((2, 16, 16, 3), np.float32))
    loss = Loss({"l1": {}, "gan": {"weight": 0.1}})

    g, d = tiny_models()
    g_opt, d_opt = keras.optimizers.Adam(1e-2), keras.optimizers.Adam(1e-2)
    g_opt.build(g.trainable_variables), d_opt.build(d.trainable_variables)
    counters = tuple(tf.Variable(v, dtype=tf.int64) for v in (0, -1, 0))
    step = GANStep(g, g_opt, loss, tf.distribute.get_strategy(), 2, counters,
                   discriminator=d, d_optimizer=d_opt)  # fmt: skip
    got = step.train_step(SharpenedBatch(lq=lr, gt_usm=target, gt=hr))

    g2, d2 = tiny_models()
    g2_opt, d2_opt = keras.optimizers.Adam(1e-2), keras.optimizers.Adam(1e-2)
    with tf.GradientTape() as tape:  # the generator's step
        sr = g2(lr, training=True)
        l1 = tf.reduce_mean(tf.abs(target - sr))
        g_loss = l1 + 0.1 * tf.reduce_mean(bce_tf(d2(sr, training=True), True))
    g2_opt.apply(tape.gradient(g_loss, g2.trainable_variables), g2.trainable_variables)
    with tf.GradientTape() as tape:  # the discriminator's
        d_loss = tf.reduce_mean(bce_tf(d2(hr, training=True), True)) + tf.reduce_mean(
            bce_tf(d2(tf.stop_gradient(sr), training=True), False)
        )
    d2_opt.apply(tape.gradient(d_loss, d2.trainable_variables), d2.trainable_variables)

    assert float(got) == pytest.approx(float(l1), rel=1e-6)  # the step's loss: the pixel loss
    for a, b in zip(g.weights + d.weights, g2.weights + d2.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.name)
    means = step.window.read_terms()
    assert means["l1"] == pytest.approx(float(l1), rel=1e-6)
    assert means["d_real_loss"] + means["d_fake_loss"] == pytest.approx(float(d_loss), rel=1e-5)
    assert step.window.read_terms() is None  # read resets
    assert step.window.read() == (pytest.approx(float(l1), rel=1e-6), 1, pytest.approx(float(l1)))


def bce_tf(logits, real):
    labels = tf.ones_like(logits) if real else tf.zeros_like(logits)
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)


def test_the_collapse_rule_and_term_window():
    window = LossWindow(terms=gan_terms(Loss({"l1": {}, "perceptual": {}, "gan": {}})))
    window.add(tf.constant(0.1), tf.constant([0.1, 0.0, 5.0, 0.004, 0.003, 6.0, -6.0]))
    window.add(tf.constant(0.3), tf.constant([float("nan")] * 7))  # not averaged in
    part = AdversarialTraining.__new__(AdversarialTraining)
    part.guard_on, part.collapse_loss, part.means = True, 0.05, window.read_terms()
    part.balance = Loss({"gan": {}}).adversarial.balance
    # the guard's loss is its own: the step's finite loss counts though a term was NaN
    assert window.read() == (pytest.approx(0.4), 2, pytest.approx(0.3))
    part.explode_loss, part.d_lr = 100.0, 1e3
    verdict = part.judge(500)
    assert verdict.startswith("discriminator collapse: its mean loss in the window to step 500")
    assert "0.007" in verdict and "D(real) +6.00" in verdict
    assert "discriminator.collapse_loss (now 0.05)" in part.advice(verdict)
    part.means = {"d_real_loss": 0.6, "d_fake_loss": 0.7, "d_real": 0.2, "d_fake": -0.1}
    assert part.judge(750) is None and part.judge(760) is None  # judged once per window
    # the case: discriminator.lr=1e3 drives its loss to about 1e8
    part.means = {"d_real_loss": 1.5e8, "d_fake_loss": 0.0, "d_real": -1.5e8, "d_fake": -1.4e8}
    verdict = part.judge(800)
    assert verdict.startswith("discriminator explosion: its mean loss in the window to step 800")
    assert "1.5e+08, above discriminator.explode_loss=100" in verdict
    advice = part.advice(verdict)
    assert "a lower discriminator.lr (now 1000)" in advice and "explode_loss" in advice
    part.means = {"d_real_loss": float("inf"), "d_fake_loss": 0.7, "d_real": 0.0, "d_fake": 0.0}
    assert part.judge(900).startswith("discriminator explosion")
    assert part.advice("loss spike: ...") is None  # the trainer's train.lr advice


GAN_GROUPS = ("loss=realesrgan", "discriminator=unet_sn")


def test_the_config_refuses_a_half_gan_and_missing_vgg_weights(compose, tmp_path):
    with pytest.raises(ConfigError, match="discriminator=unet_sn trains a GAN and needs a GAN"):
        validate(compose("discriminator=unet_sn"))
    with pytest.raises(ConfigError, match="needs a discriminator: add discriminator=unet_sn"):
        validate(compose("loss=realesrgan"))
    validate(compose("loss=realesrgan", "~loss.terms.gan"))  # L1 + perceptual alone
    missing = tmp_path / "vgg19.h5"
    vgg = f"++loss.terms.perceptual.vgg_weights={missing}"
    with pytest.raises(ConfigError, match=r"perceptual.vgg_weights must be .*imagenet .* no such"):
        validate(compose("loss=realesrgan", "discriminator=unet_sn", vgg))
    with pytest.raises(ConfigError, match="discriminator.features must be an integer >= 1"):
        validate(compose(*GAN_GROUPS, "discriminator.features=0"))


@pytest.mark.slow
def test_the_discriminator_sees_the_hr_as_it_is_beside_the_sharpened_target(compose, folders):
    """``loss.terms.gan.target=gt`` (the paper's): the pairs are (lr, sharpened target, HR), the
    target and the LR as without it."""
    from sr.degradations.realesrgan import RealESRGAN

    common = (f"data.hr_dir={folders / 'train'}", "data.val_dir=null", "data=generator",
              "degradation=realesrgan", "data.channels=rgb")  # fmt: skip
    assert not build_source(compose(*common)).plain_target
    assert build_source(compose(*common, "loss=realesrgan", "discriminator=unet_sn")).plain_target
    usm = "++loss.terms.gan.target=gt_usm"
    assert not build_source(
        compose(*common, "loss=realesrgan", "discriminator=unet_sn", usm)
    ).plain_target
    hr = tf.constant(np.random.default_rng(0).integers(0, 256, (2, 64, 64, 3)) / 255.0, tf.float32)
    seeds = tf.constant([[5, 0], [5, 1]], tf.int64)
    degradation = RealESRGAN(jpeg="tensorflow")
    lr, target = degradation.pair(hr, 4, seeds)
    lr3, target3, plain = degradation.pair(hr, 4, seeds, plain=True)
    np.testing.assert_array_equal(lr, lr3)
    np.testing.assert_array_equal(target, target3)
    np.testing.assert_array_equal(plain, hr)
    assert float(tf.reduce_mean(tf.abs(target - hr))) > 1e-3  # the target is sharpened


# ------------------------------------------------------------------------------------------------
# Tiny runs, in process
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gan_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("gan")
    write_photos(root / "train", size=96, names=("astronaut", "coffee", "rocket"))
    write_photos(root / "val", size=200, names=("chelsea",))  # NIQE needs 96 x 96 blocks
    return root


def tiny(data, tmp_path, *extra) -> list[str]:
    return [
        f"data.hr_dir={data / 'train'}", f"data.val_dir={data / 'val'}", "data=tfrecord",
        f"data.data_root={tmp_path / 'shards'}", "data.num_shards=1", "data.deterministic=true",
        "data.channels=rgb", "data.batch_size=2", "data.patch_size=32", "model.features=[8,4]",
        "train.log_every=2",
        "train.ckpt_every=2", "train.val_every=2", "train.max_to_keep=5", *extra,
    ]  # fmt: skip


GAN = ("loss=realesrgan", "discriminator=unet_sn", "discriminator.features=4",
       "~loss.terms.perceptual", "train.lr=1e-3", "train.lr_schedule=constant")  # fmt: skip


def final_state(run_dir, step, folder=None) -> dict:
    folder = folder or run_dir / "checkpoints"
    reader = tf.train.load_checkpoint(str(folder / f"ckpt-{step}"))
    kinds = reader.get_variable_to_dtype_map()  # the iterator's state is a variant: not read
    return {k: reader.get_tensor(k) for k, kind in kinds.items() if kind != tf.variant}


@pytest.mark.slow
def test_two_stages_the_second_from_the_firsts_weights(gan_data, tmp_path, compose, caplog):
    """Stage one (L1), stage two from its weights (``train.init_from``) on Real-ESRGAN pairs
    with the HR as it is for the discriminator; the GAN run's best checkpoint is chosen by NIQE
    and holds the discriminator and its optimizer. (Without the perceptual term: a GAN run with
    it on a random VGG is tests/test_finetune.py::test_finetune_from_released_layouts_end_to_end,
    its log line tests/test_perceptual.py::test_a_perceptual_run_on_real_esrgan_triples.)"""
    from sr.train.app import run

    caplog.set_level(logging.INFO)
    esrnet = tmp_path / "esrnet"
    cfg = compose(*tiny(gan_data, tmp_path, "train.steps=2", "data.val_dir=null"))
    (esrnet / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, esrnet / ".hydra" / "config.yaml")  # as train.py's Hydra writes it
    run(cfg, esrnet)
    stage2 = compose(*tiny(gan_data, tmp_path, "degradation=realesrgan", "train.steps=2"), *GAN,
                     f"train.init_from={esrnet}")  # fmt: skip
    final = run(stage2, tmp_path / "esrgan")
    assert f"train.init_from={esrnet}: the live weights" in caplog.text
    # the stage's start, the reference of its validation rule: the init_from weights' PSNR
    start = re.search(r"GAN stage: it starts at ([\d.]+) dB on the validation images", caplog.text)
    assert start and "validation of the train.init_from weights step 0" in caplog.text
    assert np.isfinite(final["val/niqe"]) and final["rollbacks"] == 0
    best = tmp_path / "esrgan" / "checkpoints" / "best"
    record = json.loads((best / "best.json").read_text())
    assert record["metric"] == "niqe" and record["weights"] == "live"
    assert record["niqe"] <= final["val/niqe"] + 1e-9
    saved = final_state(best.parent, record["step"], folder=best)
    assert any(k.startswith("discriminator/") for k in saved)
    assert any(k.startswith("d_optimizer/") for k in saved)


@pytest.mark.slow
def test_a_gan_run_resumes_exactly(gan_data, tmp_path, compose):
    """A GAN run stopped after its checkpoint of step 2 and resumed to 4 ends bit-identical to
    the one run to 4: the generator, the discriminator and both optimizers."""
    from sr.train.app import run
    from tests.conftest import stopped_at

    common = (*tiny(gan_data, tmp_path, "data.val_dir=null"), *GAN)
    run(compose(*common, "train.steps=4"), tmp_path / "one")
    two = stopped_at(tmp_path / "one", 2, tmp_path / "two")  # killed after ckpt-2
    run(compose(*common, "train.steps=4", f"resume={two}"), two)
    one, two = final_state(tmp_path / "one", 4), final_state(tmp_path / "two", 4)
    assert one.keys() == two.keys()
    assert sum(k.startswith(("discriminator/", "d_optimizer/")) for k in one) > 10
    for k in one:
        if not any(s in k for s in ("elapsed", "save_counter", "OBJECT_GRAPH")):
            assert np.array_equal(
                one[k], two[k], equal_nan=np.asarray(one[k]).dtype.kind == "f"
            ), k


@pytest.mark.slow
def test_the_guard_of_a_gan_judges_psnr_against_its_start_and_pixel_loss_spikes(
    gan_data, tmp_path, compose, monkeypatch, caplog
):
    """A GAN run's validation PSNR falling by 4 dB from its start (its first validation here:
    no train.init_from) is its trade, not a collapse; a spike of the pixel loss (forced at step
    6) rolls back to ckpt-4 with the discriminator's state; the final validation 10 dB below the
    start is a collapse, and the run ends on step 6's checkpoint."""
    from sr.train import validation
    from sr.train.app import run

    scores = iter([30.0, 28.0, 26.0, 20.0, 27.0])  # steps 2, 4, 6 (replayed), 8, 6 again
    evaluate = validation.evaluate_source

    def falling(*args, **kwargs):
        res = evaluate(*args, **kwargs)
        return {**res, "psnr": next(scores)}

    monkeypatch.setattr(validation, "evaluate_source", falling)
    judge, fired = DivergenceGuard.window, []

    def window(self, at, total, count, peak):
        verdict = judge(self, at, total, count, peak)
        if at == 6 and not fired:
            fired.append(at)
            return "test pixel-loss spike at step 6"
        return verdict

    monkeypatch.setattr(DivergenceGuard, "window", window)
    final = run(compose(*tiny(gan_data, tmp_path), *GAN, "train.steps=8"), tmp_path / "run")
    assert final["rollbacks"] == 2 and final["step"] == 6 and final["val/psnr"] == 27.0
    assert "test pixel-loss spike at step 6. Rollback 1" in caplog.text
    assert "restored checkpoints/ckpt-4 (step 4)" in caplog.text
    assert (
        "validation collapse of the GAN stage: PSNR 20.00 dB at step 8 is more than "
        "train.guard_gan_val_drop=5 dB below the stage's start, 30.00 dB"
    ) in caplog.text
    assert "restored checkpoints/ckpt-6 (step 6)" in caplog.text
    assert caplog.text.count("validation collapse") == 1  # 28 and 26 dB: the GAN's trade


@pytest.mark.slow
def test_a_destroyed_discriminator_rolls_back_then_stops_train_py_with_exit_4(
    gan_data, tmp_path, compose, caplog
):
    """The issue's case as a user runs it: ``train.py`` with ``discriminator.lr=1e3``, whose
    loss leaves its balance (1.39) for millions in the second step. Before, the run ended with
    exit 0 and no word; now the discriminator's explosion rolls back to ckpt-1 and, diverging
    again, stops the run with exit code 4, the advice naming the discriminator's keys. Run in
    this process through train.py's ``train`` (the exit code its ``main`` exits with, and the
    messages it logs); that exit code 4 reaches the shell as the process's: test_distribute.py's
    ``test_a_diverging_resume_on_two_replicas_rolls_back_keeps_best_and_exits_4``."""
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("train_script", ROOT / "train.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    cfg = compose(
        *tiny(gan_data, tmp_path, "data.val_dir=null"), *GAN, "discriminator.lr=1e3",
        "train.steps=4", "train.log_every=1", "train.ckpt_every=1", "train.guard_max_rollbacks=1",
    )  # fmt: skip
    with caplog.at_level(logging.INFO):
        code, final = script.train(cfg, tmp_path / "run")
    log = caplog.text
    assert code == 4 and final == {}, log[-3000:]
    assert "discriminator explosion: its mean loss in the window to step 2" in log
    assert "Rollback 1 of train.guard_max_rollbacks=1: restored checkpoints/ckpt-1" in log
    assert "the run diverged at step 2" in log
    assert "a lower discriminator.lr (now 1000)" in log and "discriminator.explode_loss" in log
