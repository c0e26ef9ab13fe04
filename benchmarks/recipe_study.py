"""Choices of the quality recipe compared at equal steps or equal minutes, over seeds (issue 11).

    python benchmarks/recipe_study.py crops                      # 600 steps, seeds 0 1 2
    python benchmarks/recipe_study.py lr_order --steps 600 --seeds 0 1 2 --runs DIR
    python benchmarks/recipe_study.py crops --steps 1800 --seeds 0 --images 14 \
        --variants grid subimage
    python benchmarks/recipe_study.py size --minutes 4.875 --seeds 0    # the machine alone

Every run is ``python train.py experiment=cpu20_hr_sample`` (edsr_lite on the 80 photographs
of ``../shared/datasets/hr_sample``, L1, Adam, cosine with warm-up) with the study's overrides.

``--steps N`` (equal steps; contention-proof, runs may share the machine): the step schedule is
scaled to N steps: no time budget (``train.max_minutes=null``), ``train.steps`` = N, and the
recipe's warm-up kept at the same fraction of the run, so that a run of N steps follows the
learning rate the budget-aware recipe follows on a machine that reaches N steps in its budget.

``--minutes M`` (equal time; each run needs the machine to itself): the recipe's own schedule
over a budget of M minutes of the training loop (``train.max_minutes=M``), which is what a user
gets: a faster variant makes more steps. The steps reached are reported beside the scores.

The studies:

- ``crops``: where patches are cut. ``grid``: ``data=tfrecord``, the shards' patches at fixed
  grid positions (stride 64). ``generator``: ``data=generator``, random positions in decoded
  images. ``subimage``: ``data=tfrecord data.subimage_size=384``, shards of sub-images with a
  random crop inside each in the tf.data graph (BasicSR's layout; BasicSR cuts DIV2K into 480,
  but one of the 80 photographs is only 426 pixels high).
- ``lr_order``: how the LR is made. ``y``: LR from the rounded Y of the HR (the default).
  ``rgb``: ``data.lr_from=rgb``, LR from the RGB HR then Y, the evaluation's order.
- ``size``: model, batch and learning rate for a time budget. ``former``: the recipe before
  this study (16 blocks of 48 features, batch 16, learning rate 1e-3; with ``--minutes`` on
  the recipe's 40,000-step horizon, not its own 10,500, which only a machine that reaches 10,500
  steps in the budget would notice). ``b8``: 16 x 48 at the recipe's batch 8 and 4e-3.
  ``recipe``: the recipe as is (8 blocks of 48 features, batch 8, 4e-3). ``wide``: 8 x 64.
  ``narrow``: 8 x 32. ``b4``: the recipe at batch 4.

``crops`` and ``lr_order`` were measured on the former recipe (``FORMER``) and keep it, so that
their tables in ``docs/results.md`` can be reproduced.

``--images N`` trains on the first N photographs (name order) only, so that a run of few steps
sees every stored patch as often as a long run does: with 14 photographs (2,560 grid patches),
1,800 steps of 16 patches go over the grid 11.25 times, about as often as the former recipe's
10,500 steps over the 80 photographs (14,432 patches, 11.6 times) and more often than EDSR's
300,000 steps over DIV2K's 800 images (about 9 times at stride 64). Where patches are cut matters
through those repeats.

Each run is scored on Set5 and Set14 (``sr.results.evaluate``: Y of BT.601, MATLAB bicubic LR,
``scale`` pixels of border cropped). Runs of equal settings are shared between studies (the
``grid`` and ``y`` runs are the same). Prints a markdown table (per seed, mean and standard
deviation; each variant's difference from the first, paired by seed, which cancels the seed's
initialisation) and writes ``<study>_<steps>.json`` and ``.md`` (``<study>_<M>min`` with
``--minutes``) into ``--out`` (default ``docs/perf``). Runs go to ``--runs`` (default a temporary
folder); a run that already ended is scored again without training, so a study can be resumed or
extended.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
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
# The recipe before the size study; crops and lr_order were measured on it (its warm-up was 300
# of 10,500 steps, the same fraction as the recipe's 1,140 of 40,000 to 3 decimals)
FORMER = ["model.blocks=16", "data.batch_size=16", "train.lr=1e-3"]
BASE = {"crops": FORMER, "lr_order": FORMER, "size": []}  # before each variant's overrides

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
    "size": {
        "former": FORMER,
        "b8": ["model.blocks=16"],
        "recipe": [],
        "wide": ["model.features=64"],
        "narrow": ["model.features=32"],
        "b4": ["data.batch_size=4"],
    },
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="recipe_study.py", description=__doc__.split("\n")[0])
    parser.add_argument("study", choices=sorted(STUDIES))
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, help="training steps of every run (default 600)")
    length.add_argument(
        "--minutes", type=float, help="a time budget of every run instead (the machine alone)"
    )
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
    if args.minutes is None and args.steps is None:
        args.steps = 600
    if (args.steps is not None and args.steps < 1) or (
        args.minutes is not None and not args.minutes > 0
    ):
        parser.error("--steps must be >= 1 and --minutes > 0")
    known = STUDIES[args.study]
    args.variants = args.variants or list(known)
    unknown = [v for v in args.variants if v not in known]
    if unknown:
        parser.error(f"unknown variant(s) {unknown} of {args.study}: choose from {list(known)}")
    return args


def subset(folder: Path, n: int, runs: Path) -> Path:
    """A folder of links to the first ``n`` images of ``folder`` (name order), in ``runs``."""
    from sr.core.images import list_images

    files = list_images(folder)
    if n > len(files):
        raise SystemExit(f"--images {n}: {folder} holds {len(files)} images")
    out = runs / f"{folder.name}_first{n}"
    out.mkdir(parents=True, exist_ok=True)
    for f in files[:n]:
        if not (out / f.name).exists():
            (out / f.name).symlink_to(f.resolve())
    return out


def length_tag(steps: int | None, minutes: float | None) -> str:
    """``600`` for 600 steps, ``4.875min`` for a budget of 4.875 minutes."""
    return str(steps) if minutes is None else f"{minutes:g}min"


def run_name(overrides: list[str], length: str, seed: int, images: int | None = None) -> str:
    """A run's folder name, from what it changes in the recipe (``data=tfrecord`` is the recipe's
    own data mode), so that two studies share the runs of equal settings; no ``=`` (Hydra's
    override syntax would split ``hydra.run.dir`` there)."""
    changes = [o.split(".")[-1].replace("=", "-") for o in overrides if o != "data=tfrecord"]
    changes += [f"images{images}"] if images else []
    return "_".join(["recipe", *changes, length, f"seed{seed}"])


def recipe_schedule() -> tuple[int, int]:
    """``(train.steps, train.lr_warmup_steps)`` of the recipe's experiment file."""
    from sr.config import compose

    t = compose(f"experiment={RECIPE}").train
    return int(t.steps), int(t.lr_warmup_steps)


