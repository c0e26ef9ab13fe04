"""Validation during training: the source's validation data scored by the literature's protocol
(:mod:`sr.evaluation`). The one place that pairs a data source with its evaluation, so that the
data layer never imports the evaluation layer."""

from __future__ import annotations

from sr.data.sequence import SequenceSource
from sr.data.source import PatchSource
from sr.evaluation import evaluate_images, evaluate_sequences


def evaluate_source(source: PatchSource, model, keep: int = 0) -> dict:
    """Score ``model`` on ``source``'s validation data: its validation sequences
    (:func:`sr.evaluation.evaluate_sequences`, windows as the source's) for ``data=sequence``,
    else its validation images (:func:`sr.evaluation.evaluate_images`); see those for the
    result's keys (PSNR in dB and SSIM on the Y channel, ``scale`` pixels of border cropped).

    Args:
        source: a prepared data source.
        model: the Keras model being trained.
        keep: keep the arrays of the first ``keep`` images for TensorBoard panels.
    """
    if isinstance(source, SequenceSource):
        return evaluate_sequences(
            model,
            source.val_sequences,
            source.scale,
            source.frames,
            source.frame_stride,
            source.target,
            keep=keep,
            folder=source.val_dir,
        )
    return evaluate_images(model, source.val_files, source.scale, keep=keep)
