"""How long the README's commands take on this machine: the figures the README states.

Measures, each as a subprocess run from the project root and timed from process start to exit:

- ``main``: ``python train.py`` (the README's first command: ESPCN, 5000 steps, the demo photos)
  in a fresh temporary run directory (``hydra.run.dir=<tmp>``, removed afterwards). From its
  ``train.log`` also: the start-up (process start to the "training ... for N steps" line: imports,
  demo photos, TFRecord shards, model), the time to the first timing line (step 100, tracing
  included), and the final line's mean step and data-wait over the whole run. Warm by default:
  reads ``data/demo`` and its shards ``data/tfrecords/train-<hash>`` (a run finding them missing
  builds them and is reported cold). ``--cold``: as on a fresh machine, the demo photos and their
  shards are written afresh, into the temporary folder (``demo_dir``, ``data.hr_dir``,
  ``data.val_dir``, ``data.data_root`` pointed there), so that ``data/demo``, which other runs
  may be reading, is neither deleted nor rebuilt.
- ``fast``: ``python -m pytest -q -m "not slow"``; ``full``: ``python -m pytest -q``, with the
  tests passed of those selected (pytest's summary line).

Prints the machine (CPU model, logical cores, AVX-512, TensorFlow, date, load averages before and
after) and one row per figure; with ``--repeat N`` > 1 the min/median/max wall time. Other work
on the machine slows the figures: compare the load averages with the core count.

    python benchmarks/readme_figures.py                     # main, fast and full (~25 minutes)
    python benchmarks/readme_figures.py --only main --cold  # also --only fast, --only full
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"
TESTS = {
    "fast": ["-m", "pytest", "-q", "-m", "not slow"],
    "full": ["-m", "pytest", "-q"],
}
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
TRAINING = re.compile(r"\] - training \S+ for \d+ steps from step")
FIRST_STEP = re.compile(r"\] - \[[\d:.]+\] step (\d+)/\d+ ")


def cpu_info(text: str) -> dict:
    """Model name, logical cores and AVX-512 (flag ``avx512f``) from /proc/cpuinfo's text."""
    models = re.findall(r"^model name\s*:\s*(.+?)\s*$", text, re.M)
    flags = re.search(r"^flags\s*:(.*)$", text, re.M)
    return {
        "model": models[0] if models else "unknown CPU",
        "cores": len(re.findall(r"^processor\s*:", text, re.M)),
        "avx512": bool(flags and "avx512f" in flags.group(1).split()),
    }


