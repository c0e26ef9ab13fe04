"""What every loss term is: a weight, the image it compares with, and per-example values.

A term maps ``(hr, sr)``, float32 ``[B, H, W, C]`` in [0, 1], to per-example values ``[B]``
(the mean over each example's pixels or features); the training step averages them over the
global batch (``tf.nn.compute_average_loss``), so each term is the batch mean at any replica
count, as PyTorch's ``reduction="mean"``. TensorFlow is imported when a term computes, not when
its module is imported (the config reads the schemas without it).
"""

from __future__ import annotations

import dataclasses


def per_example_mean(x):
    """Per-example mean over every axis but the first: ``[B, ...]`` to ``[B]`` float32."""
    import tensorflow as tf

    return tf.reduce_mean(tf.reshape(x, [tf.shape(x)[0], -1]), axis=1)


class Term:
    """A loss term built from its settings (an instance of its schema,
    :class:`sr.losses.registry.TermConfig`).

    Attributes:
        name: its registered name (``loss.terms.<name>``).
        settings: its schema instance.
        weight: its weight in the generator's loss.
        usm: it compares with the pairs' (sharpened) target, ``target: gt_usm``; False: the HR
            as it is (``target: gt``), as ``sr.core.batch.SharpenedBatch.target`` takes it.
    """

    name = ""

    def __init__(self, settings):
        self.settings = settings
        self.weight = float(settings.weight)
        self.usm = settings.target == "gt_usm"

    def build(self) -> None:
        """Build what the term needs before any step (a network's weights); nothing here."""

    def __call__(self, hr, sr):
        """Per-example values ``[B]`` float32 of ``sr`` against ``hr``."""
        raise NotImplementedError

    def describe(self) -> str:
        """``charbonnier(weight=1, target=gt_usm, eps=0.001)`` (the log, TensorBoard HParams)."""
        args = ", ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in dataclasses.asdict(self.settings).items()
        )
        return f"{self.name}({args})"


class PixelTerm(Term):
    """A per-pixel penalty of the error ``hr - sr``, averaged over each example's pixels.
    Subclasses define :meth:`penalty`."""

    def penalty(self, error):
        """The penalty of each pixel's error (same shape)."""
        raise NotImplementedError

    def __call__(self, hr, sr):
        import tensorflow as tf

        return tf.reduce_mean(self.penalty(hr - sr), axis=[1, 2, 3])
