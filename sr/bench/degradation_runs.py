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
- ``deg_reference_<n>``: ``benchmarks/realesrgan_reference.py`` (NumPy + OpenCV, one image at a
  time, as a PyTorch ``DataLoader`` worker runs BasicSR's code, USM included) on the same crops,
  in 1 and in as many processes as the machine has cores;
- ``deg_train_<variant>``: ``train.py`` with ``model=edsr_baseline data.channels=rgb`` (batch
  16, the paper's) for a few hundred steps: the data-wait share of the step time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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
    """Time row ``name`` in this process (``scripts/bench_data.py --worker``); its JSON row."""
    if name.startswith("deg_train_"):
        return train_data_wait(name.removeprefix("deg_train_"), a)
    if name.startswith("deg_reference"):
        return reference(a, workers=int(name.rsplit("_", 1)[1]))
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


def reference(a, workers: int) -> dict:
    """``benchmarks/realesrgan_reference.py --json`` on the crops of :func:`ram_rgb_crops`
    (same folder, crop 112: patch 96 + 2 x 8 margin at x4), in ``workers`` processes."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "realesrgan_reference.py"
    cmd = [sys.executable, str(script), "--images", str(a.folder), "--crop", "112"]
    cmd += ["--n", str(RAM_CROPS // 2), "--workers", str(workers), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"name": f"deg_reference_{workers}", **row}


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
    for name, (mode, overrides) in DEG_PIPELINES.items():
        r, what = p[name], name.split("_", 2)[2].replace("_", ", ")
        lines.append(
            f"| {mode} | {what} | {r['median']:.0f} ({r['min']:.0f}-{r['max']:.0f}) | "
            f"{r['cpu_s_per_1000']:.2f} |"
        )
    for m in ("gen", "tfr"):
        y, rgb = p[f"deg_{m}_bicubic_y"]["median"], p[f"deg_{m}_bicubic_rgb"]["median"]
        lines.append(f"\nbicubic RGB / Y, {m}: {rgb / y:.2f}")
    ref = p[f"deg_reference_{CORES}"]
    lines += [
        "",
        "| Real-ESRGAN pairs of RGB crops in RAM | patches/s | CPU-s / 1000 | this / reference |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, what in (
        ("deg_ram_libjpeg", f"input pipeline, libjpeg ({CORES} cores)"),
        ("deg_ram_tensorflow", f"input pipeline, batched TensorFlow JPEG ({CORES} cores)"),
        ("deg_device_libjpeg", "device stage on this CPU, libjpeg"),
        ("deg_device_tensorflow", "device stage on this CPU, batched TensorFlow JPEG"),
        ("deg_reference_1", "NumPy/OpenCV reference, 1 process"),
        (f"deg_reference_{CORES}", f"NumPy/OpenCV reference, {CORES} processes"),
        ("deg_ram_bicubic", "bicubic RGB pairs (for scale)"),
    ):
        r = p[name]
        lines.append(
            f"| {what} | {r['median']:.0f} | {r['cpu_s_per_1000']:.2f} | "
            f"{r['median'] / ref['median']:.2f} |"
        )
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


ALL_DEG_ROWS = (
    *DEG_PIPELINES,
    *(f"deg_ram_{v}" for v in RAM_ROWS),
    "deg_device_libjpeg",
    "deg_device_tensorflow",
    "deg_reference_1",
    *((f"deg_reference_{CORES}",) if CORES > 1 else ()),
    *(f"deg_train_{v}" for v in TRAIN_ROWS),
)