def pytest_summary(text: str) -> tuple[int, int, str]:
    """(passed, selected, summary line) from pytest's output: its last line with counts and
    `` in <seconds>s``; selected counts every outcome but ``deselected`` (and warnings)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip("= ")
        if re.search(r"\bin [\d.]+s\b", line) and re.search(r"\d+ \w+", line):
            counts = {k: int(n) for n, k in re.findall(r"(\d+) (\w+)", line.split(" in ")[0])}
            selected = sum(
                n for k, n in counts.items() if k not in ("deselected", "warning", "warnings")
            )
            return counts.get("passed", 0), selected, line
    raise ValueError("no pytest summary line in the output")


def log_seconds(log: str, start: float, pattern: re.Pattern) -> float | None:
    """Seconds from ``start`` (epoch) to the first train.log line matching ``pattern``."""
    for line in log.splitlines():
        stamp = LOG_TIME.match(line)
        if stamp and pattern.search(line):
            t = datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            return t - start
    return None


def demo_shards() -> Path:
    """The default TFRecord shard folder of ``data/demo/train`` (sr.data.tfrecord.source)."""
    digest = hashlib.sha1(str((DEMO / "train").resolve()).encode()).hexdigest()[:8]
    return ROOT / "data" / "tfrecords" / f"train-{digest}"


def timed(cmd: list[str]) -> tuple[float, float, int, str]:
    """(epoch start, wall seconds, exit code, stdout + stderr) of ``cmd`` run in ROOT."""
    start, t0 = time.time(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return start, time.perf_counter() - t0, proc.returncode, proc.stdout + proc.stderr


def run_main(cold: bool) -> dict:
    warm = (DEMO / "train").is_dir() and (demo_shards() / "manifest.json").is_file()
    tmp = Path(tempfile.mkdtemp(prefix="readme_figures-"))
    args = ["hydra.run.dir=<tmp>/run"]
    if cold:  # the same work as a first run, out of the way of runs reading data/demo
        args += ["demo_dir=<tmp>/demo", "data.hr_dir=<tmp>/demo/train"]
        args += ["data.val_dir=<tmp>/demo/val", "data.data_root=<tmp>"]
    try:
        cmd = [sys.executable, "train.py", *(a.replace("<tmp>", str(tmp)) for a in args)]
        start, wall, code, out = timed(cmd)
        log_file = tmp / "run" / "train.log"
        log = log_file.read_text() if log_file.is_file() else out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    first = FIRST_STEP.search(log)
    psnr = re.search(r"val PSNR ([\d.]+) dB vs bicubic ([\d.]+) dB", log)
    wait = re.search(r"mean step ([\d.]+) ms, data-wait ([\d.]+) ms \(([\d.]+)% of step", log)
    note = f"val PSNR {psnr.group(1)} dB vs bicubic {psnr.group(2)}" if psnr else ""
    if wait:  # the final line's figures over the whole run
        note += f"; mean step {wait.group(1)} ms, data-wait {wait.group(2)} ms ({wait.group(3)} %)"
    return {
        "command": " ".join(["python train.py", *args]),
        "state": "warm" if warm and not cold else "cold",
        "wall": wall,
        "code": code,
        "startup": log_seconds(log, start, TRAINING),
        "first": (first.group(1), log_seconds(log, start, FIRST_STEP)) if first else None,
        "note": note,
    }


def run_tests(which: str) -> dict:
    _, wall, code, out = timed([sys.executable, *TESTS[which]])
    try:
        passed, selected, line = pytest_summary(out)
    except ValueError:
        passed, selected, line = 0, 0, (out.strip().splitlines() or ["no output"])[-1]
    shown = " ".join(f"'{a}'" if " " in a else a for a in TESTS[which])
    if code != 0:  # what failed, on stderr: the figure alone would not say
        failures = [x for x in out.splitlines() if x.startswith(("FAILED", "ERROR", "E   "))]
        print("\n".join(failures[-60:]), file=sys.stderr, flush=True)
    return {
        "command": f"python {shown}",
        "wall": wall,
        "code": code,
        "tests": f"{passed}/{selected} passed",
        "note": line,
    }


def minutes(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds / 60:.1f} min ({int(seconds // 60)}m {seconds % 60:04.1f}s)"


def detail(r: dict) -> str:
    if "tests" in r:
        return f"{r['tests']} ({r['note']})"
    parts = [r["state"], f"start-up (to the training loop) {minutes(r['startup'])}"]
    if r["first"]:
        parts.append(f"to step {r['first'][0]} {minutes(r['first'][1])}")
    return "; ".join(parts + ([r["note"]] if r["note"] else []))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=("main", "fast", "full"))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--cold", action="store_true", help="build the demo data afresh (in a tmp dir)"
    )
    args = ap.parse_args()
    cpu = cpu_info(Path("/proc/cpuinfo").read_text())
    print(
        f"machine: {cpu['model']}, {cpu['cores']} logical cores, "
        f"AVX-512 {'yes' if cpu['avx512'] else 'no'}; TensorFlow "
        f"{importlib.metadata.version('tensorflow')}; Python {sys.version.split()[0]}; "
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}; cwd {ROOT}\n"
    )
    print(
        "| figure | command | wall (process start to exit) | details | load avg 1/5/15 min "
        "before -> after |\n|---|---|---|---|---|"
    )
    failed = False
    for which in args.only or ["main", "fast", "full"]:
        walls = []
        for i in range(args.repeat):
            load = os.getloadavg()
            r = run_main(args.cold) if which == "main" else run_tests(which)
            after = os.getloadavg()
            failed |= r["code"] != 0
            code = "" if r["code"] == 0 else f", exit {r['code']}"
            loads = (
                f"{' '.join(f'{x:.2f}' for x in load)} -> {' '.join(f'{x:.2f}' for x in after)}"
            )
            print(
                f"| {which} {i + 1}/{args.repeat} | `{r['command']}` | {minutes(r['wall'])}"
                f"{code} | {detail(r)} | {loads} |",
                flush=True,
            )
            walls.append(r["wall"])
        if args.repeat > 1:
            print(
                f"| {which} min/median/max | | {minutes(min(walls))} / "
                f"{minutes(statistics.median(walls))} / {minutes(max(walls))} | | |"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
