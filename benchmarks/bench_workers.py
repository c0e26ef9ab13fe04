"""Data-wait of one worker against two local workers (``train.strategy=multi_worker``).

    python benchmarks/bench_workers.py                     # ~6 min on 2 cores
    python benchmarks/bench_workers.py --steps 40 --folder DIR --mode generator

Runs the real ``train.py`` on the same data and model: once as one process (the default
strategy, global batch B), once as two worker processes on 127.0.0.1 (``TF_CONFIG``, global batch
B, each worker a replica of B / 2 reading its own half of the data). Prints each run's mean step
time, data-wait and its share of the step (the ``final step`` line of ``train.py``; the chief's
for the cluster), and the machine's CPU count and flags. On one machine the two workers share
its cores, so this measures the cost of the second input pipeline and the all-reduce, not a
speed-up. Default folder: the first 16 photos of ``../shared/datasets/hr_sample`` as PNG.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from sr.bench.folders import SHARED_SAMPLE, reencode_png
from sr.config import PROJECT_ROOT
from sr.train.distribute import local_cluster

FINAL = re.compile(r"mean step ([\d.]+) ms, data-wait ([\d.]+) ms \(([\d.]+)% of step time\)")


def cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = next(line for line in text.splitlines() if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    return " ".join(f for f in ("avx2", "fma", "avx512f") if f in flags) or "no AVX2"


def command(a, run_dir: Path, *extra: str) -> list[str]:
    cmd = [
        sys.executable,
        str(PROJECT_ROOT / "train.py"),
        f"data={a.mode}",
        f"data.hr_dir={a.folder}",
        "data.val_dir=null",
        f"data.batch_size={a.batch}",
        f"train.steps={a.steps}",
        f"train.log_every={a.steps}",
        f"train.ckpt_every={10 * a.steps}",
        f"hydra.run.dir={run_dir}",
        *extra,
    ]
    if a.mode == "tfrecord":
        cmd += [f"data.data_root={a.work / 'root'}", "data.num_shards=4", "data.stride=128"]
    return cmd


def final_line(out: str) -> dict:
    m = FINAL.search(out)
    if not m:
        raise RuntimeError(f"no final line in the output:\n{out[-3000:]}")
    return {"step_ms": float(m[1]), "data_wait_ms": float(m[2]), "share_pct": float(m[3])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folder", type=Path)
    p.add_argument("--mode", default="tfrecord", choices=("tfrecord", "generator"))
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args()
    a.work = Path(tempfile.mkdtemp(prefix="bench_workers-"))
    if a.folder is None:
        sample = a.work / "sample"
        sample.mkdir()
        for f in sorted(SHARED_SAMPLE.iterdir())[:16]:
            os.symlink(f, sample / f.name)
        a.folder = reencode_png(sample, a.work / "png")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    one = subprocess.run(
        command(a, a.work / "one"), capture_output=True, text=True, env=env, check=False
    )
    res = {"one worker": final_line(one.stdout + one.stderr)}
    procs = [
        subprocess.Popen(
            command(a, a.work / "two", "train.strategy=multi_worker"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(env, TF_CONFIG=conf),
        )
        for conf in local_cluster(2)
    ]
    outs = [proc.communicate()[0] for proc in procs]
    res["two local workers"] = final_line(outs[0])
    print(
        f"{os.cpu_count()} CPUs ({cpu_flags()}), data={a.mode}, ESPCN, global batch {a.batch}, "
        f"{a.steps} steps"
    )
    print("| run | mean step ms | data-wait ms | data-wait share |")
    print("| --- | --- | --- | --- |")
    for name, r in res.items():
        print(
            f"| {name} | {r['step_ms']:.1f} | {r['data_wait_ms']:.2f} | {r['share_pct']:.1f} % |"
        )


if __name__ == "__main__":
    main()
