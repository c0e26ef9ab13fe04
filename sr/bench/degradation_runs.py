"""The degradation section of ``scripts/bench_data.py --degradation`` (issue 21): the cost of
Real-ESRGAN's degradation in the tf.data graph against bicubic, in both modes, against a
NumPy/OpenCV per-image reference, and the data-wait it leaves when training EDSR-baseline.

Rows (:data:`DEG_PIPELINES`), each timed in its own process as the other rows of the benchmark
(:func:`sr.bench.timing.time_pipeline`: patches/s over repeats after a warm-up, batch 64):

- ``data=generator`` and ``data=tfrecord`` with ``degradation=bicubic`` and ``realesrgan``,
  each with ``data.channels=y`` and ``rgb``;
- ``deg_ram_<degradation>``: the pair stage alone (``PatchSource.to_pairs``) fed from RGB crops
  already in RAM, the graph's ceiling and the like-for-like comparison with the reference, which
  also degrades crops in RAM;
- ``deg_reference``: ``benchmarks/realesrgan_reference.py`` (NumPy + OpenCV, one image at a
  time, as a PyTorch ``DataLoader`` worker runs BasicSR's code) on the same crops, in 1 and 2
  processes (the graph uses both cores);
- ``deg_train_<degradation>``: ``train.py`` with ``model=edsr_baseline data.channels=rgb``
  (batch 16, the paper's) for a few hundred steps: the data-wait share of the step time from its
  timing lines.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from sr.bench.folders import compose_data
from sr.bench.timing import peak_rss_mb, rate_stats, time_pipeline

MODES = ("generator", "tfrecord")
DEGRADATIONS = ("bicubic", "realesrgan")
# name -> (mode, overrides)
DEG_PIPELINES = {
    f"deg_{mode[:3]}_{deg}_{ch}": (mode, (f"degradation={deg}", f"data.channels={ch}"))
    for mode in MODES
    for deg in DEGRADATIONS
    for ch in ("y", "rgb")
}
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


def ram_pairs(name: str, a):
    """``deg_ram_<degradation>``: the pair stage of ``data.channels=rgb`` with that degradation,
    fed from :func:`ram_rgb_crops` (batch 64, in parallel, unordered)."""
    import tensorflow as tf

    from sr.config import build_source

    deg = name.removeprefix("deg_ram_")
    overrides = (f"degradation={deg}", "data.channels=rgb")
    loader = build_source(compose_data("generator", a.folder, None, *overrides))
    crops = tf.constant(ram_rgb_crops(a.folder, loader.crop))
    n = int(crops.shape[0])
    ds = tf.data.Dataset.random(seed=0).batch(loader.batch_size)
    ds = ds.map(lambda r: {"hr": tf.gather(crops, r % n), "gray": tf.zeros(tf.shape(r), tf.bool)})
    pairs = ds.enumerate().map(lambda i, b: loader.to_pairs(b, i), num_parallel_calls=-1)
    options = tf.data.Options()
    options.deterministic = False
    return pairs.with_options(options).prefetch(-1)


def run_deg_worker(name: str, a) -> dict:
    """Time row ``name`` in this process (``scripts/bench_data.py --worker``); its JSON row."""
    if name.startswith("deg_train_"):
        return train_data_wait(name.removeprefix("deg_train_"), a)
    if name.startswith("deg_reference"):
        return reference(a, workers=int(name.rsplit("_", 1)[1]))
    ds = ram_pairs(name, a) if name.startswith("deg_ram_") else deg_loader(name, a).dataset()
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


def train_data_wait(deg: str, a) -> dict:
    """``train.py`` with EDSR-baseline on RGB pairs of ``deg`` for :data:`TRAIN_STEPS` steps
    (batch 16, ``data=generator``, no validation): mean step and data-wait (ms) over the timing
    lines after step 60, and the data-wait share."""
    root = Path(__file__).resolve().parents[2]
    run = Path(a.work) / f"train_{deg}"
    cmd = [sys.executable, str(root / "train.py"), "data=generator", "model=edsr_baseline"]
    cmd += [f"degradation={deg}", "data.channels=rgb", "data.batch_size=16"]
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
        "name": f"deg_train_{deg}",
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
        "| mode | degradation | channels | patches/s (median, min-max) | CPU-s / 1000 patches |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for name, (mode, overrides) in DEG_PIPELINES.items():
        r = p[name]
        deg, ch = (o.split("=")[1] for o in overrides)
        lines.append(
            f"| {mode} | {deg} | {ch} | {r['median']:.0f} ({r['min']:.0f}-{r['max']:.0f}) | "
            f"{r['cpu_s_per_1000']:.1f} |"
        )
    ram, ref1, ref2 = p["deg_ram_realesrgan"], p["deg_reference_1"], p["deg_reference_2"]
    lines += [
        "",
        "| Real-ESRGAN degradation of RGB crops in RAM | patches/s | graph / this |",
        "| --- | ---: | ---: |",
        f"| project, tf.data graph (2 cores) | {ram['median']:.0f} | 1.00 |",
        f"| NumPy/OpenCV reference, 1 process | {ref1['median']:.0f} | "
        f"{ram['median'] / ref1['median']:.2f} |",
        f"| NumPy/OpenCV reference, 2 processes | {ref2['median']:.0f} | "
        f"{ram['median'] / ref2['median']:.2f} |",
        f"| project, bicubic (for scale) | {p['deg_ram_bicubic']['median']:.0f} | |",
        "",
        "| training EDSR-baseline, RGB, batch 16, data=generator | step (ms) | data-wait (ms) "
        "| data-wait share |",
        "| --- | ---: | ---: | ---: |",
    ]
    for deg in DEGRADATIONS:
        r = p[f"deg_train_{deg}"]
        lines.append(
            f"| degradation={deg} | {r['step_ms']:.0f} | {r['data_wait_ms']:.1f} | "
            f"{100 * r['data_wait_share']:.1f} % |"
        )
    return "\n".join(lines)


ALL_DEG_ROWS = (
    *DEG_PIPELINES,
    *(f"deg_ram_{d}" for d in DEGRADATIONS),
    "deg_reference_1",
    "deg_reference_2",
    *(f"deg_train_{d}" for d in DEGRADATIONS),
)
