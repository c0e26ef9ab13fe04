"""What does the GAN stage of Real-ESRGAN buy over its L1 stage (Real-ESRNet): NIQE on real
photos, and PSNR / SSIM / NIQE on a degraded Set14 that no trained sampler made?

    python benchmarks/gan_study.py --esrnet RUN [RUN ...] --esrgan RUN [RUN ...] \\
        [--y-run RUN] [--lr-set DIR] [--real ../shared/datasets/RealSRSet] --out DIR
    python benchmarks/gan_study.py --out DIR --table      # the tables of the saved results only

The two stages are ``python train.py experiment=cpu20_realesrnet`` (L1 on Real-ESRGAN's
degradations, RGB) and ``python train.py experiment=cpu20_realesrgan train.init_from=<that run>``
(adds the U-Net discriminator and the GAN loss), one run per seed; ``--y-run`` adds a
bicubic-trained Y model (e.g. ``experiment=cpu20_hr_sample``) as a reference.

Every model (bicubic, each run) is scored by one ``scripts/evaluate.py`` call, in a subprocess,
into ``DIR/<key>/`` (``results.json``, ``results.csv``, ``evaluate.log``; keys ``bicubic``, ``y``,
``esrnet<i>``, ``esrgan<i>`` in the order given, and ``study.json``: the role and the inputs):

- ``../shared/datasets/Set14 --lr-dir LR_SET --niqe``: Y-PSNR / SSIM of the literature's protocol
  (Y of BT.601, 4 border pixels cropped) and NIQE (Y, the same crop) on the fixed degraded Set14
  of ``benchmarks/fixed_degraded_set14.py`` (blur 1.2 px, bicubic x1/4, noise 10, JPEG 75; made
  into ``DIR/lr_set14`` when ``--lr-set`` is not given or missing);
- ``--real RealSRSet --save DIR/<key>_real``: the mean NIQE over the 20 real LR photos of
  RealSRSet (no HR), their outputs written as ``DIR/<key>_real/RealSRSet/<method>/<stem>.png``
  for ``benchmarks/gan_picture.py``.

A run is scored at ``--checkpoint best`` (its best validation PSNR, or for a GAN-stage run its
lowest validation NIQE; ``--checkpoint last`` for the newest) with evaluate.py's default weights
(``--weights auto``: the averaged EMA weights where the run kept them, method ``<model>+ema``; else
the trained ones); the per-run table names both. A model already scored with the same inputs (its
``study.json``) is not scored again (remove ``DIR/<key>`` to score a run that trained on). Prints
two markdown tables (one row per model: mean ± sd over its runs; one row per run) and writes them
to ``DIR/gan_study.md``. Exit code 2 when the LR set cannot be made or an evaluation fails (its log
named).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from sr.core.runfiles import load_run_config, read_json

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"
ROLES = {
    "bicubic": "bicubic upscaling",
    "y": "Y model (bicubic-trained)",
    "esrnet": "Real-ESRNet (RGB, L1)",
    "esrgan": "Real-ESRGAN (RGB, GAN stage)",
}


def models(args: argparse.Namespace) -> list[tuple[str, str, Path | None]]:
    """``[(key, role, run)]`` in table order (``run`` None for bicubic)."""
    out: list[tuple[str, str, Path | None]] = [("bicubic", "bicubic", None)]
    if args.y_run:
        out.append(("y", "y", args.y_run))
    for role in ("esrnet", "esrgan"):
        out += [(f"{role}{i}", role, run) for i, run in enumerate(getattr(args, role) or ())]
    return out


def lr_set(args: argparse.Namespace) -> Path:
    """The fixed degraded Set14 (written by fixed_degraded_set14.py when missing)."""
    folder = args.lr_set or args.out / "lr_set14"
    if not folder.is_dir():
        cmd = [sys.executable, "benchmarks/fixed_degraded_set14.py", "--hr", str(args.set14)]
        if subprocess.run([*cmd, "--out", str(folder)], cwd=ROOT).returncode:
            raise RuntimeError(f"fixed_degraded_set14.py could not write {folder}")
    return folder


def score(key: str, role: str, run: Path | None, args: argparse.Namespace, lr: Path) -> None:
    """Evaluate one model into ``args.out / key`` unless it was, with the same inputs."""
    dest = args.out / key
    study = {"role": role, "run": run and str(run), "set14": str(args.set14), "lr_set": str(lr),
             "real": str(args.real), "save": str(args.out / f"{key}_real"),
             "checkpoint": None if run is None else args.checkpoint}  # fmt: skip
    if (dest / "results.json").is_file() and (dest / "study.json").is_file():
        if json.loads((dest / "study.json").read_text()) == study:
            return
    dest.mkdir(parents=True, exist_ok=True)
    method = ["--scale", "4"] if run is None else ["--checkpoint", args.checkpoint]
    cmd = [sys.executable, "scripts/evaluate.py", str(run or "bicubic"), str(args.set14), *method,
           "--lr-dir", str(lr), "--niqe", "--real", str(args.real), "--save", study["save"],
           "--out", str(dest), "--no-progress"]  # fmt: skip
    print(f"scoring {key}: {' '.join(cmd[1:])}", flush=True)
    with open(dest / "evaluate.log", "w") as log:
        code = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=log).returncode
    if code:
        raise RuntimeError(f"evaluate.py exited {code} for {key}: see {log.name}")
    (dest / "study.json").write_text(json.dumps(study, indent=2) + "\n")


def seed_of(run: str | None) -> str:
    """The ``seed`` of a run's saved config (``.hydra/config.yaml``), or ``""``."""
    if run is None or not (Path(run) / ".hydra" / "config.yaml").is_file():
        return ""
    return str(load_run_config(run).get("seed", ""))


