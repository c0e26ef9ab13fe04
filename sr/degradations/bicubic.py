"""``degradation=bicubic``, the default: the LR is the SR literature's MATLAB-equivalent
antialiased bicubic downscale (``sr.core.degrade.make_lr``), rounded to 8 bits."""

from __future__ import annotations

import numpy as np

from sr.core.degrade import make_lr


class Bicubic:
    """``degradation=bicubic`` (the default): the LR is :func:`make_lr`, MATLAB-equivalent
    antialiased bicubic rounded to 8 bits, the operator of the SR literature (SRCNN to SwinIR).
    Takes no keys; the object only names the choice for the data sources and evaluation."""

    name = "bicubic"
    needs_rgb = False  # made from whatever channels the pairs have (Y, or R, G and B)

    def identity(self) -> dict:
        """What the LR is a function of: the operator's name."""
        return {"name": self.name}

    def lr_image(self, hr: np.ndarray, scale: int, seed: int = 0, index: int = 0) -> np.ndarray:
        """The 8-bit LR of a whole image, ``make_lr`` of it (``seed`` and ``index`` unused: the
        operator is deterministic).

        Args:
            hr: uint8 ``[H, W, C]``, H and W multiples of ``scale``.

        Returns:
            uint8 ``[H / s, W / s, C]``.
        """
        return np.asarray(make_lr(np.asarray(hr), scale)).astype(np.uint8)
