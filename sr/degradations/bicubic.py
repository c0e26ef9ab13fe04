"""``degradation=bicubic``, the default: the LR is the SR literature's MATLAB-equivalent
antialiased bicubic downscale (``sr.core.degrade.make_lr``), rounded to 8 bits. Declares the
degradation (:data:`SPEC`) without importing TensorFlow; the operator is imported on first use."""

from __future__ import annotations

import numpy as np

from sr.degradations.registry import DegradationConfig, DegradationSpec, register

SPEC = register(
    DegradationSpec(
        "bicubic",
        "sr.degradations.Bicubic",
        DegradationConfig,
        protocol_lr=True,  # the protocol's own operator: sources make its pairs themselves
        legacy_targets=("sr.degradations.bicubic.Bicubic",),
    )
)


class Bicubic:
    """``degradation=bicubic`` (the default): the LR is :func:`sr.core.degrade.make_lr`,
    MATLAB-equivalent antialiased bicubic rounded to 8 bits, the operator of the SR literature
    (SRCNN to SwinIR) and of the evaluation protocol (:attr:`protocol_lr`: the data sources make
    its pairs themselves, from Y or RGB crops with the operator's margin). Takes no keys.
    Implements :class:`sr.degradations.protocol.Degradation`."""

    name = "bicubic"
    needs_rgb = False  # made from whatever channels the pairs have (Y, or R, G and B)
    protocol_lr = SPEC.protocol_lr  # True: the sources make its pairs themselves
    device = "input"  # made in the input pipeline
    gt_usm = False  # the target is the HR as it is
    pool_size = 0  # no training-pair pool

    def identity(self) -> dict:
        """What the LR is a function of: the operator's name."""
        return {"name": self.name}

    def crop_margin(self, scale: int) -> int:
        """The operator's reach, ``sr.core.degrade.crop_margin`` (2 x scale HR pixels)."""
        from sr.core.degrade import crop_margin

        return crop_margin(scale)

    def least_crop(self, scale: int) -> int:
        """Any crop: 0 (the sources' own minimum sizes apply)."""
        return 0

    def pair(self, hr, scale: int, seeds, plain: bool = False) -> tuple:
        """The bicubic pair of a batch, as :class:`sr.degradations.protocol.Degradation` gives
        it: the LR of each channel of the whole crop (its border mirrored, as MATLAB does for a
        whole image), on the 8-bit grid; the target is the HR (``seeds`` unused: the operator is
        deterministic). The data sources do not call it: with :attr:`protocol_lr` they cut the
        LR of a crop's interior with its margin (``sr.data.pairs``).

        Args:
            hr: float32 ``[B, H, W, C]`` in [0, 1] on the 8-bit grid, H and W multiples of s.

        Returns:
            ``(lr, hr)`` (``(lr, hr, hr)`` with ``plain``): float32 ``[B, H / s, W / s, C]``
            and ``[B, H, W, C]`` in [0, 1].
        """
        import tensorflow as tf

        from sr.core.degrade import make_lr

        hr = tf.convert_to_tensor(hr, tf.float32)
        lr = make_lr(hr * 255.0, scale) / 255.0
        return (lr, hr, hr) if plain else (lr, hr)

    def lr_image(self, hr: np.ndarray, scale: int, seed: int = 0, index: int = 0) -> np.ndarray:
        """The 8-bit LR of a whole image, ``make_lr`` of it (``seed`` and ``index`` unused: the
        operator is deterministic).

        Args:
            hr: uint8 ``[H, W, C]``, H and W multiples of ``scale``.

        Returns:
            uint8 ``[H / s, W / s, C]``.
        """
        from sr.core.degrade import make_lr

        return np.asarray(make_lr(np.asarray(hr), scale)).astype(np.uint8)
