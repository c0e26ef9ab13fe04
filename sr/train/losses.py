"""The training losses, on pixels in [0, 1]: one class each, chosen by the ``loss`` config group
(``conf/loss/<name>.yaml``, whose ``_target_`` names the class; its schema is in
:mod:`sr.config`). Adding a loss is one class here and one YAML there.

A loss maps ``(hr, sr)``, float32 ``[B, H, W, C]``, to per-example losses ``[B]`` (the mean over
the pixels of each example); the training step averages them over the global batch
(``tf.nn.compute_average_loss``), so the loss is the batch mean at any replica count.
"""

from __future__ import annotations

import tensorflow as tf


class Loss:
    """A per-pixel penalty of the error ``sr - hr``, averaged over each example's pixels.

    Subclasses define :meth:`penalty` and :attr:`name` (their ``conf/loss`` option)."""

    name = ""

    def penalty(self, error: tf.Tensor) -> tf.Tensor:
        """The penalty of each pixel's error (same shape)."""
        raise NotImplementedError

    def __call__(self, hr: tf.Tensor, sr: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(self.penalty(hr - sr), axis=[1, 2, 3])

    def describe(self) -> str:
        """``charbonnier(eps=0.001)``: the option and its arguments (TensorBoard HParams)."""
        args = ", ".join(f"{k}={v}" for k, v in vars(self).items())
        return f"{self.name}({args})" if args else self.name


class L1(Loss):
    """Mean absolute error (EDSR, Lim et al. 2017): the default."""

    name = "l1"

    def penalty(self, error):
        return tf.abs(error)


class L2(Loss):
    """Mean squared error (SRCNN, ESPCN)."""

    name = "l2"

    def penalty(self, error):
        return tf.square(error)


class Charbonnier(Loss):
    """Charbonnier, a differentiable L1: ``sqrt(error^2 + eps^2)`` (LapSRN, Lai et al. 2017,
    eps = 1e-3; BasicSR's ``CharbonnierLoss``), mean over the pixels.

    Args:
        eps: the smoothing, in units of [0, 1] pixels (> 0).
    """

    name = "charbonnier"

    def __init__(self, eps: float = 1e-3):
        self.eps = float(eps)

    def penalty(self, error):
        return tf.sqrt(tf.square(error) + self.eps**2)