def summary(folder: Path) -> dict:
    """One scored model's figures from ``results.json`` and ``study.json``."""
    fix = f"remove {folder} and run this script again to score the model anew"
    study = read_json(folder / "study.json", fix, keys=("run",))
    results = read_json(folder / "results.json", fix)
    real = next(r for r in results.values() if r.get("real"))
    set14 = next(r for r in results.values() if not r.get("real"))
    return {
        "key": folder.name,
        **study,
        "method": set14["model"],
        "checkpoint": set14.get("checkpoint_label") or "",
        "step": set14["step"],
        "seed": seed_of(study["run"]),
        "real_niqe": real["niqe"],
        "psnr": set14["psnr"],
        "ssim": set14["ssim"],
        "niqe": set14["niqe"],
    }


def mean_sd(values: list[float], digits: int) -> str:
    if len(values) < 2:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


FIGURES = (("real_niqe", 3), ("psnr", 2), ("ssim", 4), ("niqe", 3))
HEAD = "RealSRSet NIQE ↓ | Set14 degraded PSNR (dB) ↑ | SSIM ↑ | NIQE ↓"


def tables(rows: list[dict]) -> str:
    """The per-model table (mean ± sd over runs), the per-run table and the protocol."""
    lines = [f"| model | runs | {HEAD} |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for role, name in ROLES.items():
        mine = [r for r in rows if r["role"] == role]
        if mine:
            cells = " | ".join(mean_sd([r[k] for r in mine], d) for k, d in FIGURES)
            lines.append(f"| {name} | {len(mine) if role != 'bicubic' else ''} | {cells} |")
    lines += ["", f"| key | run | seed | checkpoint | method | {HEAD} |",
              "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for r in rows:
        cells = " | ".join(f"{r[k]:.{d}f}" for k, d in FIGURES)
        run = f"{r['run'] or ''} | {r['seed']} | {r['checkpoint']} | {r['method']}"
        lines.append(f"| `{r['key']}` | {run} | {cells} |")
    lr = rows[0]["lr_set"]
    lines += ["", f"x4. Set14 degraded: `{lr}` (benchmarks/fixed_degraded_set14.py: blur 1.2 px, "
              "bicubic x1/4, noise 10, JPEG 75); PSNR / SSIM on Y (BT.601), 4-pixel border "
              "cropped; NIQE on Y with the same crop (lower is better). RealSRSet: mean NIQE of "
              f"the x4 outputs of the {rows[0]['real']} photos. Runs: the checkpoint named, "
              "evaluate.py's default weights (`+ema`: the averaged weights)."]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--esrnet", nargs="+", type=Path, help="Real-ESRNet run(s), one a seed")
    parser.add_argument("--esrgan", nargs="+", type=Path, help="Real-ESRGAN run(s), one a seed")
    parser.add_argument("--y-run", type=Path, help="a bicubic-trained Y run, for reference")
    parser.add_argument("--lr-set", type=Path, help="fixed degraded Set14 (default OUT/lr_set14)")
    parser.add_argument("--set14", type=Path, default=SHARED / "Set14", help="Set14's HR")
    parser.add_argument("--real", type=Path, default=SHARED / "RealSRSet", help="real LR photos")
    parser.add_argument("--out", type=Path, default=Path("outputs/gan_study"))
    parser.add_argument(
        "--checkpoint", default="best", help="of every run: best (default), last or ckpt-N"
    )
    parser.add_argument("--table", action="store_true", help="only tabulate the saved results")
    args = parser.parse_args(argv)
    for name in ("y_run", "lr_set", "set14", "real", "out"):  # evaluate.py runs in ROOT
        setattr(args, name, getattr(args, name) and getattr(args, name).resolve())
    for role in ("esrnet", "esrgan"):
        setattr(args, role, [run.resolve() for run in getattr(args, role) or ()])
    if not args.table:
        args.out.mkdir(parents=True, exist_ok=True)
        try:
            lr = lr_set(args)
            for key, role, run in models(args):
                score(key, role, run, args, lr)
        except RuntimeError as e:
            print(f"gan_study.py: error: {e}", file=sys.stderr)
            return 2
        folders = [args.out / key for key, _, _ in models(args)]
    else:
        order = {role: i for i, role in enumerate(ROLES)}
        folders = [p.parent for p in args.out.glob("*/study.json")]
        folders.sort(key=lambda p: (order[json.loads((p / "study.json").read_text())["role"]],
                                    p.name))  # fmt: skip
    if not folders:
        print(f"gan_study.py: error: no scored model in {args.out}", file=sys.stderr)
        return 2
    text = tables([summary(p) for p in folders])
    print(text)
    (args.out / "gan_study.md").write_text(text + "\n")
    print(f"\nwrote {args.out / 'gan_study.md'}; pictures: benchmarks/gan_picture.py with "
          f"NAME={args.out}/<key>_real/{args.real.name}/<method>")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
