"""The training batch, by name: what the data layer builds (``sr.data.pairs``, the pair pool, a
source's device stage) and the trainer's steps read (``sr.train.step``, ``gan``, ``perceptual``).

Two named tuples, with the names of BasicSR's Real-ESRGAN models (``lq``, ``gt``, ``gt_usm``:
``basicsr/models/realesrnet_model.py`` and ``realesrgan_model.py``, ``feed_data`` and
``optimize_parameters``):

- :class:`Batch` ``(lq, gt)``: the LQ input and its one target. With Real-ESRGAN's sharpened
  target (``degradation.gt_usm``) and every term on it, ``gt`` is the sharpened HR, as
  ``RealESRNetModel.feed_data`` sharpens its ``gt`` in place.
- :class:`SharpenedBatch` ``(lq, gt_usm, gt)``: the sharpened target and the HR as it is, when a
  term of ``loss=realesrgan`` takes the latter (``loss.*_gt_usm=false``: the GAN term's real
  images in the official options), as ``RealESRGANModel`` keeps both.

Both are tuples, so that ``tf.data``, ``tf.distribute`` and ``tf.function`` carry them as a nest
(flattened in field order) and callers that index ``[0]`` (LQ) and ``[1]`` (the target) keep
working; the field order is the element order of the pair pool's slots (``sr.data.pair_pool``,
saved in checkpoints). A step reads fields by name, and refuses any other structure
(:func:`check_batch`), so a loss that wants another image is a new field, not a longer tuple.
This module imports no TensorFlow.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Batch(NamedTuple):
    """A training batch of LQ inputs and their target.

    Attributes:
        lq: float32 ``[B, h, w, C]`` in [0, 1] (``data=sequence``: ``[B, k, h, w, C]``, k
            frames), C = 1 (Y) or 3 (RGB); on the 8-bit grid except the unrounded Y of an RGB LR.
        gt: float32 ``[B, s h, s w, C]`` in [0, 1] on the 8-bit grid, s the scale: the HR target
            of every loss term (sharpened with ``degradation.gt_usm``).
    """

    lq: Any
    gt: Any

    def target(self, usm: bool) -> Any:
        """The target of a term (``usm``: its ``loss.*_gt_usm`` key): :attr:`gt` either way."""
        return self.gt


class SharpenedBatch(NamedTuple):
    """A training batch with Real-ESRGAN's sharpened target and the HR as it is.

    Attributes:
        lq: as :attr:`Batch.lq`, made from ``gt_usm``.
        gt_usm: float32 ``[B, s h, s w, C]`` in [0, 1] on the 8-bit grid: the HR sharpened by
            unsharp masking (``sr.degradations.usm``, ``degradation.gt_usm``).
        gt: the same shape: the HR as it is.
    """

    lq: Any
    gt_usm: Any
    gt: Any

    def target(self, usm: bool) -> Any:
        """The target of a term: :attr:`gt_usm` where its ``loss.*_gt_usm`` key is true, else
        :attr:`gt` (``RealESRGANModel.optimize_parameters``)."""
        return self.gt_usm if usm else self.gt


BATCHES = (Batch, SharpenedBatch)
"""The structures a training step takes."""


def check_batch(batch) -> None:
    """Refuse anything but a :data:`BATCHES` structure (a plain tuple: fields by position).

    Raises:
        TypeError: naming the type given and the fix.
    """
    if not isinstance(batch, BATCHES):
        raise TypeError(
            f"a training step takes sr.core.batch.Batch(lq=, gt=) or SharpenedBatch(lq=, "
            f"gt_usm=, gt=), not {type(batch).__name__}: build it with the field names"
        )
