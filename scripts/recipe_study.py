"""Data choices of the quality recipe compared at equal steps, over several seeds (issue 11).

    python scripts/recipe_study.py crops                      # 600 steps, seeds 0 1 2
    python scripts/recipe_study.py lr_order --steps 600 --seeds 0 1 2 --runs DIR
    python scripts/recipe_study.py crops --steps 1800 --seeds 0 --images 14 \
        --variants grid subimage

Every run is ``python train.py experiment=cpu20_hr_sample`` (edsr_lite 16x48 on the 80
photographs of ``../shared/datasets/hr_sample``, batch 16, L1, Adam, cosine) with the step
schedule scaled to ``--steps``: no time budget (``train.max_minutes=null``), ``train.steps`` =
``--steps``, and the recipe's warm-up kept at the same fraction of the run (300 of 10,500 steps),
so that a run of N steps follows the learning rate the budget-aware recipe follows on a machine
that reaches N steps in its budget. The variants differ only by their overrides:

- ``crops``: where patches are cut. ``grid``: ``data=tfrecord``, the shards' patches at fixed
  grid positions (stride 64). ``generator``: ``data=generator``, random positions in decoded
  images. ``subimage``: ``data=tfrecord data.subimage_size=384``, shards of sub-images with a
  random crop inside each in the tf.data graph (BasicSR's layout; BasicSR cuts DIV2K into 480,
  but one of the 80 photographs is only 426 pixels high).
- ``lr_order``: how the LR is made. ``y``: LR from the rounded Y of the HR (the default).
  ``rgb``: ``data.lr_from=rgb``, LR from the RGB HR then Y, the evaluation's order.

``--images N`` trains on the first N photographs (name order) only, so that a run of few steps
sees every stored patch as often as a long run does: with 14 photographs (2,560 grid patches),
1,800 steps of 16 patches go over the grid 11.25 times, about as often as the recipe's 10,500
steps over the 80 photographs (14,432 patches, 11.6 times) and more often than EDSR's 300,000
steps over DIV2K's 800 images (about 9 times at stride 64). Where patches are cut matters
through those repeats.

Each run is scored on Set5 and Set14 (``sr.results.evaluate``: Y of BT.601, MATLAB bicubic LR,
``scale`` pixels of border cropped). Runs of equal settings are shared between studies (the
``grid`` and ``y`` runs are the recipe as is). Prints a markdown table (per seed, mean and standard
deviation; each variant's difference from the first, paired by seed, which cancels the seed's
initialisation) and writes ``<study>_<steps>.json`` and ``.md`` into ``--out`` (default
``docs/perf``). Runs go to ``--runs`` (default a temporary folder); a run that already reached
``--steps`` is scored again without training, so a study can be resumed or extended.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sr.config import PROJECT_ROOT  # noqa: E402

SHARED = PROJECT_ROOT.parent / "shared" / "datasets"
RECIPE = "cpu20_hr_sample"
RECIPE_STEPS, RECIPE_WARMUP = 10_500, 300  # conf/experiment/cpu20_hr_sample.yaml

STUDIES = {
    "crops": {
        "grid": ["data=tfrecord"],
        "generator": ["data=generator"],
        "subimage": ["data=tfrecord", "data.subimage_size=384"],
    },
    "lr_order": {
        "y": ["data=tfrecord"],
        "rgb": ["data=tfrecord", "data.lr_from=rgb"],
    },
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="recipe_study.py", description=__doc__.split("\n")[0])
    parser.add_argument("study", choices=sorted(STUDIES))
    parser.add_argument("--steps", type=int, default=600, help="training steps of every run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", help="a subset of the study's variants, in order")
    parser.add_argument(
        "--images", type=int, help="train on the first N photographs of the recipe's folder"
    )
    parser.add_argument(
        "--folders", nargs="+", default=[str(SHARED / "Set5"), str(SHARED / "Set14")]
    )
    parser.add_argument("--out", default=str(PROJECT_ROOT / "docs" / "perf"))
    parser.add_argument("--runs", help="folder of the training runs (default: a temporary one)")
    parser.add_argument("overrides", nargs="*", help="more train.py overrides for every run")
    args = parser.parse_args(argv)
    known = STUDIES[args.study]
    args.variants = args.variants or list(known)
    unknown = [v for v in args.variants if v not in known]
    if unknown:
        parser.error(f"unknown variant(s) {unknown} of {args.study}: choose from {list(known)}")
    return args


def subset(folder: Path, n: int, runs: Path) -> Path:
    """A folder of links to the first ``n`` images of ``folder`` (name order), in ``runs``."""
    from sr.data.images import list_images

    files = list_images(folder)
    if n > len(files):
        raise SystemExit(f"--images {n}: {folder} holds {len(files)} images")
    out = runs / f"{folder.name}_first{n}"
    out.mkdir(parents=True, exist_ok=True)
    for f in files[:n]:
        if not (out / f.name).exists():
            (out / f.name).symlink_to(f.resolve())
    return out


def run_name(overrides: list[str], steps: int, seed: int, images: int | None = None) -> str:
    """A run's folder name, from what it changes in the recipe (``data=tfrecord`` is the recipe's
    own data mode), so that two studies share the runs of equal settings; no ``=`` (Hydra's
    override syntax would split ``hydra.run.dir`` there)."""
    changes = [o.split(".")[-1].replace("=", "-") for o in overrides if o != "data=tfrecord"]
    changes += [f"images{images}"] if images else []
    return "_".join(["recipe", *changes, str(steps), f"seed{seed}"])


def command(run_dir: Path, overrides: list[str], seed: int, steps: int, extra: list[str]):
    """The ``train.py`` command line of one run."""
    warmup = round(RECIPE_WARMUP * steps / RECIPE_STEPS)
    return [
        sys.executable,
        str(PROJECT_ROOT / "train.py"),
        f"experiment={RECIPE}",
        *overrides,
        f"seed={seed}",
        f"train.steps={steps}",
        "train.max_minutes=null",
        f"train.lr_warmup_steps={warmup}",
        f"train.val_every={steps}",
        f"train.ckpt_every={steps}",
        f"train.log_every={max(1, steps // 4)}",
        f"hydra.run.dir={run_dir}",
        *extra,
    ]


def score(run_dir: Path, folders: list[str]) -> dict:
    """``{folder: {"psnr", "ssim", "psnr_bicubic", "ssim_bicubic", "n"}}`` of the run's last
    checkpoint (trained weights), with the protocol of ``scripts/evaluate.py``."""
    from sr.results import evaluate
    from sr.train.checkpoint import load_model_from_run, model_label

    model, cfg, step = load_model_from_run(run_dir, weights="live")
    res = evaluate(
        model, folders, int(cfg.data.scale), model_label(model), step, None, progress=False
    )
    keys = ("psnr", "ssim", "psnr_bicubic", "ssim_bicubic", "n", "step")
    return {name: {k: r[k] for k in keys} for name, r in res.items()}


def mean_sd(values: list[float], sign: str = "") -> str:
    """``mean ± sample sd`` (3 decimals; ``sign="+"`` signs the mean)."""
    sd = statistics.stdev(values) if len(values) > 1 else float("nan")
    return f"{statistics.mean(values):{sign}.3f} ± {sd:.3f}"


def main(argv=None) -> int:
    args = parse_args(argv)
    runs = Path(args.runs) if args.runs else Path(tempfile.mkdtemp(prefix="recipe_study_"))
    variants = {v: STUDIES[args.study][v] for v in args.variants}
    if args.images:
        folder = subset(SHARED / "hr_sample", args.images, runs)
        args.overrides = [f"data.hr_dir={folder}", *args.overrides]
    rows = []
    for seed in args.seeds:
        for name, overrides in variants.items():
            run_dir = runs / run_name(overrides, args.steps, seed, args.images)
            done = run_dir / "checkpoints" / f"ckpt-{args.steps}.index"
            seconds = float("nan")
            if not done.is_file():
                cmd = command(run_dir, overrides, seed, args.steps, args.overrides)
                print("$", " ".join(cmd[1:]), flush=True)
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL)
                seconds = time.perf_counter() - t0
            res = score(run_dir, args.folders)
            rows.append({"variant": name, "seed": seed, "seconds": seconds, "scores": res})
            print(
                f"{name} seed={seed}: "
                + ", ".join(f"{f} {r['psnr']:.3f} dB" for f, r in res.items())
                + f" ({seconds:.0f} s)",
                flush=True,
            )
    folders = list(rows[0]["scores"])
    by = {(r["variant"], r["seed"]): r["scores"] for r in rows}
    base = args.variants[0]
    described = ", ".join(
        f"`{v}` ({' '.join(o) or 'the recipe as is'})" for v, o in variants.items()
    )
    lines = [
        f"`{args.study}`: {described}; "
        f"`experiment={RECIPE}` at {args.steps} steps (warm-up "
        f"{round(RECIPE_WARMUP * args.steps / RECIPE_STEPS)}), seeds {args.seeds}"
        + (f", the first {args.images} photographs" if args.images else "")
        + (f", overrides {' '.join(args.overrides)}" if args.overrides else "")
        + f". Y PSNR (dB), trained weights; differences from `{base}` paired by seed.",
        "",
        "| variant | "
        + " | ".join(f"{f} per seed | {f} mean ± sd | {f} vs {base}" for f in folders)
        + " |",
        "| --- |" + " --- | --- | --- |" * len(folders),
    ]
    summary = {}
    for name in args.variants:
        cells = []
        for f in folders:
            vals = [by[name, s][f]["psnr"] for s in args.seeds]
            diffs = [by[name, s][f]["psnr"] - by[base, s][f]["psnr"] for s in args.seeds]
            summary.setdefault(name, {})[f] = {"psnr": vals, "diff": diffs}
            diff = "—" if name == base else mean_sd(diffs, "+")
            cells.append(f"{', '.join(f'{v:.3f}' for v in vals)} | {mean_sd(vals)} | {diff}")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    bic = rows[0]["scores"]
    lines += ["", "Bicubic: " + ", ".join(f"{f} {bic[f]['psnr_bicubic']:.3f} dB" for f in folders)]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{args.study}_{args.steps}" + (f"_images{args.images}" if args.images else "")
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "study": args.study,
        "steps": args.steps,
        "images": args.images,
        "seeds": args.seeds,
        "variants": variants,
        "overrides": args.overrides,
        "summary": summary,
        "rows": rows,
    }
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / f"{stem}.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
