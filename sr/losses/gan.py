"""``loss.terms.gan``: the adversarial term, for the generator and for the discriminator
(``discriminator=unet_sn``), in the formulations of BasicSR's ``GANLoss``
(``basicsr/losses/gan_loss.py``; traiNNer-redux's ``traiNNer/losses/gan_loss.py`` is the same),
on the discriminator's per-pixel logits ``[B, H, W, 1]``, each averaged over the pixels:

- ``vanilla`` (Goodfellow et al. 2014; ESRGAN's and Real-ESRGAN's): binary cross-entropy with
  logits, PyTorch's ``BCEWithLogitsLoss``; generator ``BCE(D(SR), 1)``, discriminator
  ``BCE(D(HR), 1)`` and ``BCE(D(SR), 0)`` (2 ln 2 = 1.39 in all at balance, D = 0);
- ``lsgan`` (Mao et al. 2017): least squares, ``MSELoss``; generator ``(D(SR) - 1)^2``,
  discriminator ``(D(HR) - 1)^2`` and ``D(SR)^2`` (0.5 at balance, D = 0.5);
- ``hinge`` (Lim and Ye 2017; Miyato et al. 2018): generator ``-D(SR)``, discriminator
  ``relu(1 - D(HR))`` and ``relu(1 + D(SR))`` (2 at balance, D = 0).

As in BasicSR, the weight scales the generator's term only; the discriminator's terms are
unweighted. The term's ``target`` is what the discriminator sees as real (Real-ESRGAN's: the HR
as it is, ``gt``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sr.core.schema import bounded
from sr.losses.base import Term, per_example_mean
from sr.losses.registry import TARGETS, TermConfig, TermSpec, register

FORMULATIONS = ("vanilla", "lsgan", "hinge")
BALANCE = {"vanilla": 2 * math.log(2), "lsgan": 0.5, "hinge": 2.0}
"""The discriminator's loss (real + fake terms) when it cannot tell SR from HR."""


@dataclass
class GANConfig(TermConfig):
    """Keys of ``loss.terms.gan`` (defaults: Real-ESRGAN's); needs a discriminator."""

    weight: float = bounded(0.1, minimum=0)  # weight of the generator's GAN term (paper: 0.1)
    # the discriminator's real images: gt, the HR as it is (the paper's), or gt_usm
    target: str = bounded("gt", choices=TARGETS)
    # vanilla (BCE with logits: the paper's), lsgan (least squares) or hinge
    formulation: str = bounded("vanilla", choices=FORMULATIONS)


class GAN(Term):
    """The adversarial term: :meth:`generator` for the generator's loss, :meth:`discriminator`
    for the discriminator's, in :attr:`formulation`. Not a term of ``(hr, sr)``: the GAN step
    (``sr.train.gan.GANStep``) calls them with the discriminator's logits."""

    name = "gan"

    def __init__(self, settings):
        super().__init__(settings)
        self.formulation = settings.formulation
        self.balance = BALANCE[self.formulation]

    def __call__(self, hr, sr):
        raise TypeError(
            "the gan term judges the discriminator's logits: call generator() and "
            "discriminator() (sr.train.gan.GANStep)"
        )

    def generator(self, fake_logits):
        """The generator's term ``[B]`` (unweighted) of the logits ``D(SR)``."""
        import tensorflow as tf

        x = tf.cast(fake_logits, tf.float32)
        if self.formulation == "vanilla":
            return _bce(x, real=True)
        if self.formulation == "lsgan":
            return per_example_mean(tf.square(x - 1.0))
        return -per_example_mean(x)

    def discriminator(self, real_logits, fake_logits):
        """The discriminator's terms ``([B], [B])``: on ``D(real)`` and on ``D(SR)``."""
        import tensorflow as tf

        real = tf.cast(real_logits, tf.float32)
        fake = tf.cast(fake_logits, tf.float32)
        if self.formulation == "vanilla":
            return _bce(real, True), _bce(fake, False)
        if self.formulation == "lsgan":
            return per_example_mean(tf.square(real - 1.0)), per_example_mean(tf.square(fake))
        return per_example_mean(tf.nn.relu(1.0 - real)), per_example_mean(tf.nn.relu(1.0 + fake))


def _bce(logits, real: bool):
    """Per-example binary cross-entropy of per-pixel logits against real (1) or fake (0),
    averaged over the pixels: ``[B]`` float32 (PyTorch's ``BCEWithLogitsLoss``)."""
    import tensorflow as tf

    labels = tf.ones_like(logits) if real else tf.zeros_like(logits)
    return per_example_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))


SPEC = register(TermSpec("gan", GANConfig, GAN, kind="adversarial"))
