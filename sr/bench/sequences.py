"""Sequence mode (``data=sequence``) baselines and measures, for ``scripts/bench_data.py
--sequence`` and ``benchmarks/shuffle_report.py --only sequence``.

- :func:`naive_sequence`: the naive pipeline, "decode k frames per sample": a ``tf.data``
  pipeline over the shuffled list of windows that reads and decodes the k frames of every sample
  (``tf.io.read_file`` + ``tf.image.decode_png``), takes the project's Y
  (``sr.core.color.y_rounded``, bit-exact with ``sr.core.color.y_channel``), crops one random
  patch at the same position in all k frames, batches, and makes the pairs with the project's
  LR per frame (``SequenceSource.to_pairs``, i.e. ``sr.data.pairs.make_window_pairs``). Yields
  ``(lr, hr, sequence)``: the project's ``(lr, hr)`` shapes and dtypes plus the int32 sequence
  index of each sample, for the measurements.
- :func:`measure_sequence_shuffle`: order bias of the first draws of the project's loader
  against (sequence, frame), and of two index-only references: the windows read in sorted order,
  ``per_window`` crops each, through a small ``shuffle(buffer)`` (reference 004's generator mode
  carried over to sequences, the bias the project avoids), and the shuffled window list of the
  naive pipeline.

Benchmark code, not product code.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from sr.bench.measures import distinct_per_batch, ideal_distinct, spearman
from sr.core.color import y_rounded


def window_paths(source) -> tuple[np.ndarray, np.ndarray]:
    """``(paths, sequence)`` of every window of a prepared ``SequenceSource``, sorted by
    (sequence, start frame): str ``[W, k]`` (each window's k frame files) and int32 ``[W]``."""
    s = source.sequences
    first = s.first[s.window_seq] + s.window_start
    frames = first[:, None] + source.frame_stride * np.arange(source.frames)
    files = np.array([str(p) for p in s.files])
    return files[frames], s.window_seq.astype(np.int32)


def naive_sequence(
    source, seed=None, decodes: tf.Variable | None = None, batch_size: int | None = None
) -> tf.data.Dataset:
    """The naive sequence pipeline (module docstring): shuffled window list (reshuffled every
    epoch) -> parallel map (read and decode k PNG frames, Y, one random crop shared by the k
    frames) -> batch -> the project's pairs -> prefetch.

    Args:
        source: a prepared ``SequenceSource`` (its frames, stride, crop, scale, target, flips).
        seed: shuffle seed.
        decodes: optional int64 variable incremented by k per sample (frames decoded).
        batch_size: B (default ``source.batch_size``).

    Returns:
        Endless ``(lr, hr, sequence)``: float32 ``[B, k, P/s, P/s, 1]`` (``[B, P/s, P/s, 1]``
        for k = 1), ``[B, P, P, 1]`` and int32 ``[B]``.
    """
    paths, seq = window_paths(source)
    k, c = source.frames, source.crop
    b = batch_size or source.batch_size

    def load(files, sequence):
        frames = [
            y_rounded(tf.io.decode_png(tf.io.read_file(files[j]), channels=3)) for j in range(k)
        ]
        stack = tf.stack(frames)  # [k, H, W, 1]
        if decodes is not None:
            with tf.control_dependencies([decodes.assign_add(k)]):
                stack = tf.identity(stack)
        return tf.image.random_crop(stack, [k, c, c, 1]), sequence

    ds = tf.data.Dataset.from_tensor_slices((paths, seq))
    ds = ds.shuffle(len(seq), seed=seed).repeat()
    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(b, drop_remainder=True)
    ds = ds.map(
        lambda hr, sequence: (*source.to_pairs({"hr": hr}), sequence),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return ds.prefetch(tf.data.AUTOTUNE)


# ------------------------------------------------------------------------------------------------
# order bias against (sequence, frame)
# ------------------------------------------------------------------------------------------------
def project_sequence_draws(source, n: int) -> np.ndarray:
    """Window indices (rank in the sorted (sequence, start frame) list) of the first ``n``
    samples of ``source.patch_dataset()``."""
    it = iter(source.patch_dataset())
    out, got = [], 0
    while got < n:
        w = next(it)["window"].numpy()
        out.append(w)
        got += len(w)
    del it  # a from_generator iterator must go before interpreter exit
    return np.concatenate(out)[:n]


def sorted_shuffle_draws(
    n_windows: int, n: int, per_window: int, buffer: int, seed: int = 0
) -> np.ndarray:
    """Window indices of the first ``n`` samples of the naive sorted-order reference: windows
    read in sorted order (sequence after sequence, frame after frame), ``per_window`` crops cut
    from each decoded window, through ``tf.data``'s ``shuffle(buffer)`` (index only: the order is
    the pipeline's, no pixel is read)."""
    ds = tf.data.Dataset.range(n_windows).repeat()
    ds = ds.flat_map(lambda w: tf.data.Dataset.from_tensors(w).repeat(per_window))
    ds = ds.shuffle(buffer, seed=seed).batch(1024)
    return _take(ds, n)


def shuffled_list_draws(n_windows: int, n: int, seed: int = 0) -> np.ndarray:
    """Window indices of the first ``n`` samples of :func:`naive_sequence`'s order: the whole
    window list shuffled, reshuffled every epoch (index only)."""
    ds = tf.data.Dataset.range(n_windows).shuffle(n_windows, seed=seed).repeat().batch(1024)
    return _take(ds, n)


def _take(ds: tf.data.Dataset, n: int) -> np.ndarray:
    out, got = [], 0
    for batch in ds:
        out.append(batch.numpy())
        got += len(out[-1])
        if got >= n:
            break
    return np.concatenate(out)[:n].astype(np.int64)


def null_spread(n: int, patches_per_window: int, pool_windows: int, n_windows: int) -> float:
    """Rough standard deviation of the project loader's rho(draw order, window index) over ``n``
    draws when there is no bias at all (on the high side: 40 sequences x 60 frames, 10,000
    draws, 20 seeds measured 0.030 at 8 patches per window against 0.029 here, 0.035 at 32
    against 0.056).

    A draw is a window of the pool: its index is the pool's mean (a slow process, renewed every
    ``pool_windows x patches_per_window`` draws, of variance ``1 / pool_windows`` of the whole,
    times the finite-population factor) plus an independent part. So about
    ``sqrt((1 + f ppw) / n)`` with ``f = (W - pool) / (W - 1)``: with the default 32 crops per
    window, 0.057 over 10,000 draws, where independent draws would give 0.010; 1 / sqrt(n) when
    every window fits in the pool (f = 0). An estimate for draws within one pass of the window
    permutation (W >> n / ppw); over many passes the permutation evens the windows' counts out
    and the spread is smaller (``tests/test_sequence_bench.py``)."""
    f = max(0.0, (n_windows - pool_windows) / max(1, n_windows - 1))
    return float(np.sqrt((1 + f * patches_per_window) / n))


def sequence_order_stats(window: np.ndarray, sequences, batch_size: int) -> dict:
    """Order and diversity figures of window draws (in draw order) over a ``SequenceSet``:
    Spearman rho of draw order against window index, sequence index and frame index within the
    sequence (the window's start frame), distinct sequences per batch of ``batch_size`` (and the
    independent-draw ideal ``Q (1 - (1 - 1/Q)^B)``), and the windows and sequences seen."""
    window = np.asarray(window).reshape(-1)
    order = np.arange(len(window))
    seq = sequences.window_seq[window]
    frame = sequences.window_start[window]
    d = distinct_per_batch(seq, batch_size)
    q = len(sequences.names)
    return {
        "draws": int(len(window)),
        "rho_window": spearman(order, window),
        "rho_sequence": spearman(order, seq),
        "rho_frame": spearman(order, frame),
        "distinct_mean": float(d.mean()) if len(d) else float("nan"),
        "distinct_min": int(d.min()) if len(d) else 0,
        "distinct_ideal": ideal_distinct(q, batch_size),
        "windows_seen": int(len(np.unique(window))),
        "sequences_seen": int(len(np.unique(seq))),
    }


def measure_sequence_shuffle(
    folder,
    first: int = 10_000,
    per_window: int | None = None,
    buffer: int = 2000,
    overrides: tuple[str, ...] = (),
    seed: int = 0,
) -> dict:
    """Order bias of the first ``first`` samples of the project's ``data=sequence`` loader built
    as ``train.py`` builds it (``python train.py data=sequence data.hr_dir=<folder>
    <overrides>``), and of the references (:func:`sorted_shuffle_draws` with ``per_window`` crops
    a window, default the loader's ``patches_per_window``, and ``buffer``;
    :func:`shuffled_list_draws`).

    Returns:
        ``{"folder", "n_sequences", "n_windows", "frames", "batch_size", "first", "pool": {...},
        "null_sd", "pipelines": {name: sequence_order_stats}, "draws": {name: window indices}}``.
    """
    from sr.bench.folders import compose_data
    from sr.config import build_source

    source = build_source(compose_data("sequence", folder, None, *overrides))
    source.prepare()
    s = source.sequences
    n_windows, b = len(s.window_seq), source.batch_size
    per_window = per_window or source.patches_per_window
    draws = {"project data=sequence": project_sequence_draws(source, first)}
    pool = source.pool
    draws[f"naive: sorted windows, {per_window} crops each, shuffle({buffer})"] = (
        sorted_shuffle_draws(n_windows, first, per_window, buffer, seed)
    )
    draws["naive: shuffled window list (bench)"] = shuffled_list_draws(n_windows, first, seed)
    return {
        "folder": str(folder),
        "n_sequences": len(s.names),
        "n_windows": n_windows,
        "frames": source.frames,
        "frame_stride": source.frame_stride,
        "batch_size": b,
        "first": first,
        "pool": {
            "windows": int(pool.pool_images),
            "keep_all": bool(pool.keep_all),
            "patches_per_window": source.patches_per_window,
            "pool_frames": source.pool_frames,
            "peak_frames": int(pool.peak_frames),
        },
        "null_sd": null_spread(first, source.patches_per_window, pool.pool_images, n_windows),
        "pipelines": {k: sequence_order_stats(v, s, b) for k, v in draws.items()},
        "draws": draws,
    }
