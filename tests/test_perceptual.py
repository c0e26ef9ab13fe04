"""L1 + perceptual training without a discriminator (``loss=realesrgan discriminator=none
loss.gan_weight=0``): the way of training is chosen from the loss and the discriminator
together, and its step is the hand-written update of both terms, each on its own target, on
``Batch`` pairs and on ``SharpenedBatch`` triples (``sr.core.batch``)."""

from __future__ import annotations

import logging
from inspect import signature

import keras
import numpy as np
import pytest
import tensorflow as tf
from hydra.utils import instantiate

from sr.config import ConfigError, build_source
from sr.core.batch import Batch, SharpenedBatch
from sr.train.best import NIQE, PSNR
from sr.train.gan import AdversarialTraining
from sr.train.gan_loss import RealESRGANLoss
from sr.train.parts import TrainingPart, training_part
from sr.train.perceptual import PerceptualStep, PerceptualTraining
from sr.train.step import PixelTraining, StepArgs
from tests.test_gan import fake_vgg, tiny_models

PHIS = {  # fake_vgg's five maps, in TensorFlow ops
    "conv1_2": lambda x: x * 2.0,
    "conv2_2": lambda x: tf.nn.avg_pool2d(x, 2, 2, "VALID"),
    "conv3_4": lambda x: x[..., :1] - x[..., 2:],
    "conv4_4": lambda x: tf.nn.avg_pool2d(x, 4, 4, "VALID") * 3.0,
    "conv5_4": lambda x: x[..., 1:2],
}
LAYER_WEIGHTS = (0.1, 0.1, 1.0, 1.0, 1.0)


def part_for(compose, *overrides):
    cfg = compose(*overrides)
    loss = instantiate(cfg.loss)
    if isinstance(loss, RealESRGANLoss) and loss.perceptual_weight > 0:
        loss.vgg = fake_vgg()  # built: part.build() keeps it
    return training_part(cfg, loss, 3, False, tf.Variable(1.0)), loss


def test_the_way_of_training_is_chosen_from_the_loss_and_the_discriminator(compose):
    assert isinstance(part_for(compose)[0], PixelTraining)
    assert isinstance(part_for(compose, "loss=l2")[0], PixelTraining)
    part, _ = part_for(compose, "loss=realesrgan", "loss.gan_weight=0")
    assert isinstance(part, PerceptualTraining)
    assert (part.best, part.psnr_reference) == (NIQE, "start")
    part, _ = part_for(compose, "loss=realesrgan", "loss.gan_weight=0", "loss.perceptual_weight=0")
    assert (part.best, part.psnr_reference) == (PSNR, "best")  # L1 alone: the pixel rules
    gan, _ = part_for(compose, "loss=realesrgan", "discriminator=unet_sn",
                      "discriminator.features=2", "loss.perceptual_weight=0")  # fmt: skip
    assert isinstance(gan, AdversarialTraining)
    with pytest.raises(ConfigError, match="discriminator=unet_sn needs loss=realesrgan"):
        part_for(compose, "discriminator=unet_sn")
    cfg = compose("loss=realesrgan", "loss.gan_weight=0")
    with pytest.raises(ConfigError, match="loss.gan_weight=0.1 needs a discriminator"):
        training_part(cfg, RealESRGANLoss(perceptual_weight=0), 3, False, tf.Variable(1.0))


def test_the_gan_loss_is_not_a_pixel_loss():
    """Called as a :class:`sr.train.losses.Loss` it refuses, rather than train L1 alone."""
    x = tf.zeros((1, 4, 4, 3))
    with pytest.raises(TypeError, match="not a pixel loss"):
        RealESRGANLoss(perceptual_weight=0)(x, x)