def command(
    run_dir: Path,
    overrides: list[str],
    seed: int,
    steps: int | None,
    minutes: float | None,
    extra: list[str],
):
    """The ``train.py`` command line of one run: ``steps`` with the schedule scaled to them, or
    the recipe's own schedule over a budget of ``minutes``."""
    if minutes is None:
        recipe_steps, recipe_warmup = recipe_schedule()
        length = [
            f"train.steps={steps}",
            "train.max_minutes=null",
            f"train.lr_warmup_steps={round(recipe_warmup * steps / recipe_steps)}",
            f"train.val_every={steps}",
            f"train.ckpt_every={steps}",
            f"train.log_every={max(1, steps // 4)}",
        ]
    else:
        length = [f"train.max_minutes={minutes}", "train.val_every=1000000"]
    return [
        sys.executable,
        str(PROJECT_ROOT / "train.py"),
        f"experiment={RECIPE}",
        *overrides,
        f"seed={seed}",
        *length,
        f"hydra.run.dir={run_dir}",
        *extra,
    ]


def ended(run_dir: Path, steps: int | None) -> bool:
    """The run reached its end: the checkpoint of ``steps``, or (a budget) the final line of its
    training log."""
    if steps is not None:
        return (run_dir / "checkpoints" / f"ckpt-{steps}.index").is_file()
    log = run_dir / "train.log"
    return log.is_file() and re.search(r"final step \d+:", log.read_text()) is not None


