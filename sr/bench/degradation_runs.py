"""The degradation section of ``scripts/bench_data.py --degradation``: the cost of Real-ESRGAN's
degradation against bicubic and against a NumPy/OpenCV per-image reference, in both modes and on
both devices, and the data-wait it leaves when training EDSR-baseline.

Rows, each timed in its own process as the other rows of the benchmark
(:func:`sr.bench.timing.time_pipeline`: patches/s over repeats after a warm-up, batch 64):

- :data:`DEG_PIPELINES`: ``data=generator`` and ``data=tfrecord`` with bicubic Y and RGB pairs
  (the RGB / Y ratio), Real-ESRGAN's RGB pairs made in the input pipeline with each JPEG coder
  (``degradation.jpeg=libjpeg|tensorflow``), and the input pipeline of
  ``degradation.device=accelerator`` (flipped clean crops: what a GPU's host must supply);
- ``deg_ram_<variant>``: the pair stage alone (``PatchSource.to_pairs``) fed from RGB crops
  already in RAM, the graph's ceiling and the like-for-like comparison with the reference, which
  also degrades crops in RAM;
- ``deg_device_<jpeg>``: the device stage of ``degradation.device=accelerator``
  (``PatchSource.device_stage``) run by the main thread batch after batch, as the training step
  runs it, on this machine's CPU (a GPU's figure is unmeasured here);
- ``deg_reference_<n>``: the NumPy/OpenCV reference (one image at a time, as a PyTorch
  ``DataLoader`` worker runs BasicSR's code, USM included) on the same crops, in 1 and in as many
  processes as the machine has cores (:func:`reference_row`). The reference is a test oracle
  (``tests/oracles/realesrgan.py``), which neither ``sr`` nor the user commands import: the study
  ``python -m benchmarks.realesrgan_reference`` times it and adds its rows to the JSON of
  ``scripts/bench_data.py --degradation`` (:func:`report_degradation` then gives the ratios);
- ``deg_train_<variant>``: ``train.py`` with ``model=edsr_baseline data.channels=rgb`` (batch
  16, the paper's) for a few hundred steps: the data-wait share of the step time.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sr.bench.folders import compose_data
from sr.bench.timing import peak_rss_mb, rate_stats, time_pipeline

MODES = ("generator", "tfrecord")
REAL = ("degradation=realesrgan", "data.channels=rgb")
# variant -> overrides of the Real-ESRGAN rows
VARIANTS = {
    "libjpeg": (*REAL, "degradation.jpeg=libjpeg"),
    "tensorflow": (*REAL, "degradation.jpeg=tensorflow"),
    "accelerator": (*REAL, "degradation.device=accelerator"),
}
# name -> (mode, overrides)
DEG_PIPELINES = {
    **{
        f"deg_{mode[:3]}_bicubic_{ch}": (mode, ("degradation=bicubic", f"data.channels={ch}"))
        for mode in MODES
        for ch in ("y", "rgb")
    },
    **{
        f"deg_{mode[:3]}_realesrgan_{variant}": (mode, overrides)
        for mode in MODES
        for variant, overrides in VARIANTS.items()
    },
}
RAM_ROWS = {
    "bicubic": ("degradation=bicubic", "data.channels=rgb"),
    "libjpeg": VARIANTS["libjpeg"],
    "tensorflow": VARIANTS["tensorflow"],
}
CORES = len(os.sched_getaffinity(0))
RAM_CROPS = 1024  # RGB crops held for the in-memory rows and the reference
TRAIN_STEPS = 200  # steps of the data-wait rows (the first 60 are the warm-up)
DATA_WAIT = re.compile(r"step (\d+)/\d+ .*?step ([\d.]+) ms\s+data-wait ([\d.]+) ms")


def deg_loader(name: str, a):
    """The prepared source of row ``name`` of :data:`DEG_PIPELINES` (its own shard folder)."""
    from sr.config import build_source

    mode, overrides = DEG_PIPELINES[name]
    root = Path(a.work) / "data"
    extra = (f"data.tfrecord_dir={Path(a.work) / name}",) if mode == "tfrecord" else ()
    loader = build_source(compose_data(mode, a.folder, root, *overrides, *extra))
    loader.prepare()
    return loader


def ram_rgb_crops(folder, crop: int, n: int = RAM_CROPS, seed: int = 0):
    """``n`` uint8 RGB crops ``[n, crop, crop, 3]`` spread over the images of ``folder``, drawn
    independently (``seed``)."""
    import numpy as np

    from sr.core.images import list_images, load_image

    rng = np.random.default_rng(seed)
    files = list_images(folder)
    per = -(-n // len(files))
    crops = []
    for f in files:
        image = load_image(f)
        if image.shape[-1] == 1:
            image = np.repeat(image, 3, -1)
        for _ in range(per):
            top = rng.integers(image.shape[0] - crop + 1)
            left = rng.integers(image.shape[1] - crop + 1)
            crops.append(image[top : top + crop, left : left + crop, :3])
    return np.stack(crops[:n])


def ram_pairs(name: str, a, device: bool = False):
    """``deg_ram_<variant>``: the pair stage of :data:`RAM_ROWS` fed from :func:`ram_rgb_crops`
    (batch 64, in parallel, unordered); with ``device`` (``deg_device_<jpeg>``) the input
    pipeline of ``degradation.device=accelerator`` on those crops, its device stage applied by
    the iterating thread, batch after batch (:class:`OnDevice`)."""
    import tensorflow as tf

    from sr.config import build_source

    variant = name.removeprefix("deg_device_" if device else "deg_ram_")
    overrides = RAM_ROWS[variant] + (("degradation.device=accelerator",) if device else ())
    loader = build_source(compose_data("generator", a.folder, None, *overrides))
    crops = tf.constant(ram_rgb_crops(a.folder, loader.crop))
    n = int(crops.shape[0])
    ds = tf.data.Dataset.random(seed=0).batch(loader.batch_size)
    ds = ds.map(lambda r: {"hr": tf.gather(crops, r % n), "gray": tf.zeros(tf.shape(r), tf.bool)})
    pairs = ds.enumerate().map(lambda i, b: loader.to_pairs(b, i), num_parallel_calls=-1)
    options = tf.data.Options()
    options.deterministic = False
    pairs = pairs.with_options(options).prefetch(-1)
    return OnDevice(pairs, loader.device_stage()) if device else pairs


class OnDevice:
    """Batches of ``ds`` through ``stage`` (a ``tf.function``) in the iterating thread, as the
    training step runs a source's device stage."""

    def __init__(self, ds, stage):
        import tensorflow as tf

        self.ds, self.stage = ds, tf.function(stage)

    def __iter__(self):
        return (self.stage(*batch) for batch in self.ds)