@pytest.mark.parametrize("triple", [False, True], ids=["pairs", "triples"])
def test_l1_and_perceptual_without_a_discriminator_train_both_terms(compose, triple):
    """One step against the update written out: SGD on ``L1(target, SR) + 1.0 x
    sum_k w_k mean|phi_k(SR) - phi_k(t)|``, where t is the sharpened target for pairs and the
    HR as it is for triples with ``loss.percep_gt_usm=false``. Before the fix the trainer took
    the pixel step: a TypeError on triples, L1 alone on pairs."""
    rng = np.random.default_rng(4)
    lr = tf.constant(rng.random((2, 8, 8, 3), np.float32))
    target = tf.constant(rng.random((2, 16, 16, 3), np.float32))
    hr = tf.constant(rng.random((2, 16, 16, 3), np.float32))
    extra = ("loss.percep_gt_usm=false",) if triple else ()
    part, loss = part_for(compose, "loss=realesrgan", "loss.gan_weight=0", *extra)
    g, _ = tiny_models()
    opt = keras.optimizers.SGD(1.0)  # the update is the gradient (Adam's first: its sign)
    opt.build(g.trainable_variables)
    counters = tuple(tf.Variable(v, dtype=tf.int64) for v in (0, -1, 0))
    step = part.make_step(StepArgs(
        model=g, optimizer=opt, loss=loss, strategy=tf.distribute.get_strategy(),
        global_batch=2, counters=counters,
    ))  # fmt: skip
    assert isinstance(step, PerceptualStep)
    batch = SharpenedBatch(lq=lr, gt_usm=target, gt=hr) if triple else Batch(lq=lr, gt=target)
    got = step.train_step(batch)

    g2, _ = tiny_models()
    g3, _ = tiny_models()  # the bug's update: L1 alone
    opt2, opt3 = keras.optimizers.SGD(1.0), keras.optimizers.SGD(1.0)
    percep_target = hr if triple else target
    with tf.GradientTape() as tape:
        sr = g2(lr, training=True)
        l1 = tf.reduce_mean(tf.abs(target - sr))
        percep = sum(
            w * tf.reduce_mean(tf.abs(PHIS[k](sr) - PHIS[k](percep_target)))
            for k, w in zip(PHIS, LAYER_WEIGHTS)
        )
        total = l1 + 1.0 * percep
    opt2.apply(tape.gradient(total, g2.trainable_variables), g2.trainable_variables)
    with tf.GradientTape() as tape:
        l1_only = tf.reduce_mean(tf.abs(target - g3(lr, training=True)))
    opt3.apply(tape.gradient(l1_only, g3.trainable_variables), g3.trainable_variables)

    assert float(got) == pytest.approx(float(total), rel=1e-5)  # the step's loss: the sum
    for a, b in zip(g.weights, g2.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.name)
    assert max(np.abs(a.numpy() - c.numpy()).max() for a, c in zip(g.weights, g3.weights)) > 1e-3
    means = step.window.read_terms()
    assert means["l1"] == pytest.approx(float(l1), rel=1e-5)
    assert means["perceptual"] == pytest.approx(float(percep), rel=1e-5)


def test_without_a_discriminator_the_gan_terms_target_asks_for_no_hr(compose, folders):
    """``loss.gan_gt_usm=false`` (the default) asks for the HR as it is for the discriminator
    only: without one, the pairs stay ``(lr, target)`` unless the L1 or perceptual term asks."""
    common = (f"data.hr_dir={folders / 'train'}", "data.val_dir=null", "data=generator",
              "degradation=realesrgan", "data.channels=rgb", "loss=realesrgan",
              "loss.gan_weight=0")  # fmt: skip
    assert not build_source(compose(*common)).plain_target
    assert build_source(compose(*common, "loss.percep_gt_usm=false")).plain_target
    assert build_source(compose(*common, "discriminator=unet_sn")).plain_target


@pytest.mark.slow
def test_a_perceptual_run_on_real_esrgan_triples(tmp_path, compose, caplog):
    """The issue's command, in process: ``loss=realesrgan discriminator=none
    loss.gan_weight=0`` on Real-ESRGAN pairs with the HR as it is for the perceptual term (a
    TypeError at the first step before the fix) trains both terms and logs them."""
    from sr.train.app import run
    from tests.conftest import write_photos

    write_photos(tmp_path / "train", size=96, names=("astronaut", "coffee"))
    caplog.set_level(logging.INFO)
    cfg = compose(
        f"data.hr_dir={tmp_path / 'train'}", "data.val_dir=null", "data=generator",
        "data.channels=rgb", "data.batch_size=2", "data.patch_size=32", "model.features=[8,4]",
        "degradation=realesrgan", "loss=realesrgan", "loss.gan_weight=0",
        "loss.percep_gt_usm=false", "loss.vgg_weights=random", "train.steps=2",
        "train.log_every=1", "train.ckpt_every=2",
    )  # fmt: skip
    final = run(cfg, tmp_path / "run")
    assert final["step"] == 2
    assert "L1 + perceptual training without a discriminator" in caplog.text
    terms = [r.getMessage() for r in caplog.records if r.getMessage().startswith("terms: l1")]
    assert len(terms) == 2 and all(float(t.split()[-1]) > 0 for t in terms), terms


def test_every_way_of_training_implements_the_part_protocol(compose):
    """Each part the trainer can compose has every member of ``TrainingPart`` (a part that
    lacks one fails here, not at the first validation of a run)."""
    want = signature(TrainingPart.make_step).parameters
    members = [m for m in TrainingPart.__annotations__] + [
        name for name, v in vars(TrainingPart).items() if callable(v) and not name.startswith("_")
    ]
    for overrides in (
        (),
        ("loss=realesrgan", "loss.gan_weight=0"),
        ("loss=realesrgan", "discriminator=unet_sn", "discriminator.features=2",
         "loss.perceptual_weight=0"),
    ):  # fmt: skip
        part, _ = part_for(compose, *overrides)
        missing = [m for m in members if not hasattr(part, m)]
        assert not missing, f"{type(part).__name__} lacks {missing}"
        assert isinstance(part, TrainingPart)
        assert part.psnr_reference in ("best", "start")
        # make_step: the Protocol's one argument, in every part
        assert signature(type(part).make_step).parameters == want
    with pytest.raises(TypeError, match="unexpected keyword argument 'modle'"):
        StepArgs(modle=None)  # a misspelled argument fails when the arguments are made
    with pytest.raises(TypeError, match="positional"):
        StepArgs(None)
    with pytest.raises(TypeError, match="missing"):
        StepArgs(model=None)  # so does a missing one
