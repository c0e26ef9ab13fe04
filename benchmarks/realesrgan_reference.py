"""How fast is the NumPy/OpenCV reference of Real-ESRGAN's degradation, one crop at a time as a
PyTorch ``DataLoader`` worker runs BasicSR's code, against the graph's rows of
``scripts/bench_data.py --degradation``?

The reference is the test oracle ``tests/oracles/realesrgan.py`` (NumPy, SciPy and OpenCV; the
graph is tested against it), timed as ``bench_degradation()`` gives it: the HR sharpened first
(``gt_usm``), OpenCV on one thread per process. Its rows ``deg_reference_1`` and
``deg_reference_<cores>`` degrade 512 crops of 112 pixels (the 96 patch and its 8-pixel margin)
of the same folder at x4, in 1 and in as many forked processes as the machine has cores
(``sr.bench.degradation_runs.reference_row``), are added to ``bench_degradation.json`` of
``--out`` and ``bench_degradation.md`` is written again with each row's ratio to the reference:

    python scripts/bench_data.py --degradation --out outputs/bench_data
    python -m benchmarks.realesrgan_reference --out outputs/bench_data

Run from the project root (``python -m``: it imports the oracle from ``tests/``, which no user
command needs). Needs OpenCV (``pip install -e ".[test]"``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from sr.bench.degradation_runs import REFERENCE_ROWS, reference_row, report_degradation
from sr.bench.folders import SHARED_SAMPLE, reencode_png
from sr.config import PROJECT_ROOT
from tests.oracles.realesrgan import bench_degradation


def reference_rows(folder: Path) -> dict[str, dict]:
    """The rows of :data:`REFERENCE_ROWS`, each timed on crops of ``folder``."""
    rows = {}
    for name in REFERENCE_ROWS:
        rows[name] = reference_row(folder, int(name.rsplit("_", 1)[1]), bench_degradation())
        print(f"  {name:<18} {rows[name]['median']:9.1f} /s", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "outputs" / "bench_data")
    p.add_argument(
        "--folder",
        type=Path,
        help="image folder (default: ../shared/datasets/hr_sample re-encoded as PNG)",
    )
    a = p.parse_args(argv)
    result = a.out / "bench_degradation.json"
    if not result.is_file():
        p.error(f"{result} is absent: run scripts/bench_data.py --degradation --out {a.out}")
    res = json.loads(result.read_text())
    with tempfile.TemporaryDirectory(prefix="realesrgan_reference-") as tmp:
        folder = a.folder or reencode_png(SHARED_SAMPLE, Path(tmp) / "png")
        res["pipelines"].update(reference_rows(folder))
    result.write_text(json.dumps(res, indent=1))
    table = report_degradation(res)
    (a.out / "bench_degradation.md").write_text(table + "\n")
    print(f"\n{table}\n\nwrote {result}, {a.out / 'bench_degradation.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
