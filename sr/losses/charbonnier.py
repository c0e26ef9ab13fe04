"""``loss.terms.charbonnier``: ``sqrt(error^2 + eps^2)``, a differentiable L1 (LapSRN, Lai et al.
2017, eps = 1e-3; BasicSR's ``CharbonnierLoss``), averaged over the pixels."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.losses.base import PixelTerm
from sr.losses.registry import TermConfig, TermSpec, register


@dataclass
class CharbonnierConfig(TermConfig):
    """Keys of ``loss.terms.charbonnier``."""

    eps: float = bounded(1e-3, minimum=0, above=True)  # the smoothing, on [0, 1] pixels (> 0)


class Charbonnier(PixelTerm):
    """``sqrt((hr - sr)^2 + eps^2)``, averaged over each example's pixels: ``[B]``."""

    name = "charbonnier"

    def __init__(self, settings):
        super().__init__(settings)
        self.eps = float(settings.eps)

    def penalty(self, error):
        import tensorflow as tf

        return tf.sqrt(tf.square(error) + self.eps**2)


SPEC = register(TermSpec("charbonnier", CharbonnierConfig, Charbonnier, kind="pixel"))
