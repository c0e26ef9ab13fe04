"""What a degradation is to the rest of the project: :class:`Degradation`, the protocol that every
option of the ``degradation`` group implements (``sr.degradations.bicubic.Bicubic``,
``sr.degradations.realesrgan.RealESRGAN``), read by the data sources (``sr.data``), validation
(``sr.train.validation``) and ``scripts/evaluate.py --degradation``. No TensorFlow here.

A class implements it by having every member of :data:`MEMBERS` (it need not subclass it:
``isinstance(obj, Degradation)`` checks their presence); ``tests/test_degradation_protocol.py``
checks that each registered degradation has every one, with the protocol's arguments.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

DEVICES = ("input", "accelerator")
"""Where a degradation's LR is made: in the tf.data pipeline, or in the training step."""


@runtime_checkable
class Degradation(Protocol):
    """A way of making a training pair's LR from its HR (the ``degradation`` group).

    Attributes:
        name: the option's name (``degradation=<name>``), for logs and messages; never compared.
        needs_rgb: the LR is made from the RGB HR, so a source keeps three channels whatever
            ``data.channels`` says (colour noise, JPEG chroma).
        protocol_lr: the LR is the evaluation protocol's own operator (MATLAB bicubic,
            ``sr.core.degrade.make_lr``): the data sources then make Y pairs (and take pre-made
            LR, ``data.lr_dir``) themselves, and validation scores the protocol's LR. False: the
            pairs are :meth:`pair`'s, from RGB crops, and validation uses a fixed set of
            :meth:`lr_image`.
        device: ``input`` (the pairs are made in the tf.data pipeline) or ``accelerator`` (in
            the training step, on the model's device: ``sr.data.source.PatchSource.device_stage``).
        gt_usm: the target is the HR sharpened by unsharp masking (``sr.degradations.usm``), so
            a batch can also give the HR as it is (``SharpenedBatch``).
        pool_size: pairs in the training-pair pool (``sr.data.pair_pool``); 0: none.
    """

    name: str
    needs_rgb: bool
    protocol_lr: bool

    @property
    def device(self) -> str: ...

    @property
    def gt_usm(self) -> bool: ...

    @property
    def pool_size(self) -> int: ...

    def identity(self) -> dict:
        """What its LR is a function of besides the seed (JSON-able), saved with a run's stream so
        that a resume under other settings starts a new stream."""
        ...

    def crop_margin(self, scale: int) -> int:
        """HR pixels degraded around each training patch and cut away after (a multiple of
        ``scale``)."""
        ...

    def least_crop(self, scale: int) -> int:
        """The smallest HR crop side (pixels, margin included) it can degrade at ``scale``."""
        ...

    def pair(self, hr: Any, scale: int, seeds: Any, plain: bool = False) -> tuple:
        """A training pair of a batch: float32 ``hr [B, H, W, 3]`` in [0, 1] and int64 seeds
        ``[B, 2]`` to ``(lr [B, H / s, W / s, 3], target [B, H, W, 3])`` in [0, 1] on the 8-bit
        grid (TensorFlow ops, stateless: a function of the seeds), with ``plain`` also the HR as
        it is, third."""
        ...

    def lr_image(self, hr: Any, scale: int, seed: int = 0, index: int = 0) -> Any:
        """The LR of a whole image for a fixed test set: uint8 ``[H, W, 3]`` (H, W multiples of
        ``scale``) to uint8 ``[H / s, W / s, 3]``, a function of ``(seed, index)`` alone."""
        ...


MEMBERS = (
    "name",
    "needs_rgb",
    "protocol_lr",
    "device",
    "gt_usm",
    "pool_size",
    "identity",
    "crop_margin",
    "least_crop",
    "pair",
    "lr_image",
)
"""Every member of :class:`Degradation`, in the order its docstring gives them."""
