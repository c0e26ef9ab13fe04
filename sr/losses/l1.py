"""``loss.terms.l1``: mean absolute error on [0, 1] pixels (EDSR, Lim et al. 2017; Real-ESRGAN's
pixel term; BasicSR's ``L1Loss``)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.losses.base import PixelTerm
from sr.losses.registry import TermConfig, TermSpec, register


@dataclass
class L1Config(TermConfig):
    """Keys of ``loss.terms.l1``: its weight and target only."""


class L1(PixelTerm):
    """``|hr - sr|``, averaged over each example's pixels: ``[B]``."""

    name = "l1"

    def penalty(self, error):
        import tensorflow as tf

        return tf.abs(error)


SPEC = register(TermSpec("l1", L1Config, L1, kind="pixel"))
