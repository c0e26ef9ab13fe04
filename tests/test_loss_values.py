"""``loss=realesrgan`` and the pixel presets give the numbers of the code before the loss terms
(issue 44): the values saved by ``python -m tests.fixtures.losses.make_loss_values`` at commit
2dd1cd6 (``tests/fixtures/losses/values.npz``) against the terms composed from today's presets,
on the same inputs, the same random VGG19 and the same tiny models."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from sr.core.batch import SharpenedBatch
from sr.losses import Loss
from sr.train.gan import GANStep
from sr.train.step import TrainStep
from tests.fixtures.losses.make_loss_values import OUT, random_vgg, tiny_models

SAVED = dict(np.load(OUT))


def preset(compose, name: str, *overrides: str) -> Loss:
    loss = Loss(compose(f"loss={name}", *overrides).loss.terms)
    if "perceptual" in loss.names:
        perceptual = loss.terms[loss.names.index("perceptual")]
        perceptual.vgg = random_vgg()
    return loss


@pytest.mark.parametrize("name", ["l1", "l2", "charbonnier"])
def test_the_pixel_presets_give_the_saved_values(compose, name):
    (term,) = preset(compose, name).terms
    np.testing.assert_array_equal(term(SAVED["hr"], SAVED["sr"]).numpy(), SAVED[f"pixel_{name}"])


def test_realesrgans_terms_give_the_saved_values(compose):
    loss = preset(compose, "realesrgan")
    assert loss.names == ("l1", "perceptual", "gan")
    assert [t.weight for t in loss.terms] == [1.0, 1.0, 0.1]  # the paper's
    assert [t.usm for t in loss.terms] == [True, True, False]  # gt_usm, gt_usm, the HR as it is
    l1, perceptual, gan = loss.terms
    hr, sr = SAVED["hr"], SAVED["sr"]
    np.testing.assert_array_equal(l1(hr, sr).numpy(), SAVED["realesrgan_l1"])
    np.testing.assert_allclose(perceptual(hr, sr).numpy(), SAVED["realesrgan_perceptual"], 1e-6)
    np.testing.assert_array_equal(gan.generator(SAVED["fake_logits"]), SAVED["realesrgan_gan"])
    d_real, d_fake = gan.discriminator(SAVED["real_logits"], SAVED["fake_logits"])
    np.testing.assert_array_equal(d_real.numpy(), SAVED["realesrgan_d_real"])
    np.testing.assert_array_equal(d_fake.numpy(), SAVED["realesrgan_d_fake"])


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["gan_step", "perceptual_step"])
def test_one_step_of_realesrgan_records_the_saved_terms(compose, stage):
    """One GAN step (``loss=realesrgan``) and one L1 + perceptual step (``~loss.terms.gan``)
    from the saved tiny models: the step's loss and every recorded term within 1e-6."""
    loss = preset(compose, "realesrgan", *(() if stage == "gan_step" else ("~loss.terms.gan",)))
    batch = SharpenedBatch(
        lq=tf.constant(SAVED["lq"]),
        gt_usm=tf.constant(SAVED["gt_usm"]),
        gt=tf.constant(SAVED["hr"]),
    )
    g, d = tiny_models()
    g_opt = keras.optimizers.Adam(1e-3)
    g_opt.build(g.trainable_variables)
    counters = tuple(tf.Variable(v, dtype=tf.int64) for v in (0, -1, 0))
    extra = {}
    if stage == "gan_step":
        d_opt = keras.optimizers.Adam(1e-3)
        d_opt.build(d.trainable_variables)
        extra = {"discriminator": d, "d_optimizer": d_opt}
    cls = GANStep if stage == "gan_step" else TrainStep
    step = cls(g, g_opt, loss, tf.distribute.get_strategy(), 2, counters, **extra)
    got = step.train_step(batch).numpy()
    terms = step.window.read_terms()
    assert tuple(step.window.terms) == tuple(SAVED[f"{stage}_names"])
    np.testing.assert_allclose(got, SAVED[f"{stage}_loss"], rtol=1e-6)
    want = SAVED[f"{stage}_terms"]
    np.testing.assert_allclose([terms[k] for k in step.window.terms], want, rtol=1e-6)
