"""Does a model trained on Real-ESRGAN's degradations beat the bicubic-trained one on degraded
input, and what does it give up on bicubic input (issue 21)?

    python benchmarks/realworld_study.py --runs outputs/realworld                 # all of it
    python benchmarks/realworld_study.py --runs outputs/realworld --y-runs DIR    # reuse Y runs
    python benchmarks/realworld_study.py --runs outputs/realworld --table         # table only

Both models are the 20-minute recipe (``experiment=cpu20_hr_sample``: EDSR 8 x 48 on the 80
photos of ``../shared/datasets/hr_sample``) at ``--minutes`` of training (default a quarter of
its budget, 4.875), one run per seed (``--seeds``, default 0 1 2), each run alone on the machine:

- ``rgb_realesrgan_seed<S>``: ``degradation=realesrgan data.channels=rgb`` (an RGB model);
- ``y_bicubic_seed<S>``: the recipe as it is (a Y model, bicubic LR); with ``--y-runs DIR`` the
  runs ``DIR/q_seed<S>`` of ``benchmarks/recipe_seeds.py`` (the same command) are scored instead.

Two fixed LR sets of Set14 are written first with ``scripts/evaluate.py bicubic ... --save-lr``:
``lr/set14_bicubic`` (``--degradation bicubic``: the literature's LR) and
``lr/set14_realesrgan`` (``--degradation realesrgan --seed 0``). Every run's best checkpoint is
scored on both with ``--lr-dir`` (Y PSNR / SSIM of the literature's protocol, 4 border pixels
cropped). Prints a markdown table: per run and per set PSNR / SSIM, bicubic's, then mean and
standard deviation over the seeds of each model and the difference between the models.
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
SET14 = ROOT.parent / "shared" / "datasets" / "Set14"
SETS = {"bicubic": ("bicubic", "0"), "realesrgan": ("realesrgan", "0")}  # name: (degr., seed)
STEPS = re.compile(r"steps reached: (\d+) of")
MODELS = {
    "rgb_realesrgan": ["degradation=realesrgan", "data.channels=rgb"],
    "y_bicubic": [],
}


def run(cmd: list[str], log: Path | None = None) -> int:
    """Run ``cmd`` from the project root, its output into ``log`` (or captured, checked)."""
    if log is None:
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
        return 0
    with open(log, "w") as out:
        return subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=out).returncode


def lr_sets(runs: Path) -> dict[str, Path]:
    """Write the fixed LR sets of Set14 (unless written): ``{set name: folder}``."""
    folders = {}
    for name, (degradation, seed) in SETS.items():
        folder = runs / "lr" / f"set14_{name}"
        if not folder.is_dir():
            run([sys.executable, "scripts/evaluate.py", "bicubic", str(SET14), "--scale", "4",
                 "--degradation", degradation, "--seed", seed, "--save-lr", str(folder),
                 "--out", str(runs / "lr" / f"eval_{name}"), "--no-progress"])  # fmt: skip
        folders[name] = folder
    return folders


def train(runs: Path, name: str, overrides: list[str], seed: int, minutes: float) -> Path:
    """Train one run of the recipe (unless it ended) and return its folder."""
    folder = runs / name
    if not (folder / "done").is_file():
        cmd = [sys.executable, "train.py", "experiment=cpu20_hr_sample", f"seed={seed}",
               f"train.max_minutes={minutes}", f"hydra.run.dir={folder}", *overrides]  # fmt: skip
        code = run(cmd, runs / f"{name}.out")
        if code:
            raise SystemExit(f"{name} exited {code}: see {runs / f'{name}.out'}")
        (folder / "done").touch()
    return folder


def score(folder: Path, sets: dict[str, Path]) -> dict:
    """``{set: (psnr, ssim, bicubic psnr, bicubic ssim)}`` of a run's best checkpoint, and
    ``"steps"``: the steps the run reached in its budget (its ``train.log``)."""
    reached = STEPS.findall((folder / "train.log").read_text())
    out: dict = {"steps": int(reached[-1]) if reached else 0}
    for name, lr in sets.items():
        dest = folder / f"eval-set14-{name}"
        if not (dest / "results.json").is_file():
            cmd = [sys.executable, "scripts/evaluate.py", str(folder), str(SET14)]
            run([*cmd, "--lr-dir", str(lr), "--out", str(dest), "--no-progress"])
        res = next(iter(json.loads((dest / "results.json").read_text()).values()))
        out[name] = (res["psnr"], res["ssim"], res["psnr_bicubic"], res["ssim_bicubic"])
    return out


def mean_sd(values: list[float], digits: int) -> str:
    if len(values) < 2:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def table(scores: dict[str, dict[int, dict]]) -> str:
    """Per run, per model (mean ± sd) and the difference of the means."""
    lines = [
        "| run | steps | Set14, bicubic LR: PSNR / SSIM | Set14, Real-ESRGAN LR (seed 0): "
        "PSNR / SSIM |",
        "| --- | ---: | ---: | ---: |",
    ]
    for model, per_seed in scores.items():
        for seed, s in per_seed.items():
            lines.append(
                f"| `{model}_seed{seed}` | {s['steps']:,} | "
                f"{s['bicubic'][0]:.2f} / {s['bicubic'][1]:.4f} | "
                f"{s['realesrgan'][0]:.2f} / {s['realesrgan'][1]:.4f} |"
            )
    means = {}
    for model, per_seed in scores.items():
        cells = []
        for name in SETS:
            psnr = [s[name][0] for s in per_seed.values()]
            ssim = [s[name][1] for s in per_seed.values()]
            means[model, name] = statistics.mean(psnr)
            cells.append(f"{mean_sd(psnr, 2)} / {mean_sd(ssim, 4)}")
        steps = mean_sd([float(s["steps"]) for s in per_seed.values()], 0)
        lines.append(
            f"| **{model}, mean ± sd, {len(per_seed)} seeds** | {steps} | "
            f"{cells[0]} | {cells[1]} |"
        )
    any_run = next(iter(next(iter(scores.values())).values()))
    lines.append(
        f"| bicubic upscaling | | {any_run['bicubic'][2]:.2f} / {any_run['bicubic'][3]:.4f} | "
        f"{any_run['realesrgan'][2]:.2f} / {any_run['realesrgan'][3]:.4f} |"
    )
    if len(scores) == 2:
        a, b = scores
        lines.append(
            f"| **{a} - {b}** | | {means[a, 'bicubic'] - means[b, 'bicubic']:+.2f} dB | "
            f"{means[a, 'realesrgan'] - means[b, 'realesrgan']:+.2f} dB |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True, help="folder of the study's runs")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--minutes", type=float, default=19.5 / 4, help="training budget")
    parser.add_argument("--y-runs", type=Path, help="score DIR/q_seed<S> as the Y bicubic runs")
    parser.add_argument("--table", action="store_true", help="only tabulate the ended runs")
    args = parser.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    sets = lr_sets(args.runs)
    scores: dict[str, dict[int, dict]] = {}
    for model, overrides in MODELS.items():
        for seed in args.seeds:
            if model == "y_bicubic" and args.y_runs:
                folder = args.y_runs / f"q_seed{seed}"
            elif args.table:
                folder = args.runs / f"{model}_seed{seed}"
            else:
                folder = train(args.runs, f"{model}_seed{seed}", overrides, seed, args.minutes)
            if (folder / "checkpoints").is_dir():
                scores.setdefault(model, {})[seed] = score(folder, sets)
    print(table(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
