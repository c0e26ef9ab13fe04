"""Real-ESRGAN's generator and discriminator losses (``loss=realesrgan``): L1, the VGG19
perceptual loss and the vanilla GAN loss, each term on its own target as the official code
(``realesrgan/models/realesrgan_model.py``, ``optimize_parameters``; BasicSR's ``L1Loss``,
``PerceptualLoss`` and ``GANLoss``). The training step that uses them is
:class:`sr.train.gan.GANStep`.

Every term maps images to per-example values ``[B]`` (the mean over each example's pixels or
features), which the step averages over the global batch (``tf.nn.compute_average_loss``), so
that each term is the batch mean at any replica count, as PyTorch's ``reduction="mean"``.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from sr.core.errors import ConfigError
from sr.core.weightfiles import WeightFileError, is_weight_file
from sr.models.state_dicts.base import StateDictError
from sr.models.state_dicts.vgg19 import load_features
from sr.models.vgg import LAYERS, TORCHVISION_URL, build_vgg_features
from sr.train.losses import Loss

log = logging.getLogger(__name__)


def _mean(x: tf.Tensor) -> tf.Tensor:
    """Per-example mean over every axis but the first: ``[B, ...]`` to ``[B]``."""
    return tf.reduce_mean(tf.reshape(x, [tf.shape(x)[0], -1]), axis=1)


def sigmoid_cross_entropy(logits: tf.Tensor, real: bool) -> tf.Tensor:
    """Per-example binary cross-entropy of per-pixel logits ``[B, H, W, 1]`` against the label
    real (1) or fake (0), averaged over the pixels: ``[B]`` float32. PyTorch's
    ``BCEWithLogitsLoss`` (the vanilla GAN loss of Goodfellow et al. 2014, as BasicSR's
    ``GANLoss(gan_type="vanilla")``)."""
    logits = tf.cast(logits, tf.float32)
    labels = tf.ones_like(logits) if real else tf.zeros_like(logits)
    return _mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))


class RealESRGANLoss(Loss):
    """The weighted terms of Real-ESRGAN's second stage (defaults: the paper's).

    Args:
        l1_weight: weight of the L1 term (mean absolute error on [0, 1] pixels).
        perceptual_weight: weight of the perceptual term (0: no VGG is built).
        vgg_weights: the path of torchvision's VGG19 (``vgg19-dcbb9e9d.pth`` or a
            ``.safetensors`` of it: the paper's, with BasicSR's normalisation;
            ``sr.models.state_dicts.vgg19``), ``imagenet`` (Keras's Caffe weights: not the
            paper's), the path of a local copy of Keras's (``.h5``), or ``random`` (smoke
            tests only: a warning) (``sr.models.vgg``).
        vgg_layer_weights: the weights of the pre-ReLU features of conv1_2, conv2_2, conv3_4,
            conv4_4 and conv5_4 (0.1, 0.1, 1, 1, 1).
        gan_weight: weight of the generator's GAN term.
        l1_gt_usm, percep_gt_usm, gan_gt_usm: each term's target is the sharpened HR (true) or
            the HR as it is (false); they differ only with ``degradation.gt_usm``.

    The perceptual term is BasicSR's ``PerceptualLoss(criterion="l1")``:
    ``sum_k w_k mean|phi_k(SR) - phi_k(HR)|`` over the features phi_k; the VGG's input is RGB
    (a Y image is repeated into three channels), normalised as its weights were trained:
    ImageNet's mean and standard deviation for torchvision's (BasicSR's
    ``VGGFeatureExtractor``), Caffe's BGR mean x255 for Keras's. The VGG runs in float32.
    """

    name = "realesrgan"

    def __init__(
        self,
        l1_weight: float = 1.0,
        perceptual_weight: float = 1.0,
        vgg_weights: str = "imagenet",
        vgg_layer_weights=(0.1, 0.1, 1.0, 1.0, 1.0),
        gan_weight: float = 0.1,
        l1_gt_usm: bool = True,
        percep_gt_usm: bool = True,
        gan_gt_usm: bool = False,
    ):
        self.l1_weight, self.perceptual_weight = float(l1_weight), float(perceptual_weight)
        self.vgg_weights, self.gan_weight = str(vgg_weights), float(gan_weight)
        self.vgg_layer_weights = tuple(float(w) for w in vgg_layer_weights)
        if len(self.vgg_layer_weights) != len(LAYERS):
            raise ValueError(
                f"loss.vgg_layer_weights needs {len(LAYERS)} weights ({', '.join(LAYERS)}), "
                f"got {list(vgg_layer_weights)}"
            )
        self.l1_gt_usm, self.percep_gt_usm = bool(l1_gt_usm), bool(percep_gt_usm)
        self.gan_gt_usm = bool(gan_gt_usm)
        self.vgg = None

    def build(self) -> None:
        """Build the VGG19 of the perceptual term (with ``perceptual_weight > 0``), before any
        step: a missing or unreachable weights file is an error then.

        Raises:
            ConfigError: the weights file is missing, unreadable or not VGG19's, or
                ``imagenet`` cannot be fetched; names the file and where to get it.
        """
        if self.perceptual_weight <= 0 or self.vgg is not None:
            return
        if is_weight_file(self.vgg_weights):
            try:
                self.vgg, found = load_features(self.vgg_weights)
            except (WeightFileError, StateDictError) as e:
                raise ConfigError(
                    f"loss.vgg_weights: {e} (torchvision's VGG19: {TORCHVISION_URL})"
                ) from e
            log.info(
                "perceptual loss: torchvision's VGG19 from %s, BasicSR's normalisation%s",
                self.vgg_weights, "".join(f"; {n}" for n in found.notes),
            )  # fmt: skip
            return
        if self.vgg_weights == "random":
            log.warning(
                "loss.vgg_weights=random: the perceptual term uses a VGG19 with random "
                "weights, for smoke tests only; use torchvision's VGG19 (%s)", TORCHVISION_URL
            )  # fmt: skip
        else:
            log.warning(
                "loss.vgg_weights=%s: Keras's VGG19 (Caffe's weights and normalisation), not "
                "the paper's perceptual loss; for it give torchvision's VGG19 (%s)",
                self.vgg_weights, TORCHVISION_URL,
            )  # fmt: skip
        self.vgg = build_vgg_features(self.vgg_weights)

    def __call__(self, hr, sr):
        """Not a pixel loss: its terms take their own targets and a VGG, which the steps of
        :mod:`sr.train.perceptual` and :mod:`sr.train.gan` call (:meth:`l1`,
        :meth:`perceptual`, ...). Raises TypeError, so that a step that would train its L1 term
        alone cannot be given it (:func:`sr.train.parts.training_part` chooses the step)."""
        raise TypeError(
            "RealESRGANLoss is not a pixel loss: train it with the part that "
            "sr.train.parts.training_part chooses (PerceptualTraining or AdversarialTraining)"
        )

    def l1(self, hr: tf.Tensor, sr: tf.Tensor) -> tf.Tensor:
        """Unweighted per-example mean absolute error of ``sr`` against ``hr`` (float32
        ``[B, H, W, C]`` in [0, 1]): ``[B]``."""
        return _mean(tf.abs(tf.cast(hr, tf.float32) - tf.cast(sr, tf.float32)))

    def perceptual(self, hr: tf.Tensor, sr: tf.Tensor) -> tf.Tensor:
        """Unweighted-by-``perceptual_weight`` perceptual term ``[B]``:
        ``sum_k vgg_layer_weights[k] * mean|phi_k(sr) - phi_k(hr)|``; the HR's features carry
        no gradient. Zeros without a VGG (``perceptual_weight=0``)."""
        if self.vgg is None:
            return tf.zeros([tf.shape(sr)[0]], tf.float32)

        def rgb(x):
            x = tf.cast(x, tf.float32)
            return tf.tile(x, [1, 1, 1, 3]) if x.shape[-1] == 1 else x

        batch = tf.concat([rgb(sr), tf.stop_gradient(rgb(hr))], axis=0)  # one VGG pass
        features = self.vgg(batch, training=False)
        total = 0.0
        for name, weight in zip(LAYERS, self.vgg_layer_weights):
            if weight:
                f_sr, f_hr = tf.split(tf.cast(features[name], tf.float32), 2, axis=0)
                total += weight * _mean(tf.abs(f_sr - tf.stop_gradient(f_hr)))
        return total + tf.zeros([tf.shape(sr)[0]], tf.float32)

    def generator_gan(self, fake_logits: tf.Tensor) -> tf.Tensor:
        """The generator's GAN term ``[B]`` (unweighted): its SR judged real,
        ``BCE(D(SR), 1)``."""
        return sigmoid_cross_entropy(fake_logits, real=True)

    def discriminator(self, real_logits, fake_logits) -> tuple[tf.Tensor, tf.Tensor]:
        """The discriminator's terms ``([B], [B])``: ``BCE(D(HR), 1)`` and ``BCE(D(SR), 0)``
        (not weighted: BasicSR's ``GANLoss`` weighs only the generator's term)."""
        return sigmoid_cross_entropy(real_logits, True), sigmoid_cross_entropy(fake_logits, False)

    def describe(self) -> str:
        """``realesrgan(l1=1, perceptual=1 (imagenet), gan=0.1, ...)`` (TensorBoard HParams)."""
        return (
            f"realesrgan(l1={self.l1_weight:g}, perceptual={self.perceptual_weight:g} "
            f"({self.vgg_weights}; {', '.join(f'{w:g}' for w in self.vgg_layer_weights)}), "
            f"gan={self.gan_weight:g}, gt_usm l1/percep/gan={self.l1_gt_usm}/"
            f"{self.percep_gt_usm}/{self.gan_gt_usm})"
        )
