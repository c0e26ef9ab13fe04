"""Training on several loss terms without a discriminator (``loss=realesrgan ~loss.terms.gan``:
L1 + perceptual; ``loss=charbonnier +loss.terms.fft.weight=0.05``): the way of training is
chosen from what is configured (a GAN term with a discriminator: the adversarial part), and the
step is the hand-written update of the weighted terms, each on its own target, on ``Batch``
pairs and on ``SharpenedBatch`` triples (``sr.core.batch``)."""

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
from sr.losses import Loss
from sr.train.best import NIQE, PSNR
from sr.train.gan import AdversarialTraining
from sr.train.parts import GeneratorTraining, TrainingPart, training_part
from sr.train.step import StepArgs, TrainStep
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
    for term in loss.terms:
        if term.name == "perceptual":
            term.vgg = fake_vgg()  # built: the part's build() keeps it
    return training_part(cfg, loss, 3, False, tf.Variable(1.0)), loss


@pytest.mark.slow
def test_the_way_of_training_is_chosen_from_the_loss_and_the_discriminator(compose):
    assert isinstance(part_for(compose)[0], GeneratorTraining)
    assert part_for(compose)[0].terms == ()  # one term: the loss alone, as before the terms
    assert isinstance(part_for(compose, "loss=l2")[0], GeneratorTraining)
    part, _ = part_for(compose, "loss=realesrgan", "~loss.terms.gan")
    assert isinstance(part, GeneratorTraining) and part.terms == ("l1", "perceptual")
    assert (part.best, part.psnr_reference) == (NIQE, "start")
    part, _ = part_for(compose, "loss=realesrgan", "~loss.terms.gan", "~loss.terms.perceptual")
    assert (part.best, part.psnr_reference) == (PSNR, "best")  # L1 alone: the pixel rules
    gan, _ = part_for(compose, "loss=realesrgan", "discriminator=unet_sn",
                      "discriminator.features=2", "~loss.terms.perceptual")  # fmt: skip
    assert isinstance(gan, AdversarialTraining)
    with pytest.raises(ConfigError, match="discriminator=unet_sn trains a GAN and needs a GAN"):
        part_for(compose, "discriminator=unet_sn")  # the one rule, sr.config.check_adversary
    cfg = compose("loss=realesrgan", "~loss.terms.gan")
    with pytest.raises(ConfigError, match="loss.terms.gan is a GAN term and needs a discrimin"):
        training_part(cfg, Loss({"l1": {}, "gan": {}}), 3, False, tf.Variable(1.0))


def test_the_gan_term_is_not_a_term_of_images():
    """Called as a term of ``(hr, sr)`` it refuses: it judges the discriminator's logits."""
    x = tf.zeros((1, 4, 4, 3))
    with pytest.raises(TypeError, match="judges the discriminator's logits"):
        Loss({"gan": {}}).adversarial(x, x)


@pytest.mark.slow
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
    extra = ("++loss.terms.perceptual.target=gt",) if triple else ()
    part, loss = part_for(compose, "loss=realesrgan", "~loss.terms.gan", *extra)
    g, _ = tiny_models()
    opt = keras.optimizers.SGD(1.0)  # the update is the gradient (Adam's first: its sign)
    opt.build(g.trainable_variables)
    counters = tuple(tf.Variable(v, dtype=tf.int64) for v in (0, -1, 0))
    step = part.make_step(StepArgs(
        model=g, optimizer=opt, loss=loss, strategy=tf.distribute.get_strategy(),
        global_batch=2, counters=counters,
    ))  # fmt: skip
    assert type(step) is TrainStep
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
    """``loss.terms.gan.target=gt`` (the default) asks for the HR as it is for the
    discriminator: without the GAN term, the pairs stay ``(lr, target)`` unless the L1 or
    perceptual term asks."""
    common = (f"data.hr_dir={folders / 'train'}", "data.val_dir=null", "data=generator",
              "degradation=realesrgan", "data.channels=rgb", "loss=realesrgan",
              "~loss.terms.gan")  # fmt: skip
    assert not build_source(compose(*common)).plain_target
    assert build_source(compose(*common, "++loss.terms.perceptual.target=gt")).plain_target
    gan = compose(*common[:-1], "discriminator=unet_sn")
    assert build_source(gan).plain_target


@pytest.mark.slow
def test_a_perceptual_run_on_real_esrgan_triples(tmp_path, compose, caplog):
    """The issue's command, in process: ``loss=realesrgan ~loss.terms.gan`` on Real-ESRGAN
    pairs with the HR as it is for the perceptual term (a
    TypeError at the first step before the fix) trains both terms and logs them; the perceptual
    term on a VGG19 of random weights (``vgg_weights=random``) says so."""
    from sr.train.app import run
    from tests.conftest import write_photos

    write_photos(tmp_path / "train", size=96, names=("astronaut", "coffee"))
    caplog.set_level(logging.INFO)
    cfg = compose(
        f"data.hr_dir={tmp_path / 'train'}", "data.val_dir=null", "data=generator",
        "data.channels=rgb", "data.batch_size=2", "data.patch_size=32", "model.features=[8,4]",
        "degradation=realesrgan", "loss=realesrgan", "~loss.terms.gan",
        "++loss.terms.perceptual.target=gt", "++loss.terms.perceptual.vgg_weights=random",
        "train.steps=2", "train.log_every=1", "train.ckpt_every=2",
    )  # fmt: skip
    final = run(cfg, tmp_path / "run")
    assert final["step"] == 2
    assert "training on the loss terms l1(weight=1" in caplog.text
    assert "perceptual term uses a VGG19 with random weights" in caplog.text
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
        ("loss=realesrgan", "~loss.terms.gan"),
        ("loss=realesrgan", "discriminator=unet_sn", "discriminator.features=2",
         "~loss.terms.perceptual"),
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