def score(run_dir: Path, folders: list[str]) -> dict:
    """``{folder: {"psnr", "ssim", "psnr_bicubic", "ssim_bicubic", "n"}}`` of the run's last
    checkpoint (trained weights), with the protocol of ``scripts/evaluate.py``."""
    from sr.loading.models import load_model_from_run, model_label
    from sr.results import evaluate

    model, cfg, step = load_model_from_run(run_dir, weights="live")
    res = evaluate(
        model, folders, int(cfg.data.scale), model_label(model), step, None, progress=False
    )
    keys = ("psnr", "ssim", "psnr_bicubic", "ssim_bicubic", "n", "step")
    return {name: {k: r[k] for k in keys} for name, r in res.items()}


def mean_sd(values: list[float], sign: str = "") -> str:
    """``mean ± sample sd`` (3 decimals; ``sign="+"`` signs the mean); the value alone for one."""
    mean = f"{statistics.mean(values):{sign}.3f}"
    return f"{mean} ± {statistics.stdev(values):.3f}" if len(values) > 1 else mean


def main(argv=None) -> int:
    args = parse_args(argv)
    runs = Path(args.runs) if args.runs else Path(tempfile.mkdtemp(prefix="recipe_study_"))
    variants = {v: STUDIES[args.study][v] for v in args.variants}
    if args.images:
        folder = subset(SHARED / "hr_sample", args.images, runs)
        args.overrides = [f"data.hr_dir={folder}", *args.overrides]
    rows = []
    length = length_tag(args.steps, args.minutes)
    for seed in args.seeds:
        for name, overrides in variants.items():
            overrides = BASE[args.study] + overrides
            run_dir = runs / run_name(overrides, length, seed, args.images)
            seconds = float("nan")
            if not ended(run_dir, args.steps):
                cmd = command(run_dir, overrides, seed, args.steps, args.minutes, args.overrides)
                print("$", " ".join(cmd[1:]), flush=True)
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL)
                seconds = time.perf_counter() - t0
            res = score(run_dir, args.folders)
            reached = next(iter(res.values()))["step"]
            row = {"variant": name, "seed": seed, "seconds": seconds, "steps": reached}
            rows.append({**row, "scores": res})
            print(
                f"{name} seed={seed}: "
                + ", ".join(f"{f} {r['psnr']:.3f} dB" for f, r in res.items())
                + f" (step {reached}, {seconds:.0f} s)",
                flush=True,
            )
    folders = list(rows[0]["scores"])
    by = {(r["variant"], r["seed"]): r["scores"] for r in rows}
    base = args.variants[0]
    described = ", ".join(
        f"`{v}` ({' '.join(o) or 'the recipe as is'})" for v, o in variants.items()
    )
    if args.minutes is None:
        recipe_steps, recipe_warmup = recipe_schedule()
        warmup = round(recipe_warmup * args.steps / recipe_steps)
        at = f"at {args.steps} steps (warm-up {warmup})"
    else:
        at = f"over a budget of {args.minutes:g} minutes (its own schedule)"
    base_overrides = " ".join(BASE[args.study])
    lines = [
        f"`{args.study}`: {described}; "
        f"`experiment={RECIPE}{' ' + base_overrides if base_overrides else ''}` {at}, "
        f"seeds {args.seeds}"
        + (f", the first {args.images} photographs" if args.images else "")
        + (f", overrides {' '.join(args.overrides)}" if args.overrides else "")
        + f". Y PSNR (dB), trained weights; differences from `{base}` paired by seed.",
        "",
        "| variant | steps per seed | "
        + " | ".join(f"{f} per seed | {f} mean ± sd | {f} vs {base}" for f in folders)
        + " |",
        "| --- | ---: |" + " --- | --- | --- |" * len(folders),
    ]
    summary = {}
    steps_of = {(r["variant"], r["seed"]): r["steps"] for r in rows}
    for name in args.variants:
        cells = [", ".join(f"{steps_of[name, s]:,}" for s in args.seeds)]
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
    stem = f"{args.study}_{length}" + (f"_images{args.images}" if args.images else "")
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "study": args.study,
        "steps": args.steps,
        "minutes": args.minutes,
        "base": BASE[args.study],
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
