"""Input-pipeline benchmark: the project's loaders against the reference pipelines and ceilings.

    python scripts/bench_data.py                  # full run (~10 min on 2 cores)
    python scripts/bench_data.py --quick          # smoke run (~2 min)
    python scripts/bench_data.py --folder DIR --out outputs/bench
    python scripts/bench_data.py --sequence       # data=sequence only (~5 min; = --only sequence)
    python scripts/bench_data.py --degradation    # degradation=realesrgan against bicubic (~6 min)
    python -m benchmarks.realesrgan_reference     # then the NumPy/OpenCV reference's rows

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

The pipelines and their timing are in ``sr.bench.pipeline_runs``, ``sr.bench.sequence_runs`` and
``sr.bench.timing``, the tables and charts in ``sr.bench.pipeline_report``; this command runs
each pipeline in its own subprocess (``--worker NAME``) and writes the files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sr.bench.folders import SHARED_SAMPLE, reencode_png
from sr.bench.pipeline_runs import PIPELINES, PPI_SWEEP
from sr.bench.sequence_runs import (
    SEQ_FOLDER,
    SEQ_FOLDER_QUICK,
    SEQ_OVERRIDES,
    SEQ_PIPELINES,
)
from sr.config import PROJECT_ROOT
from sr.core.quiet import quiet_tensorflow

# (flag, full run, --quick) of the settings passed on to every worker
SETTINGS = (
    ("repeats", 5, 2),
    ("batches", 5000, 1000),
    ("seconds", 2.5, 0.7),
    ("warmup", 6, 3),
    ("index_batches", 100, 20),
    ("decode_images", 40, 12),
)
REPORTED = ("quick", "repeats", "batches", "seconds", "warmup", "index_batches")


def run_worker(name: str, a) -> dict:
    """One pipeline in this process (``--worker NAME``): its row of the JSON."""
    if name == "build":
        from sr.bench.pipeline_runs import build_shards

        return build_shards(a)
    if name.startswith("seq_"):
        from sr.bench.sequence_runs import run_sequence_worker

        return run_sequence_worker(name, a)
    if name.startswith("deg_"):
        from sr.bench.degradation_runs import run_deg_worker

        return run_deg_worker(name, a)
    from sr.bench.pipeline_runs import run_worker as run_pipeline

    return run_pipeline(name, a)


def spawn(name: str, a) -> dict:
    """Run pipeline ``name`` in its own process with the run's settings; returns its row."""
    cmd = [sys.executable, __file__, "--worker", name, "--folder", str(a.folder)]
    cmd += ["--work", str(a.work)]
    for key, _, _ in SETTINGS:
        cmd += ["--" + key.replace("_", "-"), str(getattr(a, key))]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise RuntimeError(f"benchmark worker {name!r} failed (exit {proc.returncode}); see above")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  {name:<18} {out['median']:9.1f} /s   ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def spawn_build(a) -> dict:
    """Build the shards (project and reference (c)) in their own process."""
    cmd = [sys.executable, __file__, "--worker", "build", "--folder", str(a.folder)]
    cmd += ["--work", str(a.work)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise RuntimeError("building the shards failed; see above")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_sequence_section(a) -> int:
    """``--sequence``: build (or take) the folder of sequences, run the sequence pipelines one
    per subprocess, write ``bench_sequence.json`` and ``.md``."""
    from sr.bench.pipeline_report import machine, report_sequence

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
            "settings": {k: getattr(a, k) for k in REPORTED},
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


def run_degradation_section(a, p) -> int:
    """``--degradation``: the rows of ``sr.bench.degradation_runs``, each in its own process, on
    ``--folder`` (default: the shared sample as PNG); writes ``bench_degradation.json``/``.md``."""
    from sr.bench.degradation_runs import ALL_DEG_ROWS, report_degradation
    from sr.bench.pipeline_report import machine
    from sr.core.images import list_images

    with tempfile.TemporaryDirectory(prefix="bench_degradation-") as tmp:
        a.work = Path(tmp)
        if a.folder is None:
            if not SHARED_SAMPLE.is_dir():
                p.error(f"{SHARED_SAMPLE} is absent: pass --folder DIR")
            a.folder = reencode_png(SHARED_SAMPLE, a.work / "png")
        res = {
            "machine": machine(),
            "folder": str(a.folder),
            "n_images": len(list_images(a.folder)),
        }
        print("degradation rows:", flush=True)
        rows = [n for n in ALL_DEG_ROWS if not a.only or n in a.only]
        res["pipelines"] = {n: spawn(n, a) for n in rows}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "bench_degradation.json").write_text(json.dumps(res, indent=1))
    if not a.only:
        table = report_degradation(res)
        (a.out / "bench_degradation.md").write_text(table + "\n")
        print(f"\n{table}\n\nwrote {a.out}/bench_degradation.json, bench_degradation.md")
    return 0


