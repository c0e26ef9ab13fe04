"""The 20-minute recipe on several seeds, at a quarter of its budget, and at twice its learning
rate: is it stable, and does the divergence guard catch and recover a run that is not (issue 20)?

    python benchmarks/recipe_seeds.py --runs outputs/recipe_seeds            # train, score, table
    python benchmarks/recipe_seeds.py --runs outputs/recipe_seeds --which full quarter
    python benchmarks/recipe_seeds.py --runs outputs/recipe_seeds --table    # table only
    python benchmarks/recipe_seeds.py --experiment cpu20_holdout --which full --runs outputs/h

``--experiment`` picks the recipe (``experiment=<name>``, default ``cpu20_hr_sample``); the
table's validation column is the best validation PSNR of the run's log, on the recipe's own
validation images (Set5 for ``cpu20_hr_sample``, held-out training photos for
``cpu20_holdout``).

Runs, one after the other (each needs the machine to itself: the recipe is a time budget), each
``python train.py experiment=cpu20_hr_sample seed=S hydra.run.dir=<runs>/<name>`` then
``python scripts/evaluate.py <run> Set5 Set14 --checkpoint best`` and ``--checkpoint last``:

- ``full``: seeds 0, 1, 2 at the recipe's budget (19.5 minutes; runs ``seed<S>``);
- ``quarter``: the same seeds at a quarter of it (``train.max_minutes=4.875``; ``q_seed<S>``);
- ``lr2x``: seed 0 at twice the recipe's learning rate (``lr2x``), to show the guard at work.

A run that already ended (``<run>/done``) is not trained again, so the study can be resumed.
Prints a markdown table: per run the steps reached, the guard's rollbacks, the exit code, the
step of ``checkpoints/best`` and its Set5 and Set14 PSNR / SSIM (Y of BT.601, MATLAB bicubic LR,
4-pixel border crop), and those of ``last``; then mean and standard deviation over the seeds of
``full`` and of ``quarter``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = [ROOT.parent / "shared" / "datasets" / name for name in ("Set5", "Set14")]
QUARTER = 19.5 / 4  # minutes
STEPS = re.compile(r"steps reached: (\d+) of")
ROLLBACK = re.compile(r"divergence guard: (.*?)\. Rollback (\d+) of")
VALIDATION = re.compile(r"validation step \d+ on \d+ images: PSNR ([\d.]+) dB")


def plan(which: list[str], seeds: list[int], lr: float) -> list[tuple[str, list[str]]]:
    """``(run name, overrides)`` of each run of the study."""
    runs = []
    if "full" in which:
        runs += [(f"seed{s}", [f"seed={s}"]) for s in seeds]
    if "quarter" in which:
        runs += [(f"q_seed{s}", [f"seed={s}", f"train.max_minutes={QUARTER}"]) for s in seeds]
    if "lr2x" in which:
        runs += [("lr2x", [f"seed={seeds[0]}", f"train.lr={2 * lr:g}"])]
    return runs


def train_and_score(runs: Path, name: str, overrides: list[str], experiment: str) -> None:
    """Train one run (unless it ended) and score its best and last checkpoints."""
    run = runs / name
    if (run / "done").is_file():
        return
    cmd = [sys.executable, "train.py", f"experiment={experiment}", f"hydra.run.dir={run}"]
    with open(runs / f"{name}.out", "w") as out:
        code = subprocess.run([*cmd, *overrides], cwd=ROOT, stdout=out, stderr=out).returncode
    (runs / f"{name}.exit").write_text(f"exit {code}\n")
    for which in ("best", "last"):
        subprocess.run(
            [sys.executable, "scripts/evaluate.py", str(run), *map(str, SETS), "--checkpoint",
             which, "--no-progress", "--out", str(run / f"eval-{which}")],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
    (run / "done").touch()


def summary(runs: Path, name: str) -> dict:
    """What one ended run reached: steps, rollbacks, exit code, scores of best and last."""
    log = (runs / f"{name}.out").read_text()
    row = {
        "name": name,
        "steps": int(STEPS.findall(log)[-1]) if STEPS.search(log) else None,
        "rollbacks": ROLLBACK.findall(log),
        "exit": (runs / f"{name}.exit").read_text().split()[-1],
        "val": max(map(float, VALIDATION.findall(log)), default=float("nan")),
    }
    for which in ("best", "last"):
        res = json.loads((runs / name / f"eval-{which}" / "results.json").read_text())
        row[which] = {k: (v["psnr"], v["ssim"]) for k, v in res.items()}
        row[f"{which}_step"] = next(iter(res.values()))["step"]
    return row


def mean_sd(values: list[float], digits: int) -> str:
    if len(values) < 2:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def table(rows: list[dict]) -> str:
    """The markdown table of the runs, then mean ± standard deviation per group of seeds."""
    head = (
        "| run | steps reached | rollbacks | exit | best: step | validation: best PSNR | "
        "best: Set5 PSNR / SSIM | best: Set14 PSNR / SSIM | last: Set5 / Set14 PSNR |\n"
        "| --- |" + " ---: |" * 8
    )
    lines = [head]
    for r in rows:
        b, last = r["best"], r["last"]
        lines.append(
            f"| `{r['name']}` | {r['steps']:,} | {len(r['rollbacks'])} | {r['exit']} | "
            f"{r['best_step']:,} | {r['val']:.2f} | {b['Set5'][0]:.2f} / {b['Set5'][1]:.4f} | "
            f"{b['Set14'][0]:.2f} / {b['Set14'][1]:.4f} | "
            f"{last['Set5'][0]:.2f} / {last['Set14'][0]:.2f} |"
        )
    for prefix, label in (("seed", "19.5 min"), ("q_seed", "4.875 min")):
        group = [r for r in rows if re.fullmatch(rf"{prefix}\d+", r["name"])]
        if not group:
            continue
        col = {
            key: mean_sd([r["best"][s][i] for r in group], 2 if i == 0 else 4)
            for key, (s, i) in {"p5": ("Set5", 0), "s5": ("Set5", 1), "p14": ("Set14", 0),
                                "s14": ("Set14", 1)}.items()
        }  # fmt: skip
        lines.append(
            f"| **mean ± sd, {len(group)} seeds, {label}** | "
            f"{mean_sd([float(r['steps']) for r in group], 0)} | "
            f"{sum(len(r['rollbacks']) for r in group)} | | | "
            f"{mean_sd([r['val'] for r in group], 2)} | {col['p5']} / {col['s5']} | "
            f"{col['p14']} / {col['s14']} | |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True, help="folder of the study's runs")
    parser.add_argument("--which", nargs="+", default=["full", "lr2x", "quarter"],
                        choices=["full", "quarter", "lr2x"])  # fmt: skip
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--lr", type=float, default=2e-3, help="the recipe's learning rate")
    parser.add_argument("--experiment", default="cpu20_hr_sample", help="the recipe: experiment=")
    parser.add_argument("--table", action="store_true", help="only tabulate the ended runs")
    args = parser.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    runs = plan(args.which, args.seeds, args.lr)
    if not args.table:
        for name, overrides in runs:
            train_and_score(args.runs, name, overrides, args.experiment)
    rows = [summary(args.runs, n) for n, _ in runs if (args.runs / n / "done").is_file()]
    print(table(rows))
    for r in rows:
        for reason, k in r["rollbacks"]:
            print(f"- `{r['name']}` rollback {k}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
