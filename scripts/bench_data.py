"""Input-pipeline benchmark: the project's loaders against the reference pipelines and ceilings.

    python scripts/bench_data.py                  # full run (~10 min on 2 cores)
    python scripts/bench_data.py --quick          # smoke run (~2 min)
    python scripts/bench_data.py --folder DIR --out outputs/bench
    python scripts/bench_data.py --sequence       # data=sequence only (~5 min; = --only sequence)

Every pipeline runs in its own subprocess (clean peak memory and CPU time), on the same folder
(default: ``../shared/datasets/hr_sample`` re-encoded as PNG into a temporary folder, so that the
decode cost is DIV2K-like). Per pipeline, after a warm-up, over several repeats: patches/s and
batches/s (median, min, max), time to first batch, image decodes per patch, bytes read per patch
(``rchar`` of ``/proc/self/io``), distinct source images per batch (mean, min; the
independent-draw ideal beside it), peak RSS, and CPU-seconds per 1000 patches.

Pipelines: the project's ``data=tfrecord`` and ``data=generator`` loaders built as ``train.py``
builds them (``hydra.utils.instantiate(cfg.data).dataset()``); the references (a) naive, (b) the
generator and (c) the TFRecord modes of ``references/004`` (``sr/bench/references.py``), and
(c) reordered (batch before map, no ``py_func``); the in-memory ceiling (the project's post-decode
graph fed from uint8 patches in RAM); files decoded alone (the generator's decode-bound
ceiling); the generator at 16..256 patches per decoded image; and two TFRecord variants of issue
11, sub-image records with a random crop in each (``data.subimage_size=384``) and RGB records
for ``data.lr_from=rgb``, each with its shard bytes on disk. Writes ``bench_data.json``,
``bench_data.md``, ``bench_data.png`` and ``bench_ppi.png`` into ``--out``.

Sequence mode (``--sequence``, issue 10), on a folder of sorted sequences (default: 32 sequences
x 40 frames of 1296 x 864, slow pans across photos of the shared sample saved as PNG, in a
temporary folder; ``--quick``: 6 x 24, small enough for the pool to hold nearly all of it;
``--sequence-folder`` to use another): the project's ``data=sequence``
loader (``dataset()``, k = 3, stride 1, batch 64, patch 96, x4, default pool:
``patches_per_window`` 32, ``pool_frames`` 384, ``pool_memory_mb`` 1024, 2 decode workers)
against the naive pipeline that decodes the k frames of every sample
(``sr.bench.sequences.naive_sequence``), and the frames decoded alone (the loader's decode-bound
ceiling). Per pipeline the figures above, with frame decodes per patch, distinct sequences per
batch and the pool's peak of decoded frames against ``data.pool_frames``. Writes
``bench_sequence.json`` and ``bench_sequence.md`` into ``--out`` (the files of the full run are
left as they are).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sr.bench.folders import SHARED_SAMPLE, compose_data, reencode_png  # noqa: E402
from sr.config import PROJECT_ROOT  # noqa: E402

SUBIMAGE = 384  # data.subimage_size of the sub-image row
GEN_POOL = 64  # generator pool for the decode-bound rows: at least B, smaller than the folder
PPI_SWEEP = (16, 32, 64, 128, 256)
# name -> (label, kind, extra)
PIPELINES = {
    "tfrecord": ("project data=tfrecord", "project", ("tfrecord",)),
    "generator": ("project data=generator (default)", "project", ("generator",)),
    "generator_ppi100": (
        f"project data=generator ppi=100 pool={GEN_POOL}",
        "project",
        ("generator", "data.patches_per_image=100", f"data.pool_size={GEN_POOL}"),
    ),
    "tfrecord_1shard": (
        "project data=tfrecord, 1 shard",
        "project",
        ("tfrecord", "data.num_shards=1"),
    ),
    # issue 11: random crop positions from sub-image records (384: the folder's smallest side is
    # 426), and the LR made from RGB records (data.lr_from=rgb)
    "tfrecord_subimage": (
        "project data=tfrecord, sub-images 384",
        "project",
        ("tfrecord", f"data.subimage_size={SUBIMAGE}"),
    ),
    "tfrecord_rgb": (
        "project data=tfrecord, lr_from=rgb",
        "project",
        ("tfrecord", "data.lr_from=rgb"),
    ),
    "ref_a": ("ref (a) naive, 1 decode/patch", "ref", ()),
    "ref_b": ("ref (b) 004 generator", "ref", ()),
    "ref_c": ("ref (c) 004 TFRecord", "ref", ()),
    "ref_c_batched": ("ref (c) batch-then-map, no py_func", "ref", ()),
    "ceiling": ("in-memory ceiling", "ceiling", ()),
}

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


# ------------------------------------------------------------------------------------------------
# worker side (one pipeline per process)
# ------------------------------------------------------------------------------------------------
def _rchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar"))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
    return kb / 1024


def _build_pipeline(name: str, a):
    """(dataset, index_dataset or None, decode counter callable, loader or None)."""
    import hydra
    import tensorflow as tf

    from sr.bench import references as ref
    from sr.core.images import list_images

    files = list_images(a.folder)
    work = Path(a.work)
    if name in PIPELINES and PIPELINES[name][1] == "project" or name.startswith("gen_ppi_"):
        if name.startswith("gen_ppi_"):
            extra = (
                "generator",
                f"data.patches_per_image={name[8:]}",
                f"data.pool_size={GEN_POOL}",
            )
        else:
            extra = PIPELINES[name][2]
        if name.startswith("tfrecord_"):  # its own shard folder (built here, before the timing)
            extra = (*extra, f"data.tfrecord_dir={work / name}")
        cfg = compose_data(extra[0], a.folder, work / "data", *extra[1:])
        loader = hydra.utils.instantiate(cfg.data)
        loader.prepare()
        ds = loader.dataset()

        def decodes():  # the pool of the timed dataset() (patch_dataset() makes a new one)
            return loader.pool.decodes if hasattr(loader, "pool") else 0

        return ds, loader.patch_dataset, decodes, loader
    if name == "ref_a":
        counter = tf.Variable(0, dtype=tf.int64)
        return ref.naive(files, seed=0, decodes=counter), None, lambda: int(counter.numpy()), None
    if name == "ref_b":
        ds, source = ref.generator(files, seed=0)
        return ds, None, lambda: source.decodes, None
    if name == "ref_c":
        return ref.read_tfrecords(work / "ref_c", seed=0), None, lambda: 0, None
    if name == "ref_c_batched":
        return ref.read_tfrecords_batched(work / "ref_c", seed=0), None, lambda: 0, None
    if name == "ceiling":
        return _ceiling(a, files), None, lambda: 0, None
    raise ValueError(f"unknown pipeline {name!r}; choose from {sorted(PIPELINES)}")


def _ceiling(a, files):
    """The project's post-decode graph (``PatchSource.to_pairs``, the same tail as ``dataset()``)
    fed from uint8 HR crops already in RAM (about 4096 crops spread over every image, drawn
    independently), plus the int32 image index."""
    import hydra
    import numpy as np
    import tensorflow as tf

    from sr.core.images import load_y

    cfg = compose_data("tfrecord", a.folder, Path(a.work) / "data")
    loader = hydra.utils.instantiate(cfg.data)
    c, rng = loader.crop, np.random.default_rng(0)
    per = max(1, 4096 // len(files))
    crops, index = [], []
    for i, f in enumerate(files):
        y = load_y(f)
        for _ in range(per):
            top, left = rng.integers(y.shape[0] - c + 1), rng.integers(y.shape[1] - c + 1)
            crops.append(y[top : top + c, left : left + c, None])
            index.append(i)
    hr = tf.constant(np.stack(crops))
    image = tf.constant(np.asarray(index, np.int32))
    n = len(crops)
    ds = tf.data.Dataset.random(seed=0).batch(loader.batch_size)
    ds = ds.map(lambda r: {"hr": tf.gather(hr, r % n), "image": tf.gather(image, r % n)})
    pairs = ds.enumerate().map(
        lambda i, b: (*loader.to_pairs(b, i), b["image"]), num_parallel_calls=tf.data.AUTOTUNE
    )
    options = tf.data.Options()
    options.deterministic = False
    return pairs.with_options(options).prefetch(tf.data.AUTOTUNE)


def _timed_batches(it, batches: int, seconds: float) -> tuple[int, float, list]:
    """Pull batches for at least ``seconds`` and 2 batches, or until ``batches`` were pulled.
    Returns (patches, wall seconds, the image index arrays seen)."""
    patches, seen, t0 = 0, [], time.perf_counter()
    for k in range(batches):
        batch = next(it)
        patches += int(batch[0].shape[0])
        if len(batch) > 2:
            seen.append(batch[2].numpy())
        if k >= 1 and time.perf_counter() - t0 >= seconds:
            break
    return patches, time.perf_counter() - t0, seen


def run_worker(name: str, a) -> dict:
    import numpy as np

    from sr.bench.measures import distinct_per_batch, ideal_distinct
    from sr.core.images import list_images

    if name == "decode":
        return _decode_alone(a)
    if name.startswith("seq_"):
        return run_sequence_worker(name, a)
    n_images = len(list_images(a.folder))
    rss0 = _rss_mb()
    ds, index_ds, decodes, loader = _build_pipeline(name, a)
    shards = getattr(loader, "tfrecord_dir", None)
    t0 = time.perf_counter()
    it = iter(ds)
    first = next(it)
    first_batch_s = time.perf_counter() - t0
    batch_size = int(first[0].shape[0])
    _timed_batches(it, 10 * a.warmup, a.seconds)  # warm-up: as long as a repeat
    dec0, io0, cpu0 = decodes() or 0, _rchar(), time.process_time()
    rates, total, seen = [], 0, []
    for _ in range(a.repeats):
        patches, wall, s = _timed_batches(it, a.batches, a.seconds)
        rates.append(patches / wall)
        total += patches
        seen += s
    cpu = time.process_time() - cpu0
    io, dec = _rchar() - io0, (decodes() or 0) - dec0
    del it
    if index_ds is not None:  # the project's dataset() yields (lr, hr): indices from patch_dataset
        it = iter(index_ds())
        seen = [next(it)["image"].numpy() for _ in range(a.index_batches)]
        del it
    distinct = distinct_per_batch(np.concatenate(seen), batch_size) if seen else np.zeros(0)
    return {
        "name": name,
        "patches_per_s": rates,
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "batch_size": batch_size,
        "first_batch_s": first_batch_s,
        "patches_timed": total,
        "decodes_per_patch": dec / total,
        "bytes_read_per_patch": io / total,
        "distinct_mean": float(distinct.mean()) if len(distinct) else None,
        "distinct_min": int(distinct.min()) if len(distinct) else None,
        "distinct_batches": int(len(distinct)),
        "distinct_ideal": ideal_distinct(n_images, batch_size),
        "rss_start_mb": rss0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cpu_s_per_1000": 1000 * cpu / total,
        "shard_bytes": sum(p.stat().st_size for p in shards.glob("*.tfrecord"))
        if shards
        else None,
    }


def _decode_alone(a) -> dict:
    """Files decoded to Y alone by the generator's own decode (``load_y_pair``) on
    ``decode_workers`` threads: images/s, the generator's decode-bound rate per patch/decode."""
    from concurrent.futures import ThreadPoolExecutor

    from sr.core.images import list_images, load_y_pair

    cfg = compose_data("generator", a.folder, Path(a.work) / "data")
    files = list_images(a.folder)
    workers = int(cfg.data.decode_workers)
    rates = []
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(lambda f: load_y_pair(f, None, 4), files[: 2 * workers]))  # warm-up
        cpu0 = time.process_time()
        for r in range(a.repeats):
            chunk = [files[(r * a.decode_images + k) % len(files)] for k in range(a.decode_images)]
            t0 = time.perf_counter()
            list(ex.map(lambda f: load_y_pair(f, None, 4), chunk))
            rates.append(len(chunk) / (time.perf_counter() - t0))
        cpu = time.process_time() - cpu0
    return {
        "name": "decode",
        "images_per_s": rates,
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "workers": workers,
        "cpu_ms_per_image": 1000 * cpu / (a.repeats * a.decode_images),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _sequence_source(a):
    from sr.config import build_source

    source = build_source(compose_data("sequence", a.folder, None, *SEQ_OVERRIDES))
    source.prepare()
    return source


def run_sequence_worker(name: str, a) -> dict:
    """One sequence-mode pipeline (``seq_project``, ``seq_naive``) timed as :func:`run_worker`
    times the others, or the frames decoded alone (``seq_decode``)."""
    import numpy as np
    import tensorflow as tf

    from sr.bench.measures import distinct_per_batch, ideal_distinct
    from sr.bench.sequences import naive_sequence

    if name == "seq_decode":
        return _decode_frames_alone(a)
    rss0 = _rss_mb()
    source = _sequence_source(a)
    if name == "seq_project":
        ds = source.dataset()

        def decodes():
            return source.pool.frame_decodes
    elif name == "seq_naive":
        counter = tf.Variable(0, dtype=tf.int64)
        ds = naive_sequence(source, seed=0, decodes=counter)

        def decodes():
            return int(counter.numpy())
    else:
        raise ValueError(f"unknown sequence pipeline {name!r}; choose from {list(SEQ_PIPELINES)}")
    t0 = time.perf_counter()
    it = iter(ds)
    first = next(it)
    first_batch_s = time.perf_counter() - t0
    batch_size = int(first[0].shape[0])
    _timed_batches(it, 10 * a.warmup, a.seconds)
    dec0, io0, cpu0 = decodes(), _rchar(), time.process_time()
    rates, total, seen = [], 0, []
    for _ in range(a.repeats):
        patches, wall, got = _timed_batches(it, a.batches, a.seconds)
        rates.append(patches / wall)
        total += patches
        seen += got
    cpu = time.process_time() - cpu0
    io, dec = _rchar() - io0, decodes() - dec0
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    del it
    out = {}
    if name == "seq_project":
        pool = source.pool
        out = {
            "pool_windows": int(pool.pool_images),
            "keep_all": bool(pool.keep_all),
            "peak_frames": int(pool.peak_frames),
            "pool_frames": source.pool_frames,
            "patches_per_window": source.patches_per_window,
            "window_decodes_total": int(pool.decodes),
            "frame_decodes_total": int(pool.frame_decodes),
        }
        it = iter(source.patch_dataset())  # (lr, hr) carry no index: sequences from here
        seen = [next(it)["sequence"].numpy() for _ in range(a.index_batches)]
        del it
    distinct = distinct_per_batch(np.concatenate(seen), batch_size)
    s = source.sequences
    return {
        "name": name,
        "patches_per_s": rates,
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "batch_size": batch_size,
        "lr_shape": list(first[0].shape),
        "hr_shape": list(first[1].shape),
        "first_batch_s": first_batch_s,
        "patches_timed": total,
        "decodes_per_patch": dec / total,
        "bytes_read_per_patch": io / total,
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
        "cpu_s_per_1000": 1000 * cpu / total,
        **out,
    }


def _decode_frames_alone(a) -> dict:
    """The sequence frames decoded to Y alone by the loader's decode (``load_y``) on its
    ``decode_workers`` threads: frames/s, its decode-bound ceiling with decodes/patch."""
    from concurrent.futures import ThreadPoolExecutor

    from sr.core.images import load_y

    source = _sequence_source(a)
    files = source.sequences.files
    rates = []
    with ThreadPoolExecutor(source.decode_workers) as ex:
        list(ex.map(load_y, files[: 2 * source.decode_workers]))  # warm-up
        cpu0 = time.process_time()
        for r in range(a.repeats):
            chunk = [files[(r * a.decode_images + k) % len(files)] for k in range(a.decode_images)]
            t0 = time.perf_counter()
            list(ex.map(load_y, chunk))
            rates.append(len(chunk) / (time.perf_counter() - t0))
        cpu = time.process_time() - cpu0
    return {
        "name": "seq_decode",
        "frames_per_s": rates,
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "workers": source.decode_workers,
        "cpu_ms_per_frame": 1000 * cpu / (a.repeats * a.decode_images),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def report_sequence(res: dict) -> str:
    rows, d = res["pipelines"], res["decode"]
    proj, naive = rows["seq_project"], rows["seq_naive"]
    head = (
        "| pipeline | patches/s median (min-max) | batches/s | x naive | first batch s "
        "| frame decodes/patch | KB read/patch | distinct sequences/batch mean (min) "
        "| peak RSS MB | CPU-s/1000 patches |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for name, r in rows.items():
        m = r["median"]
        lines.append(
            f"| {SEQ_PIPELINES[name]} | {m:.0f} ({r['min']:.0f}-{r['max']:.0f}) "
            f"| {m / r['batch_size']:.2f} | {_fmt_ratio(m / naive['median'])} "
            f"| {r['first_batch_s']:.2f} | {r['decodes_per_patch']:.3f} "
            f"| {r['bytes_read_per_patch'] / 1024:.1f} "
            f"| {r['distinct_mean']:.2f} ({r['distinct_min']}) | {r['peak_rss_mb']:.0f} "
            f"| {r['cpu_s_per_1000']:.2f} |"
        )
    cap = d["median"] / max(proj["decodes_per_patch"], 1e-9)
    h, w = proj["frame_size"]
    lines += [
        "",
        f"Folder: {proj['n_sequences']} sorted sequences, {proj['n_frames']} PNG frames of "
        f"{w} x {h}, {proj['n_windows']} windows of 3 frames at stride 1; batch "
        f"{proj['batch_size']}, lr {proj['lr_shape']}, hr {proj['hr_shape']}. Independent-draw "
        f"ideal of distinct sequences per batch: {proj['distinct_ideal']:.2f}.",
        f"Project pool: {proj['pool_windows']} windows (of {proj['n_windows']}), "
        f"{proj['patches_per_window']} patches per window; peak {proj['peak_frames']} decoded "
        f"frames held against the bound data.pool_frames={proj['pool_frames']} "
        f"({'within' if proj['peak_frames'] <= proj['pool_frames'] else 'OVER'} the bound).",
        f"Frames decoded alone ({d['workers']} threads, load_y): {d['median']:.1f} frames/s "
        f"({d['min']:.1f}-{d['max']:.1f}), {d['cpu_ms_per_frame']:.1f} CPU-ms per frame; "
        f"decode-bound ceiling of the project's loader at "
        f"{proj['decodes_per_patch']:.3f} decodes/patch: {cap:.0f} patches/s "
        f"(measured {100 * proj['median'] / cap:.0f} % of it).",
        f"Ratio project / naive: {proj['median'] / naive['median']:.1f}x; frame decodes per "
        f"patch {naive['decodes_per_patch'] / max(proj['decodes_per_patch'], 1e-9):.0f}x fewer.",
    ]
    return "\n".join(lines)


def run_sequence_section(a) -> int:
    """``--sequence``: build (or take) the folder of sequences, run the sequence pipelines one
    per subprocess, write ``bench_sequence.json`` and ``.md``."""
    with tempfile.TemporaryDirectory(prefix="bench_sequence-") as tmp:
        a.work = Path(tmp)
        if a.sequence_folder is None:
            if not SHARED_SAMPLE.is_dir():
                raise SystemExit(f"{SHARED_SAMPLE} is absent: pass --sequence-folder DIR")
            from sr.bench.folders import write_sequences

            spec = SEQ_FOLDER_QUICK if a.quick else SEQ_FOLDER
            print(f"writing sequences {spec} from {SHARED_SAMPLE} into {tmp} ...", flush=True)
            t0 = time.perf_counter()
            a.folder = write_sequences(SHARED_SAMPLE, a.work / "sequences", **spec)
            print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
        else:
            a.folder, spec = a.sequence_folder, None
        res = {
            "machine": machine(),
            "folder": str(a.folder),
            "folder_spec": spec,
            "folder_mb": sum(p.stat().st_size for p in Path(a.folder).rglob("*.png")) / 2**20,
            "overrides": list(SEQ_OVERRIDES),
            "settings": {
                k: getattr(a, k)
                for k in ("quick", "repeats", "batches", "seconds", "warmup", "index_batches")
            },
        }
        print("sequence pipelines:", flush=True)
        res["pipelines"] = {n: spawn(n, a) for n in SEQ_PIPELINES}
        res["decode"] = spawn("seq_decode", a)
        res["load_avg_after"] = os.getloadavg()
    a.out.mkdir(parents=True, exist_ok=True)
    table = report_sequence(res)
    (a.out / "bench_sequence.json").write_text(json.dumps(res, indent=1))
    (a.out / "bench_sequence.md").write_text(table + "\n")
    print()
    print(table)
    print(f"\nwrote {a.out}/bench_sequence.json, bench_sequence.md")
    return 0


def build_shards(a) -> dict:
    """Build the project's shards (as ``train.py`` would on first use) and reference (c)'s."""
    import hydra

    from sr.bench import references as ref
    from sr.core.images import list_images

    work = Path(a.work)
    cfg = compose_data("tfrecord", a.folder, work / "data")
    loader = hydra.utils.instantiate(cfg.data)
    t0 = time.perf_counter()
    manifest = loader.ensure_shards()
    t1 = time.perf_counter()
    ref_c = (
        0
        if (work / "ref_c").is_dir()
        else ref.gen_tfrecords(list_images(a.folder), work / "ref_c")
    )
    return {
        "project_records": manifest["records"],
        "project_build_s": t1 - t0,
        "project_bytes": sum(
            (loader.tfrecord_dir / s["file"]).stat().st_size for s in manifest["shards"]
        ),
        "ref_c_records": ref_c,
        "ref_c_build_s": time.perf_counter() - t1,
        "ref_c_bytes": sum(p.stat().st_size for p in (work / "ref_c").glob("*.tfrecords")),
    }


# ------------------------------------------------------------------------------------------------
# driver side
# ------------------------------------------------------------------------------------------------
def spawn(name: str, a) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        name,
        "--folder",
        str(a.folder),
        "--work",
        str(a.work),
        "--batches",
        str(a.batches),
        "--repeats",
        str(a.repeats),
        "--seconds",
        str(a.seconds),
        "--warmup",
        str(a.warmup),
        "--index-batches",
        str(a.index_batches),
        "--decode-images",
        str(a.decode_images),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise RuntimeError(f"benchmark worker {name!r} failed (exit {proc.returncode}); see above")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  {name:<18} {out['median']:9.1f} /s   ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def machine() -> dict:
    import numpy
    import PIL
    import tensorflow as tf

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo")
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal")
    )
    return {
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "ram_gb": round(mem / 2**20, 1),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "numpy": numpy.__version__,
        "pillow": PIL.__version__,
        "load_avg_before": os.getloadavg(),
    }


def _fmt_ratio(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.0f}"


def report(res: dict) -> str:
    rows, ceiling = res["pipelines"], res["pipelines"]["ceiling"]["median"]
    refs = {k: rows[k]["median"] for k in ("ref_a", "ref_b", "ref_c")}
    head = (
        "| pipeline | patches/s median (min-max) | batches/s | x(a) | x(b) | x(c) | of ceiling "
        "| first batch s | decodes/patch | KB read/patch | distinct/batch mean (min) "
        "| peak RSS MB | CPU-s/1000 patches |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for name, r in rows.items():
        m, b = r["median"], r["batch_size"]
        dist = (
            "-"
            if r["distinct_mean"] is None
            else f"{r['distinct_mean']:.1f} ({r['distinct_min']})"
        )
        lines.append(
            f"| {PIPELINES[name][0]} | {m:.0f} ({r['min']:.0f}-{r['max']:.0f}) | {m / b:.1f} "
            f"| {_fmt_ratio(m / refs['ref_a'])} | {_fmt_ratio(m / refs['ref_b'])} "
            f"| {_fmt_ratio(m / refs['ref_c'])} | {100 * m / ceiling:.0f} % "
            f"| {r['first_batch_s']:.2f} | {r['decodes_per_patch']:.3f} "
            f"| {r['bytes_read_per_patch'] / 1024:.1f} | {dist} | {r['peak_rss_mb']:.0f} "
            f"| {r['cpu_s_per_1000']:.2f} |"
        )
    ideal = rows["tfrecord"]["distinct_ideal"]
    d = res["decode"]
    lines += [
        "",
        f"Independent-draw ideal of distinct images per batch of {rows['tfrecord']['batch_size']} "
        f"from {res['n_images']} images: {ideal:.1f}.",
        f"Files decoded alone ({d['workers']} threads): {d['median']:.1f} images/s "
        f"({d['min']:.1f}-{d['max']:.1f}), {d['cpu_ms_per_image']:.1f} CPU-ms per image.",
        "",
        "| patches per decode | generator patches/s median (min-max) | decode-bound ceiling "
        "| of ceiling | decodes/patch |",
        "|---|---|---|---|---|",
    ]
    for ppi, r in sorted(res["ppi_sweep"].items(), key=lambda kv: int(kv[0])):
        cap = min(d["median"] * int(ppi), ceiling)
        lines.append(
            f"| {ppi} | {r['median']:.0f} ({r['min']:.0f}-{r['max']:.0f}) | {cap:.0f} "
            f"| {100 * r['median'] / cap:.0f} % | {r['decodes_per_patch']:.4f} |"
        )
    lines += ["", "Targets:"] + [f"- {t}" for t in targets(res)]
    return "\n".join(lines)


def targets(res: dict) -> list[str]:
    rows, d = res["pipelines"], res["decode"]
    ceiling = rows["ceiling"]["median"]
    tf_, g = rows["tfrecord"], rows["generator_ppi100"]
    cap100 = min(d["median"] * 100, ceiling)

    def check(ok):
        return "MET" if ok else "MISSED"

    out = [
        f"tfrecord >= 70 % of ceiling: {100 * tf_['median'] / ceiling:.0f} % "
        f"{check(tf_['median'] >= 0.7 * ceiling)}",
        f"tfrecord >= 4x ref (c): {tf_['median'] / rows['ref_c']['median']:.1f}x "
        f"{check(tf_['median'] >= 4 * rows['ref_c']['median'])}",
        f"generator ppi=100 >= 4x ref (b): {g['median'] / rows['ref_b']['median']:.1f}x "
        f"{check(g['median'] >= 4 * rows['ref_b']['median'])}",
        f"generator ppi=100 >= 70 % of decode-bound ceiling ({cap100:.0f}/s): "
        f"{100 * g['median'] / cap100:.0f} % {check(g['median'] >= 0.7 * cap100)}",
        f"generator distinct/batch >= 60 (pool >= B): mean {g['distinct_mean']:.1f}, min "
        f"{g['distinct_min']} {check(g['distinct_min'] >= 60)}",
        f"tfrecord distinct/batch >= 90 % of ideal {tf_['distinct_ideal']:.1f}: mean "
        f"{tf_['distinct_mean']:.1f} ({100 * tf_['distinct_mean'] / tf_['distinct_ideal']:.0f} %) "
        f"{check(tf_['distinct_mean'] >= 0.9 * tf_['distinct_ideal'])}",
    ]
    return out


def charts(res: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["pipelines"]
    names = list(rows)
    med = [rows[n]["median"] for n in names]
    err = [
        [m - rows[n]["min"] for n, m in zip(names, med)],
        [rows[n]["max"] - m for n, m in zip(names, med)],
    ]
    colors = [
        "tab:blue"
        if PIPELINES[n][1] == "project"
        else "tab:gray"
        if PIPELINES[n][1] == "ref"
        else "tab:green"
        for n in names
    ]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=90)
    ax.barh([PIPELINES[n][0] for n in names], med, xerr=err, color=colors)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("patches/s (median, min-max whiskers; log scale)")
    ax.set_title(f"Input pipelines, {res['n_images']} PNGs, B=64, {res['machine']['nproc']} cores")
    for y, m in enumerate(med):
        ax.text(m * 1.05, y, f"{m:.0f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "bench_data.png")
    plt.close(fig)

    sweep = sorted(res["ppi_sweep"].items(), key=lambda kv: int(kv[0]))
    ppi = [int(k) for k, _ in sweep]
    ceiling, dec = rows["ceiling"]["median"], res["decode"]["median"]
    fig, ax = plt.subplots(figsize=(5.5, 3.4), dpi=90)
    ax.plot(ppi, [r["median"] for _, r in sweep], "o-", label="generator (measured)")
    ax.plot(ppi, [min(dec * p, ceiling) for p in ppi], "k--", label="decode-bound ceiling")
    ax.axhline(rows["ref_b"]["median"], color="tab:gray", ls=":", label="ref (b), 100/decode")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ppi, [str(p) for p in ppi])
    ax.set_xlabel("patches per decoded image")
    ax.set_ylabel("patches/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title(f"Generator mode, pool of {GEN_POOL} < {res['n_images']} images")
    fig.tight_layout()
    fig.savefig(out / "bench_ppi.png")
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--folder",
        type=Path,
        default=None,
        help="image folder (default: ../shared/datasets/hr_sample re-encoded as PNG)",
    )
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "outputs" / "bench_data")
    p.add_argument("--quick", action="store_true", help="smoke run: fewer, shorter repeats")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--batches", type=int, default=None, help="most batches per repeat")
    p.add_argument("--seconds", type=float, default=None, help="seconds per repeat")
    p.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="subset of pipelines (debugging); 'sequence': the sequence section (--sequence)",
    )
    p.add_argument(
        "--sequence",
        action="store_true",
        help="only the data=sequence section: writes bench_sequence.json and .md",
    )
    p.add_argument(
        "--sequence-folder",
        type=Path,
        default=None,
        help="folder of sorted sequences (default: 32 x 40 frames of 1296 x 864 from real photos)",
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--warmup", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--index-batches", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--decode-images", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    quick = a.quick
    for key, full, fast in (
        ("repeats", 5, 2),
        ("batches", 5000, 1000),
        ("seconds", 2.5, 0.7),
        ("warmup", 6, 3),
        ("index_batches", 100, 20),
        ("decode_images", 40, 12),
    ):
        if getattr(a, key) is None:
            setattr(a, key, fast if quick else full)
    if a.worker:
        result = build_shards(a) if a.worker == "build" else run_worker(a.worker, a)
        print(json.dumps(result))
        return 0
    if a.sequence or a.only == ["sequence"]:
        return run_sequence_section(a)

    with tempfile.TemporaryDirectory(prefix="bench_data-") as tmp:
        a.work = Path(tmp)
        if a.folder is None:
            if not SHARED_SAMPLE.is_dir():
                p.error(f"{SHARED_SAMPLE} is absent: pass --folder DIR")
            print(f"re-encoding {SHARED_SAMPLE} as PNG into {tmp}/png ...", flush=True)
            a.folder = reencode_png(SHARED_SAMPLE, a.work / "png")
        from sr.core.images import list_images

        a.out.mkdir(parents=True, exist_ok=True)
        res = {
            "machine": machine(),
            "folder": str(a.folder),
            "n_images": len(list_images(a.folder)),
            "settings": {
                k: getattr(a, k)
                for k in ("quick", "repeats", "batches", "seconds", "warmup", "index_batches")
            },
        }
        print(f"building shards (project and reference (c)) in {tmp} ...", flush=True)
        res["build"] = spawn_build(a)
        names = [n for n in PIPELINES if not a.only or n in a.only]
        print("pipelines:", flush=True)
        res["pipelines"] = {n: spawn(n, a) for n in names}
        res["decode"] = spawn("decode", a)
        sweep = PPI_SWEEP if not quick else (16, 100, 256)
        res["ppi_sweep"] = {str(k): spawn(f"gen_ppi_{k}", a) for k in sweep if not a.only}
        res["load_avg_after"] = os.getloadavg()
    if a.only:
        print(json.dumps(res, indent=1))
        return 0
    table = report(res)
    (a.out / "bench_data.json").write_text(json.dumps(res, indent=1))
    (a.out / "bench_data.md").write_text(table + "\n")
    charts(res, a.out)
    print()
    print(table)
    print(f"\nwrote {a.out}/bench_data.json, bench_data.md, bench_data.png, bench_ppi.png")
    return 0


def spawn_build(a) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        "build",
        "--folder",
        str(a.folder),
        "--work",
        str(a.work),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise RuntimeError("building the shards failed; see above")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