def run_images(a, p) -> dict:
    """The image pipelines, the files decoded alone and the sweep, each in its own process, on
    ``--folder`` (default: the shared sample re-encoded as PNG into a temporary folder)."""
    from sr.bench.pipeline_report import machine
    from sr.core.images import list_images

    with tempfile.TemporaryDirectory(prefix="bench_data-") as tmp:
        a.work = Path(tmp)
        if a.folder is None:
            if not SHARED_SAMPLE.is_dir():
                p.error(f"{SHARED_SAMPLE} is absent: pass --folder DIR")
            print(f"re-encoding {SHARED_SAMPLE} as PNG into {tmp}/png ...", flush=True)
            a.folder = reencode_png(SHARED_SAMPLE, a.work / "png")
        a.out.mkdir(parents=True, exist_ok=True)
        res = {
            "machine": machine(),
            "folder": str(a.folder),
            "n_images": len(list_images(a.folder)),
            "settings": {k: getattr(a, k) for k in REPORTED},
        }
        print(f"building shards (project and reference (c)) in {tmp} ...", flush=True)
        res["build"] = spawn_build(a)
        names = [n for n in PIPELINES if not a.only or n in a.only]
        print("pipelines:", flush=True)
        res["pipelines"] = {n: spawn(n, a) for n in names}
        res["decode"] = spawn("decode", a)
        sweep = PPI_SWEEP if not a.quick else (16, 100, 256)
        res["ppi_sweep"] = {str(k): spawn(f"gen_ppi_{k}", a) for k in sweep if not a.only}
        res["load_avg_after"] = os.getloadavg()
    return res


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--folder",
        type=Path,
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
        help="folder of sorted sequences (default: 32 x 40 frames of 1296 x 864 from real photos)",
    )
    p.add_argument("--degradation", action="store_true", help="only the degradation section")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--warmup", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--index-batches", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--decode-images", type=int, default=None, help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    p = parser()
    a = p.parse_args(argv)
    quiet_tensorflow()  # the command line is parsed: TensorFlow, its INFO lines hidden
    for key, full, fast in SETTINGS:
        if getattr(a, key) is None:
            setattr(a, key, fast if a.quick else full)
    if a.worker:
        print(json.dumps(run_worker(a.worker, a)))
        return 0
    if a.sequence or a.only == ["sequence"]:
        return run_sequence_section(a)
    if a.degradation:
        return run_degradation_section(a, p)
    res = run_images(a, p)
    if a.only:
        print(json.dumps(res, indent=1))
        return 0
    from sr.bench.pipeline_report import charts, report

    table = report(res)
    (a.out / "bench_data.json").write_text(json.dumps(res, indent=1))
    (a.out / "bench_data.md").write_text(table + "\n")
    charts(res, a.out)
    print()
    print(table)
    print(f"\nwrote {a.out}/bench_data.json, bench_data.md, bench_data.png, bench_ppi.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
