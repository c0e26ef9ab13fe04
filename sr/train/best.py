"""Which validation score chooses ``checkpoints/best``, and in which direction: a ``(monitor,
mode)`` pair as Keras's and Lightning's ``ModelCheckpoint(monitor=..., mode=...)``, in one
place. A way of training (``sr.train.parts``) names its rule (``part.best``); the trainer and
``sr.train.rollback`` read the monitored score from the validation results and compare by the
mode, never by the metric's name."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BestRule:
    """``monitor``: the validation score (``psnr`` in dB, ``niqe``); ``mode``: ``max`` (higher
    is better) or ``min``."""

    monitor: str
    mode: str

    def __post_init__(self):
        if self.mode not in ("max", "min"):
            raise ValueError(f"a best rule's mode is max or min, got {self.mode!r}")

    def score(self, value: float) -> float:
        """``value`` as a score where higher is better (NaN stays NaN: never better)."""
        return value if self.mode == "max" else -value

    @property
    def worst(self) -> float:
        """The score below every value: no best yet."""
        return -math.inf


PSNR = BestRule("psnr", "max")  # the pixel losses: the highest validation PSNR
NIQE = BestRule("niqe", "min")  # a GAN or a perceptual term: the lowest NIQE of the SR
