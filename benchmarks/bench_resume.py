"""Exact resume: what it costs, and a check that it is exact at the default sizes.

    python benchmarks/bench_resume.py                    # ~5 min on 2 cores
    python benchmarks/bench_resume.py --quick            # smoke run
    python benchmarks/bench_resume.py --folder DIR --out outputs/bench

Default folder: the first ``--images`` photos of ``../shared/datasets/hr_sample`` re-encoded as
PNG. Every figure is measured in this run, on this machine (its CPU flags are printed):

1. **Checkpoint cost**, per data mode at the defaults (ESPCN, batch 64, patch 96,
   ``shuffle_buffer`` 2048): bytes of one checkpoint with and without the data position, and the
   median time to save and to restore one. ``data=tfrecord`` saves the tf.data iterator (its
   shuffle buffer and prefetched batches); ``data=generator`` saves a seed and the stream's
   identity only.
2. **Generator replay**: a resumed ``data=generator`` run replays its pool's decisions without
   decoding; microseconds per replayed batch, and the seconds a resume at step 100,000 spends.
3. **Exactness**: ``train.steps=2N`` in one run against ``train.steps=N`` then ``resume=`` to
   2N, per mode, at batch 64 with ``data.deterministic=true``: the largest absolute difference of
   any weight or optimizer value (0 means bit-identical) and the logged losses that differ.

Writes ``bench_resume.json`` and ``bench_resume.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from sr.bench.folders import SHARED_SAMPLE, compose_data, reencode_png  # noqa: E402
from sr.config import build_source  # noqa: E402
from sr.loading.checkpoints import make_checkpoint  # noqa: E402
from sr.loading.models import build_model  # noqa: E402
from sr.train.checkpoint import make_manager  # noqa: E402
from sr.train.loop import Trainer  # noqa: E402

STATE = ("model/", "optimizer/", "step/")


def cpu_flags() -> str:
    try:
        flags = next(
            line for line in Path("/proc/cpuinfo").read_text().splitlines() if "flags" in line
        ).split()
    except (OSError, StopIteration):
        return "unknown"
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "amx_tile")
    return " ".join(f for f in wanted if f in flags) or "no AVX2"


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def checkpoint_cost(mode: str, hr_dir: Path, work: Path, repeats: int) -> dict:
    """Save and restore times and sizes of a checkpoint with and without the data position."""
    extra = ("data.stride=256",) if mode == "tfrecord" else ()  # fewer patches: a quick build
    cfg = compose_data(mode, hr_dir, work / "root", *extra, "train.max_to_keep=100")
    loader = build_source(cfg)
    loader.prepare()
    model = build_model(cfg)
    trainer = Trainer(cfg, loader, model, work / f"run-{mode}")
    iterator = trainer.feed.open()
    for _ in range(8):  # buffers full: the shuffle buffer and the prefetched batches
        next(iterator)
    time.sleep(2.0)
    bare = make_manager(
        make_checkpoint(model, trainer.optimizer, trainer.state.step), work / f"bare-{mode}", 100
    )
    out = {}
    for name, manager in (("with_data", trainer.checkpoints.manager), ("model_only", bare)):
        times = []
        for k in range(repeats):
            t0 = time.perf_counter()
            manager.save(checkpoint_number=k)
            times.append(time.perf_counter() - t0)
        prefix = manager.latest_checkpoint
        size = sum(f.stat().st_size for f in Path(prefix).parent.glob(Path(prefix).name + ".*"))
        out[name] = {"save_s": statistics.median(times), "bytes": size}
    t0 = time.perf_counter()
    trainer.feed.stream_checkpoint = trainer.checkpoints.manager.latest_checkpoint
    again = trainer.feed.open()
    next(again)
    out["with_data"]["restore_and_first_batch_s"] = time.perf_counter() - t0
    del iterator, again
    return out


def replay_cost(hr_dir: Path, work: Path, batches: int) -> dict:
    cfg = compose_data("generator", hr_dir, None, "data.pool_size=16", "data.patches_per_image=16")
    loader = build_source(cfg)
    loader.prepare()
    from sr.data.generator import PatchPool

    pool = PatchPool(
        loader.images,
        loader.crop,
        loader.batch_size,
        loader.patches_per_image,
        loader.pool_size,
        loader.pool_memory_mb,
        seed=0,
    )
    plans = pool.plans()
    t0 = time.perf_counter()
    for _ in range(batches):
        next(plans)
    per = (time.perf_counter() - t0) / batches
    return {
        "us_per_batch": per * 1e6,
        "resume_at_100k_s": per * 100_000,
        "batch": cfg.data.batch_size,
    }


def exactness(mode: str, hr_dir: Path, work: Path, steps: int) -> dict:
    from sr.train.app import run

    base = [
        "data.deterministic=true",
        "data.stride=256" if mode == "tfrecord" else "data.pool_size=16",
        "train.lr_schedule=step",
        "train.log_every=1",
        "train.ckpt_every=100000",
    ]

    def cfg(*extra):
        return compose_data(mode, hr_dir, work / "root", *base, *extra)

    one, two = work / f"one-{mode}", work / f"two-{mode}"
    run(cfg(f"train.steps={2 * steps}"), one)
    run(cfg(f"train.steps={steps}"), two)
    run(cfg(f"train.steps={2 * steps}", f"resume={two}"), two)
    ra = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(one / "checkpoints")))
    rb = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(two / "checkpoints")))
    keys = [k for k in ra.get_variable_to_shape_map() if k.startswith(STATE)]
    diff = max(
        float(np.max(np.abs(ra.get_tensor(k).astype(np.float64) - rb.get_tensor(k)))) for k in keys
    )
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def losses(run_dir):
        acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"tensors": 0})
        acc.Reload()
        return {e.step: float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors("train/loss")}

    la, lb = losses(one), losses(two)
    return {
        "steps": f"{steps} + {steps} vs {2 * steps}",
        "tensors": len(keys),
        "max_abs_diff": diff,
        "losses_compared": len(la),
        "losses_differing": sum(la[s] != lb.get(s) for s in la),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folder", type=Path, help="HR image folder (default: shared sample as PNG)")
    p.add_argument("--images", type=int, default=16, help="photos of the shared sample to use")
    p.add_argument("--out", type=Path, default=Path("outputs/bench"))
    p.add_argument("--steps", type=int, default=10, help="N of the N + N exactness check")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="bench_resume-"))
    try:
        if a.folder:
            hr_dir = a.folder
        else:
            sample = work / "sample"
            sample.mkdir()
            for f in sorted(SHARED_SAMPLE.iterdir())[: a.images]:
                os.symlink(f, sample / f.name)
            hr_dir = reencode_png(sample, work / "png")
        repeats = 3 if a.quick else 7
        steps = 2 if a.quick else a.steps
        res = {
            "machine": {
                "cpu_count": os.cpu_count(),
                "cpu_flags": cpu_flags(),
                "python": platform.python_version(),
                "tensorflow": tf.__version__,
            },
            "checkpoint": {
                m: checkpoint_cost(m, hr_dir, work, repeats) for m in ("tfrecord", "generator")
            },
            "replay": replay_cost(hr_dir, work, 2000 if a.quick else 20000),
            "exactness": {m: exactness(m, hr_dir, work, steps) for m in ("tfrecord", "generator")},
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "bench_resume.json").write_text(json.dumps(res, indent=1))
    md = [
        f"Machine: {res['machine']['cpu_count']} CPUs ({res['machine']['cpu_flags']}), "
        f"TensorFlow {res['machine']['tensorflow']}",
        "",
        "| mode | checkpoint MB (model only) | save s (model only) | restore + first batch s |",
        "| --- | --- | --- | --- |",
    ]
    for m, c in res["checkpoint"].items():
        w, b = c["with_data"], c["model_only"]
        md.append(
            f"| {m} | {w['bytes'] / 1e6:.1f} ({b['bytes'] / 1e6:.2f}) | {w['save_s']:.3f} "
            f"({b['save_s']:.3f}) | {w['restore_and_first_batch_s']:.2f} |"
        )
    r = res["replay"]
    md += [
        "",
        f"Generator replay: {r['us_per_batch']:.0f} µs per batch of {r['batch']} "
        f"({r['resume_at_100k_s']:.1f} s for a resume at step 100,000).",
        "",
        "| mode | N + N vs 2N | tensors | max abs diff | losses differing |",
        "| --- | --- | --- | --- | --- |",
    ]
    for m, e in res["exactness"].items():
        md.append(
            f"| {m} | {e['steps']} | {e['tensors']} | {e['max_abs_diff']:.3g} | "
            f"{e['losses_differing']} of {e['losses_compared']} |"
        )
    (a.out / "bench_resume.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
