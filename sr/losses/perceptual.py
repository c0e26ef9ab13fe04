"""``loss.terms.perceptual``: the VGG19 perceptual loss of ESRGAN and Real-ESRGAN (BasicSR's
``PerceptualLoss(criterion="l1")``, ``basicsr/losses/basic_loss.py``):
``sum_k w_k mean|phi_k(SR) - phi_k(HR)|`` over the pre-ReLU features phi_k of conv1_2, conv2_2,
conv3_4, conv4_4 and conv5_4 (``sr.models.vgg``). The VGG's input is RGB (a Y image is repeated
into three channels), normalised as its weights were trained: ImageNet's mean and standard
deviation for torchvision's (BasicSR's ``VGGFeatureExtractor``), Caffe's BGR mean x255 for
Keras's. The VGG runs in float32; the HR's features carry no gradient.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sr.core.errors import ConfigError
from sr.core.schema import bounded
from sr.losses.base import Term, per_example_mean
from sr.losses.registry import TermConfig, TermSpec, register
from sr.models.gan_schemas import LAYERS, TORCHVISION_FILE, TORCHVISION_URL, WEIGHTS_FILE

log = logging.getLogger(__name__)

LAYER_WEIGHTS = [0.1, 0.1, 1.0, 1.0, 1.0]  # of LAYERS (Real-ESRGAN's)


def _vgg_weights(value) -> str | None:
    """Why ``value`` is not a VGG19 weights choice: ``imagenet``, ``random`` or an existing
    file (checked here, before any work; its content is checked when the VGG is built)."""
    if value in ("imagenet", "random") or Path(str(value)).expanduser().is_file():
        return None
    return (
        f"must be the path of torchvision's VGG19 ({TORCHVISION_FILE} or a .safetensors of it, "
        f"from {TORCHVISION_URL}: the paper's), imagenet (Keras's VGG19 weights, fetched once "
        f"and cached: not the paper's), random (smoke tests only) or the path of a local copy "
        f"of {WEIGHTS_FILE}; no such file"
    )


@dataclass
class PerceptualConfig(TermConfig):
    """Keys of ``loss.terms.perceptual`` (defaults: Real-ESRGAN's)."""

    # VGG19's weights: a path of torchvision's vgg19-dcbb9e9d.pth or .safetensors (the paper's,
    # BasicSR's normalisation), imagenet (Keras's Caffe weights, fetched: not the paper's),
    # random (smoke tests) or a path of Keras's .h5
    vgg_weights: str = bounded("imagenet", check=_vgg_weights)
    # the weights of the features of conv1_2, conv2_2, conv3_4, conv4_4, conv5_4 (pre-ReLU)
    layer_weights: list[float] = bounded(LAYER_WEIGHTS, minimum=0, length=len(LAYERS))


class Perceptual(Term):
    """The perceptual term: per-example ``sum_k layer_weights[k] mean|phi_k(sr) - phi_k(hr)|``
    ``[B]``; :meth:`build` makes the VGG19 before any step."""

    name = "perceptual"

    def __init__(self, settings):
        super().__init__(settings)
        self.vgg_weights = str(settings.vgg_weights)
        self.layer_weights = tuple(float(w) for w in settings.layer_weights)
        self.vgg = None

    def build(self) -> None:
        """Build the VGG19 (once): a missing or unreachable weights file is an error here,
        before any step.

        Raises:
            ConfigError: the weights file is missing, unreadable or not VGG19's, or
                ``imagenet`` cannot be fetched; names the file and where to get it.
        """
        if self.vgg is not None:
            return
        from sr.core.weightfiles import WeightFileError, is_weight_file
        from sr.models.state_dicts.base import StateDictError
        from sr.models.state_dicts.vgg19 import load_features
        from sr.models.vgg import build_vgg_features

        if is_weight_file(self.vgg_weights):
            try:
                self.vgg, found = load_features(self.vgg_weights)
            except (WeightFileError, StateDictError) as e:
                raise ConfigError(
                    f"loss.terms.perceptual.vgg_weights: {e} (torchvision's VGG19: "
                    f"{TORCHVISION_URL})"
                ) from e
            log.info(
                "perceptual loss: torchvision's VGG19 from %s, BasicSR's normalisation%s",
                self.vgg_weights, "".join(f"; {n}" for n in found.notes),
            )  # fmt: skip
            return
        if self.vgg_weights == "random":
            log.warning(
                "loss.terms.perceptual.vgg_weights=random: the perceptual term uses a VGG19 with "
                "random weights, for smoke tests only; use torchvision's VGG19 (%s)",
                TORCHVISION_URL,
            )  # fmt: skip
        else:
            log.warning(
                "loss.terms.perceptual.vgg_weights=%s: Keras's VGG19 (Caffe's weights and "
                "normalisation), not the paper's perceptual loss; for it give torchvision's "
                "VGG19 (%s)", self.vgg_weights, TORCHVISION_URL,
            )  # fmt: skip
        self.vgg = build_vgg_features(self.vgg_weights)

    def __call__(self, hr, sr):
        """``[B]`` float32 for ``hr``, ``sr`` float32 ``[B, H, W, C]`` in [0, 1] (C = 1 or 3).

        Raises:
            RuntimeError: :meth:`build` was not called.
        """
        import tensorflow as tf

        if self.vgg is None:
            raise RuntimeError("the perceptual term's VGG19 is not built: call build() first")

        def rgb(x):
            x = tf.cast(x, tf.float32)
            return tf.tile(x, [1, 1, 1, 3]) if x.shape[-1] == 1 else x

        batch = tf.concat([rgb(sr), tf.stop_gradient(rgb(hr))], axis=0)  # one VGG pass
        features = self.vgg(batch, training=False)
        total = 0.0
        for name, weight in zip(LAYERS, self.layer_weights):
            if weight:
                f_sr, f_hr = tf.split(tf.cast(features[name], tf.float32), 2, axis=0)
                total += weight * per_example_mean(tf.abs(f_sr - tf.stop_gradient(f_hr)))
        return total + tf.zeros([tf.shape(sr)[0]], tf.float32)


SPEC = register(TermSpec("perceptual", PerceptualConfig, Perceptual, kind="feature"))