def run_deg_worker(name: str, a) -> dict:
    """Time row ``name`` in this process (``scripts/bench_data.py --worker``); its JSON row.

    Args:
        name: a row of :data:`ALL_DEG_ROWS`.
        a: the benchmark's arguments (``folder``, ``work`` and the timing settings).
    """
    if name.startswith("deg_train_"):
        return train_data_wait(name.removeprefix("deg_train_"), a)
    if name.startswith(("deg_ram_", "deg_device_")):
        ds = ram_pairs(name, a, device=name.startswith("deg_device_"))
    else:
        ds = deg_loader(name, a).dataset()
    t = time_pipeline(ds, lambda: 0, a)
    return {
        "name": name,
        "patches_per_s": t["rates"],
        **rate_stats(t["rates"]),
        "batch_size": t["batch_size"],
        "cpu_s_per_1000": 1000 * t["cpu"] / t["total"],
        "peak_rss_mb": peak_rss_mb(),
    }


REFERENCE_CROP = 112  # the 96 patch and its 8-pixel margin at x4
REFERENCE_REPEATS = 5  # timed chunks of the reference's crops
_REFERENCE_WORK: tuple = ()  # (reference, crops), set before the pool forks


def _degrade_chunk(task: tuple) -> float:
    """Degrade crops ``start..stop`` of the forked work (crop i seeded ``(seed, i)``); returns
    the CPU-seconds spent."""
    start, stop, scale, seed = task
    reference, crops = _REFERENCE_WORK
    t0 = time.process_time()
    for i in range(start, stop):
        reference(crops[i], scale, (seed, i))
    return time.process_time() - t0


