"""The sequence pipelines of ``scripts/bench_data.py --sequence`` (issue 10), each timed in its
own process: the project's ``data=sequence`` loader (``seq_project``), the naive pipeline that
decodes the k frames of every sample (``seq_naive``, :func:`sr.bench.sequences.naive_sequence`)
and the frames decoded alone (``seq_decode``, the loader's decode-bound ceiling).
"""

from __future__ import annotations

from sr.bench.folders import compose_data
from sr.bench.timing import peak_rss_mb, rate_stats, rss_mb, time_decodes, time_pipeline

# data=sequence: the loader's settings, stated (all defaults but the window's)
SEQ_OVERRIDES = (
    "data.frames=3",
    "data.frame_stride=1",
    "data.batch_size=64",
    "data.patch_size=96",
    "data.scale=4",
    "data.patches_per_window=32",
    "data.pool_frames=384",
    "data.pool_memory_mb=1024",
    "data.decode_workers=2",
)
# 1280 frames: several times the default pool (384 frames), so that the pool turns over as on long
# sequences (with 8 x 30 = 240 frames it would hold most of the folder and decode each frame once)
SEQ_FOLDER = dict(sequences=32, frames=40, size=(864, 1296))
SEQ_FOLDER_QUICK = dict(sequences=6, frames=24, size=(864, 1296))
SEQ_PIPELINES = {
    "seq_project": "project data=sequence (k=3, default pool)",
    "seq_naive": "naive: decode k frames per sample",
}


def sequence_source(a):
    """The project's ``data=sequence`` source on ``a.folder`` with :data:`SEQ_OVERRIDES`,
    prepared."""
    from sr.config import build_source

    source = build_source(compose_data("sequence", a.folder, None, *SEQ_OVERRIDES))
    source.prepare()
    return source


def sequence_pipeline(name: str, source):
    """(dataset, frame decode counter callable) of ``seq_project`` or ``seq_naive``."""
    import tensorflow as tf

    from sr.bench.sequences import naive_sequence

    if name == "seq_project":
        return source.dataset(), lambda: source.pool.frame_decodes
    if name == "seq_naive":
        counter = tf.Variable(0, dtype=tf.int64)
        ds = naive_sequence(source, seed=0, decodes=counter)
        return ds, lambda: int(counter.numpy())
    raise ValueError(f"unknown sequence pipeline {name!r}; choose from {list(SEQ_PIPELINES)}")


def pool_figures(source) -> dict:
    """The project loader's pool after the timing: windows held, decodes, peak of frames."""
    pool = source.pool
    return {
        "pool_windows": int(pool.pool_images),
        "keep_all": bool(pool.keep_all),
        "peak_frames": int(pool.peak_frames),
        "pool_frames": source.pool_frames,
        "patches_per_window": source.patches_per_window,
        "window_decodes_total": int(pool.decodes),
        "frame_decodes_total": int(pool.frame_decodes),
    }


def run_sequence_worker(name: str, a) -> dict:
    """One sequence-mode pipeline (``seq_project``, ``seq_naive``) timed as
    :func:`sr.bench.pipeline_runs.run_worker` times the others, or the frames decoded alone
    (``seq_decode``)."""
    import numpy as np

    from sr.bench.measures import distinct_per_batch, ideal_distinct

    if name == "seq_decode":
        return decode_frames_alone(a)
    rss0 = rss_mb()
    source = sequence_source(a)
    t = time_pipeline(*sequence_pipeline(name, source), a)
    peak_rss = peak_rss_mb()
    seen, total, batch_size, first = t["seen"], t["total"], t["batch_size"], t["first"]
    out = {}
    if name == "seq_project":
        out = pool_figures(source)
        it = iter(source.patch_dataset())  # (lr, hr) carry no index: sequences from here
        seen = [next(it)["sequence"].numpy() for _ in range(a.index_batches)]
        del it
    distinct = distinct_per_batch(np.concatenate(seen), batch_size)
    s = source.sequences
    return {
        "name": name,
        "patches_per_s": t["rates"],
        **rate_stats(t["rates"]),
        "batch_size": batch_size,
        "lr_shape": list(first[0].shape),
        "hr_shape": list(first[1].shape),
        "first_batch_s": t["first_batch_s"],
        "patches_timed": total,
        "decodes_per_patch": t["dec"] / total,
        "bytes_read_per_patch": t["io"] / total,
        "distinct_mean": float(distinct.mean()),
        "distinct_min": int(distinct.min()),
        "distinct_batches": int(len(distinct)),
        "distinct_ideal": ideal_distinct(len(s.names), batch_size),
        "n_sequences": len(s.names),
        "n_frames": len(s.files),
        "n_windows": len(s.window_seq),
        "frame_size": list(s.sizes[0]),
        "rss_start_mb": rss0,
        "peak_rss_mb": peak_rss,
        "cpu_s_per_1000": 1000 * t["cpu"] / total,
        **out,
    }


def decode_frames_alone(a) -> dict:
    """The sequence frames decoded to Y alone by the loader's decode (``load_y``) on its
    ``decode_workers`` threads: frames/s, its decode-bound ceiling with decodes/patch."""
    from sr.core.images import load_y

    source = sequence_source(a)
    rates, cpu = time_decodes(load_y, source.sequences.files, source.decode_workers, a)
    return {
        "name": "seq_decode",
        "frames_per_s": rates,
        **rate_stats(rates),
        "workers": source.decode_workers,
        "cpu_ms_per_frame": 1000 * cpu / (a.repeats * a.decode_images),
        "peak_rss_mb": peak_rss_mb(),
    }
