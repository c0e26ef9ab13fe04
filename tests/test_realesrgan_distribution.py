"""The batched graph (``sr.degradations.realesrgan``) against the per-image NumPy/OpenCV reference
(``tests/oracles/realesrgan.py``): the same distribution of degraded LR, so that the two
cannot drift apart again; and the batched draws against one image at a time, where the paper
draws per image.

Statistics of each LR crop: its PSNR against the crop's clean LR (4 x 4 area average), the log
of its high-frequency energy (mean squared Laplacian) and the JPEG blockiness (mean step across
8-pixel block edges over the mean step elsewhere). Means are compared within their standard
errors; the graph's from batch means (its images share per-batch draws), the reference's from
its independent images."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import tensorflow as tf

import sr.degradations.realesrgan as R
from tests.conftest import shared_folder
from tests.oracles import realesrgan as ref

N, B, CROP, S = 384, 8, 112, 4
Z = 3.5  # standard errors of the difference allowed (fixed seeds: the result is fixed too)


def stats(lr: np.ndarray, hr: np.ndarray) -> np.ndarray:
    """``[PSNR vs clean LR (dB), log10 HF energy, blockiness]`` of one float LR crop."""
    clean = cv2.resize(hr.astype(np.float32) / 255, lr.shape[1::-1], interpolation=cv2.INTER_AREA)
    psnr = 10 * np.log10(1 / max(np.mean((lr - clean) ** 2), 1e-12))
    energy = np.log10(np.mean(cv2.Laplacian(lr, cv2.CV_32F) ** 2) + 1e-9)
    steps = np.abs(np.diff(lr, axis=1)).mean(axis=(0, 2))  # per column boundary
    edges = np.arange(steps.size) % 8 == 7
    return np.array([psnr, energy, steps[edges].mean() / (steps[~edges].mean() + 1e-9)])


@pytest.fixture(scope="module")
def crops():
    return ref.random_crops(shared_folder("hr_sample"), CROP, N, seed=0)


@pytest.fixture(scope="module")
def reference(crops):
    return np.array([
        stats(ref.degrade_uint8(c, S, (0, i)).astype(np.float32) / 255, c)
        for i, c in enumerate(crops)
    ])  # fmt: skip


# one trace for every batch size (the graph takes its batch size from the tensor, not the trace)
degrade = tf.function(
    lambda hr, seeds: R.degrade_batch(hr, S, seeds),
    input_signature=[
        tf.TensorSpec([None, CROP, CROP, 3], tf.float32),
        tf.TensorSpec([None, 2], tf.int64),
    ],
)


def graph_stats(crops, batch: int) -> np.ndarray:
    """``[N / batch, batch, 3]`` statistics of the graph's LR, batch by batch."""
    out = []
    for b in range(len(crops) // batch):
        part = crops[b * batch : (b + 1) * batch]
        seeds = R.image_seed(0, tf.range(b * batch, (b + 1) * batch, dtype=tf.int64))
        lr = degrade(tf.constant(part, tf.float32) / 255, seeds).numpy()
        out.append([stats(x, c) for x, c in zip(lr, part)])
    return np.array(out)


def z_scores(batches: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Difference of the means over its standard error, per statistic: ``batches`` ``[n, b, 3]``
    (standard error from the n batch means), ``other`` ``[m, 3]`` independent or ``[k, c, 3]``
    batches too."""

    def mean_se(x):
        means = x.reshape(x.shape[0], -1, 3).mean(1)
        return means.mean(0), means.std(0, ddof=1) / np.sqrt(len(means))

    (m1, s1), (m2, s2) = mean_se(batches), mean_se(other if other.ndim == 3 else other[:, None])
    return (m1 - m2) / np.hypot(s1, s2)


@pytest.fixture(scope="module")
def graph(crops):
    """``[N / B, B, 3]``: the graph's statistics in batches of ``B``."""
    return graph_stats(crops, B)


@pytest.mark.slow
def test_the_graph_draws_the_references_distribution(graph, reference):
    z = z_scores(graph, reference)
    assert np.all(np.abs(z) < Z), f"z = {z} (PSNR, HF energy, blockiness)"
    # the spread too: the sd of each statistic within 15 %
    sd_graph, sd_ref = graph.reshape(-1, 3).std(0), reference.std(0)
    assert np.all(np.abs(sd_graph / sd_ref - 1) < 0.15), (sd_graph, sd_ref)
    # and the figures are those of a real degradation: well below the clean LR
    assert 20 < reference[:, 0].mean() < 30


@pytest.mark.slow
def test_batched_draws_give_each_image_the_distribution_of_one_image_alone(crops, graph):
    """Per-batch draws (resize, noise kind, order) correlate a batch's images but leave each
    image's distribution that of an image degraded alone (batch 1: every draw its own)."""
    # 64 alone against the N crops in batches of B (48 batch means): the standard errors of the
    # difference are those of 128 alone against 128 in batches of 16 or smaller
    alone = graph_stats(crops[:64], 1)  # [64, 1, 3]
    batched = graph  # [N / B, B, 3]
    z = z_scores(batched, alone[:, 0])
    assert np.all(np.abs(z) < Z), f"z = {z}"