def time_per_crop(reference: Callable, crops, scale: int, workers: int, seed: int = 0) -> dict:
    """Patches/s of ``reference`` over ``crops`` ``[n, P, P, 3]`` (uint8), in
    :data:`REFERENCE_REPEATS` consecutive chunks after a warm-up of 8 crops, in this process
    (``workers == 1``) or in a pool of ``workers`` forked processes (tasks of 4 crops).

    Returns:
        ``patches_per_s`` (one per chunk), ``median``, ``min``, ``max`` (patches/s) and
        ``cpu_s_per_1000`` (CPU-seconds per 1000 patches, all processes).
    """
    global _REFERENCE_WORK
    _REFERENCE_WORK = (reference, crops)
    n = len(crops)
    bounds = [n * k // REFERENCE_REPEATS for k in range(REFERENCE_REPEATS + 1)]
    pool = None
    if workers > 1:
        import multiprocessing

        pool = multiprocessing.get_context("fork").Pool(workers)
    run = pool.map if pool else map
    try:
        list(run(_degrade_chunk, [(k, k + 1, scale, seed + 1) for k in range(min(8, n))]))
        rates, cpu = [], 0.0
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            tasks = [(k, min(k + 4, hi), scale, seed) for k in range(lo, hi, 4)]
            t0 = time.perf_counter()
            cpu += sum(run(_degrade_chunk, tasks))
            rates.append((hi - lo) / (time.perf_counter() - t0))
    finally:
        if pool:
            pool.close()
            pool.join()
    return {
        "patches_per_s": rates,
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "cpu_s_per_1000": 1000 * cpu / n,
    }


def reference_row(folder, workers: int, reference: Callable) -> dict:
    """``deg_reference_<workers>``: ``reference`` at x4 on :data:`RAM_CROPS` / 2 crops of
    :func:`ram_rgb_crops` (of ``folder``, crop :data:`REFERENCE_CROP`), in ``workers``
    processes.

    Args:
        reference: a per-image degradation ``reference(hr, scale, seed) -> lr`` (uint8
            ``[P, P, 3]`` RGB to uint8 ``[P / scale, P / scale, 3]``; ``seed`` a tuple of ints).
    """
    crops = ram_rgb_crops(folder, REFERENCE_CROP, RAM_CROPS // 2)
    row = time_per_crop(reference, crops, 4, workers)
    return {"name": f"deg_reference_{workers}", **row, "workers": workers, "n": len(crops)}


TRAIN_ROWS = {
    "bicubic": ("degradation=bicubic",),
    "realesrgan": ("degradation=realesrgan",),
    "accelerator": ("degradation=realesrgan", "degradation.device=accelerator"),
}


def train_data_wait(variant: str, a) -> dict:
    """``train.py`` with EDSR-baseline on RGB pairs of :data:`TRAIN_ROWS` ``[variant]`` for
    :data:`TRAIN_STEPS` steps (batch 16, ``data=generator``, no validation): mean step and
    data-wait (ms) over the timing lines after step 60, and the data-wait share."""
    root = Path(__file__).resolve().parents[2]
    run = Path(a.work) / f"train_{variant}"
    cmd = [sys.executable, str(root / "train.py"), "data=generator", "model=edsr_baseline"]
    cmd += [*TRAIN_ROWS[variant], "data.channels=rgb", "data.batch_size=16"]
    cmd += [f"data.hr_dir={a.folder}", "data.val_dir=null", f"train.steps={TRAIN_STEPS}"]
    cmd += ["train.log_every=20", f"hydra.run.dir={run}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    rows = [
        (float(step_ms), float(wait_ms))
        for step, step_ms, wait_ms in DATA_WAIT.findall(proc.stdout + proc.stderr)
        if int(step) > 60
    ]
    step_ms = sum(r[0] for r in rows) / len(rows)
    wait_ms = sum(r[1] for r in rows) / len(rows)
    return {
        "name": f"deg_train_{variant}",
        "steps": TRAIN_STEPS,
        "step_ms": step_ms,
        "data_wait_ms": wait_ms,
        "data_wait_share": wait_ms / step_ms,
        "median": 16 / step_ms * 1000,  # patches/s of the training
    }


def report_degradation(res: dict) -> str:
    """The markdown tables of the section: patches/s per row, ratios, data-wait."""
    p = res["pipelines"]
    lines = [
        f"CPU: {res['machine']['cpu']} ({res['machine']['affinity']} cores); folder "
        f"{res['folder']} ({res['n_images']} images); batch 64, patch 96, x4",
        "",
        "| mode | pairs | patches/s (median, min-max) | CPU-s / 1000 patches |",
        "| --- | --- | ---: | ---: |",
    ]
    for name, (mode, _) in DEG_PIPELINES.items():
        r, what = p[name], name.split("_", 2)[2].replace("_", ", ")
        lines.append(
            f"| {mode} | {what} | {r['median']:.0f} ({r['min']:.0f}-{r['max']:.0f}) | "
            f"{r['cpu_s_per_1000']:.2f} |"
        )
    for m in ("gen", "tfr"):
        y, rgb = p[f"deg_{m}_bicubic_y"]["median"], p[f"deg_{m}_bicubic_rgb"]["median"]
        lines.append(f"\nbicubic RGB / Y, {m}: {rgb / y:.2f}")
    lines += ["", *ram_table(p)]
    lines += [
        "",
        "| training EDSR-baseline, RGB, batch 16, data=generator | step (ms) | data-wait (ms) "
        "| data-wait share |",
        "| --- | ---: | ---: | ---: |",
    ]
    for variant, overrides in TRAIN_ROWS.items():
        r = p[f"deg_train_{variant}"]
        lines.append(
            f"| {' '.join(overrides)} | {r['step_ms']:.0f} | {r['data_wait_ms']:.1f} | "
            f"{100 * r['data_wait_share']:.1f} % |"
        )
    return "\n".join(lines)


def ram_table(p: dict) -> list[str]:
    """The table of the pair stage on RGB crops in RAM; with the reference's rows (added by
    ``python -m benchmarks.realesrgan_reference``) those rows and each row's ratio to the
    reference in as many processes as the machine has cores."""
    ref = p.get(f"deg_reference_{CORES}")
    rows = [
        ("deg_ram_libjpeg", f"input pipeline, libjpeg ({CORES} cores)"),
        ("deg_ram_tensorflow", f"input pipeline, batched TensorFlow JPEG ({CORES} cores)"),
        ("deg_device_libjpeg", "device stage on this CPU, libjpeg"),
        ("deg_device_tensorflow", "device stage on this CPU, batched TensorFlow JPEG"),
        ("deg_reference_1", "NumPy/OpenCV reference, 1 process"),
        (f"deg_reference_{CORES}", f"NumPy/OpenCV reference, {CORES} processes"),
        ("deg_ram_bicubic", "bicubic RGB pairs (for scale)"),
    ]
    head = "| Real-ESRGAN pairs of RGB crops in RAM | patches/s | CPU-s / 1000 |"
    lines = [head + (" this / reference |" if ref else ""), "| --- | ---: | ---: |"]
    lines[-1] += " ---: |" if ref else ""
    for name, what in rows:
        if name in p:
            r = p[name]
            ratio = f" {r['median'] / ref['median']:.2f} |" if ref else ""
            lines.append(f"| {what} | {r['median']:.0f} | {r['cpu_s_per_1000']:.2f} |{ratio}")
    return lines


REFERENCE_ROWS = ("deg_reference_1", *((f"deg_reference_{CORES}",) if CORES > 1 else ()))
"""The reference's rows (``python -m benchmarks.realesrgan_reference``), by their processes."""

ALL_DEG_ROWS = (
    *DEG_PIPELINES,
    *(f"deg_ram_{v}" for v in RAM_ROWS),
    "deg_device_libjpeg",
    "deg_device_tensorflow",
    *(f"deg_train_{v}" for v in TRAIN_ROWS),
)
