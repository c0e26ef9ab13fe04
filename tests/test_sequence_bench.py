"""Sequence-mode benchmark helpers (``sr.bench.sequences``): the order-bias measure of
``benchmarks/shuffle_report.py --only sequence`` and the naive pipeline of ``scripts/bench_data.py
--sequence``, on a tiny folder of sorted sequences cut from real photos."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from sr.bench.folders import compose_data
from sr.bench.sequences import (
    measure_sequence_shuffle,
    naive_sequence,
    null_spread,
    window_paths,
)
from sr.config import build_source
from sr.core.images import load_y
from tests.conftest import photo

RGB_PHOTOS = ("astronaut", "coffee", "rocket", "chelsea", "immunohistochemistry")


def write_sorted_sequences(root: Path, sequences=6, frames=12, size=128) -> Path:
    """``seq_<q>/frame_<t>.png``: sequence q pans 1 px down and 2 px right a frame across a real
    RGB photo (sequences and frames named in sorted order)."""
    for q in range(sequences):
        im = photo(RGB_PHOTOS[q % len(RGB_PHOTOS)])
        y0, x0 = 7 * q, 11 * q
        for t in range(frames):
            path = root / f"seq_{q:02d}" / f"frame_{t:03d}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            crop = im[y0 + t : y0 + t + size, x0 + 2 * t : x0 + 2 * t + size]
            Image.fromarray(crop).save(path)
    return root


@pytest.fixture(scope="module")
def seq_dir(tmp_path_factory) -> Path:
    return write_sorted_sequences(tmp_path_factory.mktemp("sequences"))


# 6 sequences x 12 frames, k = 3: 60 windows. Pool of 84 // 3 - 4 = 24 windows, 2 crops each:
# the pool turns over (not every window fits). The spread of rho over 3840 draws without bias is
# at most about sqrt((1 + 2 x 36/59) / 3840) = 0.024 (sr.bench.sequences.null_spread; measured
# 0.005 over seeds 0-11, lower because 3840 draws run through the window permutation 32 times),
# so the bound 0.12 is 5 of the estimate and 24 of the measure: safe. The reference cuts 64 crops
# from each window, so 3840 draws are its first epoch, read in sorted order through a 100-sample
# buffer: rho 0.94 (0.936-0.950 over seeds 0-11).
OVERRIDES = (
    "data.batch_size=16",
    "data.patch_size=32",
    "data.patches_per_window=2",
    "data.pool_frames=84",
)
DRAWS, BOUND = 3840, 0.12


@pytest.mark.slow
def test_project_loader_has_no_order_bias_and_sorted_reference_has(seq_dir):
    res = measure_sequence_shuffle(seq_dir, DRAWS, per_window=64, buffer=100, overrides=OVERRIDES)
    assert (res["n_sequences"], res["n_windows"], res["batch_size"]) == (6, 60, 16)
    assert res["pool"]["windows"] == 24 and not res["pool"]["keep_all"]
    assert res["pool"]["peak_frames"] <= res["pool"]["pool_frames"]
    assert res["null_sd"] == pytest.approx(null_spread(DRAWS, 2, 24, 60)) and res["null_sd"] < 0.03
    project, sorted_ref, shuffled = res["pipelines"].values()
    for s in (project, shuffled):
        assert s["draws"] == DRAWS
        assert abs(s["rho_window"]) <= BOUND
        assert abs(s["rho_sequence"]) <= BOUND
        assert abs(s["rho_frame"]) <= BOUND
        assert s["windows_seen"] == 60
        assert s["distinct_mean"] >= 0.9 * s["distinct_ideal"]  # ideal 5.85 of 6
    assert sorted_ref["rho_window"] > 0.9
    assert sorted_ref["rho_sequence"] > 0.9
    assert sorted_ref["distinct_mean"] < 2.5  # a batch comes from 1-2 neighbouring sequences
    draws = res["draws"]["project data=sequence"]
    assert draws.shape == (DRAWS,) and draws.min() >= 0 and draws.max() < 60


@pytest.mark.slow
def test_naive_pipeline_yields_the_project_loaders_shapes_and_dtypes(seq_dir):
    source = build_source(
        compose_data("sequence", seq_dir, None, "data.batch_size=4", "data.patch_size=32")
    )
    source.prepare()
    it = iter(source.dataset())
    lr, hr = next(it)
    del it  # a from_generator iterator must go before interpreter exit
    counter = tf.Variable(0, dtype=tf.int64)
    naive_lr, naive_hr, seq = next(iter(naive_sequence(source, seed=0, decodes=counter)))
    assert lr.shape == naive_lr.shape == (4, 3, 8, 8, 1)
    assert hr.shape == naive_hr.shape == (4, 32, 32, 1)
    assert lr.dtype == naive_lr.dtype == tf.float32 and hr.dtype == naive_hr.dtype == tf.float32
    assert seq.dtype == tf.int32 and seq.shape == (4,)
    assert np.all((seq.numpy() >= 0) & (seq.numpy() < 6))
    assert int(counter.numpy()) >= 3 * 4  # k frames decoded per sample
    for x in (naive_lr, naive_hr):
        assert 0.0 <= float(tf.reduce_min(x)) and float(tf.reduce_max(x)) <= 1.0
    # LR on the 8-bit grid, like the project's
    np.testing.assert_allclose(naive_lr.numpy() * 255, np.round(naive_lr.numpy() * 255), atol=1e-3)


def matching_crops(frame: np.ndarray, patch: np.ndarray, crop: int, margin: int):
    """Top-left corners of the ``crop``-pixel windows of ``frame`` whose inside (``margin``
    pixels cut on every side, ``crop - 2 margin`` pixels wide) equals ``patch``."""
    inner = frame[margin : frame.shape[0] - margin, margin : frame.shape[1] - margin]
    views = np.lib.stride_tricks.sliding_window_view(inner, patch.shape)
    return np.argwhere(np.all(views == patch, axis=(2, 3)))


def test_naive_pipeline_cuts_one_crop_of_the_projects_y_from_the_k_frames_of_a_window(seq_dir):
    """Each naive sample is the project's pairs (``to_pairs``) of one crop, at one position, of
    the project's Y (``load_y``) of the k frames of one window of its sequence: the HR patch is
    searched for in the target frames, and the LR of the k frames at a match must be the
    sample's. Flips off, so that the pairs are those of the crop itself."""
    source = build_source(
        compose_data(
            "sequence", seq_dir, None, "data.batch_size=4", "data.patch_size=32", "data.flips=none"
        )
    )
    source.prepare()
    lr, hr, seq = (t.numpy() for t in next(iter(naive_sequence(source, seed=0))))
    paths, window_seq = window_paths(source)
    c, m, k = source.crop, source.margin, source.frames
    for b in range(len(seq)):
        patch = np.round(hr[b, ..., 0] * 255).astype(np.uint8)
        found = 0
        for w in np.flatnonzero(window_seq == seq[b]):
            frames = [load_y(p) for p in paths[w]]
            for top, left in matching_crops(frames[source.target], patch, c, m):
                crops = np.stack([f[top : top + c, left : left + c, None] for f in frames])
                want_lr, want_hr = source.to_pairs({"hr": tf.constant(crops[None])})
                np.testing.assert_array_equal(want_hr[0].numpy(), hr[b])
                found += np.allclose(want_lr[0].numpy(), lr[b], rtol=0, atol=1e-6)
        assert found, f"sample {b}: no window of sequence {seq[b]} gives its (lr, hr)"
    assert lr.shape == (4, k, 8, 8, 1)
