"""``loss.terms.l2``: mean squared error on [0, 1] pixels (SRCNN's, ESPCN's loss; BasicSR's
``MSELoss``)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.losses.base import PixelTerm
from sr.losses.registry import TermConfig, TermSpec, register


@dataclass
class L2Config(TermConfig):
    """Keys of ``loss.terms.l2``: its weight and target only."""


class L2(PixelTerm):
    """``(hr - sr)^2``, averaged over each example's pixels: ``[B]``."""

    name = "l2"

    def penalty(self, error):
        import tensorflow as tf

        return tf.square(error)


SPEC = register(TermSpec("l2", L2Config, L2, kind="pixel"))
