"""Validation during training: the source's validation data scored by the literature's protocol
(:mod:`sr.evaluation`), logged to the console and TensorBoard, for the trained weights and, with
``train.ema``, the averaged ones. The one place that pairs a data source with its evaluation, so
that the data layer never imports the evaluation layer."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from sr.core.images import ImageFolderError
from sr.data.sequence import SequenceSource
from sr.data.source import PatchSource
from sr.evaluation import METRICS, NIQE_METRICS, evaluate_images, evaluate_sequences
from sr.results import degraded_lr

log = logging.getLogger(__name__)


class ValidationError(ImageFolderError):
    """A validation image failed mid-run (after the step's checkpoint was saved)."""


VAL_SEED = 0  # the seed of the degraded validation LR: the same images in every run


def degraded_val_lr(source: PatchSource) -> list[np.ndarray] | None:
    """The validation LR images of a source whose degradation is not bicubic: image i of
    ``val_dir`` (name order) degraded with ``(VAL_SEED, i)``, exactly as ``scripts/evaluate.py
    --degradation --save-lr`` makes a fixed set (``sr.results.degraded_lr``); None for bicubic
    (the protocol makes the LR). A model trained on degraded LR is validated (and its best
    checkpoint chosen) on the kind of LR it is trained for, the same fixed set in every run."""
    degradation = source.degradation
    if degradation.protocol_lr:
        return None
    return [
        degraded_lr(degradation, path, source.scale, VAL_SEED, i)
        for i, path in enumerate(source.val_files)
    ]


def evaluate_source(
    source: PatchSource, model, keep: int = 0, lr_images=None, with_niqe: bool = False
) -> dict:
    """Score ``model`` on ``source``'s validation data: its validation sequences
    (:func:`sr.evaluation.evaluate_sequences`, windows as the source's) for ``data=sequence``,
    else its validation images (:func:`sr.evaluation.evaluate_images`); see those for the
    result's keys (PSNR in dB and SSIM on the Y channel, ``scale`` pixels of border cropped).

    Args:
        source: a prepared data source.
        model: the Keras model being trained.
        keep: keep the arrays of the first ``keep`` images for TensorBoard panels.
        lr_images: the given LR of each validation image (:func:`degraded_val_lr`), or None for
            the protocol's bicubic LR.
        with_niqe: add NIQE of the SR and of bicubic (``niqe``, ``niqe_bicubic``; images only).
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
    return evaluate_images(
        model, source.val_files, source.scale, keep=keep, lr_files=lr_images, with_niqe=with_niqe
    )


def side_by_side(*images: np.ndarray) -> np.ndarray:
    """``[1, H, k W, 1]`` float32 in [0, 1] from k ``[H, W]`` images on the [0, 255] scale."""
    row = np.concatenate([np.clip(im, 0, 255) / 255.0 for im in images], axis=1)
    return row[np.newaxis, :, :, np.newaxis].astype(np.float32)


class Validator:
    """Scores a model during training and logs the scores (``validator(step)``).

    Args:
        source: the prepared data source (its validation data).
        model: the model being trained.
        optimizer: its optimizer; with ``averaged`` it puts the averages into the model
            (``finalize_variable_values``).
        averaged: ``train.ema`` is on: the averaged weights are scored too.
        writer: the TensorBoard writer.
        keep: ``train.val_images``, the panels shown in TensorBoard.
        with_niqe: score NIQE too (the GAN stage's rule of ``checkpoints/best``).
    """

    def __init__(self, source, model, optimizer, averaged, writer, keep, with_niqe=False):
        self.source, self.model, self.optimizer = source, model, optimizer
        self.averaged, self.writer, self.keep = averaged, writer, keep
        self.metrics = (*METRICS, *NIQE_METRICS) if with_niqe else METRICS
        self.lr_images = None if isinstance(source, SequenceSource) else degraded_val_lr(source)
        if self.lr_images is not None:
            log.info(
                "validation LR: %s of data.val_dir, seed %d (the LR the model trains on)",
                source.degradation.name,
                VAL_SEED,
            )

    def __call__(self, step: int) -> dict:
        """PSNR/SSIM on Y of ``data.val_dir`` (paper protocol) with the bicubic baseline, logged
        to the console and TensorBoard (scalars and bicubic | SR | HR panels). With
        ``train.ema`` the averaged weights are scored too (``val_ema/`` scalars and panels,
        ``ema_`` keys of the result): they are put into the model for the evaluation and the
        trained weights put back after it, whatever happens."""
        res = self.evaluate(step, "val", "")
        if self.averaged:
            trained = [keras.ops.convert_to_numpy(v) for v in self.model.trainable_variables]
            self.optimizer.finalize_variable_values(self.model.trainable_variables)
            try:
                averaged = self.evaluate(step, "val_ema", " of the averaged weights (train.ema)")
            finally:
                for variable, value in zip(self.model.trainable_variables, trained):
                    variable.assign(value)
            res.update({f"ema_{key}": averaged[key] for key in self.metrics})
        return res

    def evaluate(self, step: int, tag: str, what: str) -> dict:
        """Score the model's current weights on the validation images; log under ``tag/``."""
        t0 = time.perf_counter()
        with_niqe = len(self.metrics) > len(METRICS)
        res = evaluate_source(
            self.source, self.model, self.keep, lr_images=self.lr_images, with_niqe=with_niqe
        )
        with self.writer.as_default(step=step):
            for key in self.metrics:
                tf.summary.scalar(f"{tag}/{key}", res[key])
            for name, bicubic, sr, hr in res["panels"]:
                tf.summary.image(
                    f"{tag}/{Path(name).stem} (bicubic | SR | HR)", side_by_side(bicubic, sr, hr)
                )
        log.info(
            "validation%s step %d on %d images: PSNR %.2f dB (bicubic %.2f dB), SSIM %.4f "
            "(bicubic %.4f) [%.1f s]",
            what,
            step,
            res["n"],
            res["psnr"],
            res["psnr_bicubic"],
            res["ssim"],
            res["ssim_bicubic"],
            time.perf_counter() - t0,
        )
        if with_niqe:
            log.info("validation%s step %d: NIQE %.3f (bicubic %.3f; lower is better)", what,
                     step, res["niqe"], res["niqe_bicubic"])  # fmt: skip
        return res
