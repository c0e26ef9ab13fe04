"""Multi-frame against single-frame at the same step budget, on validation sequences.

    python benchmarks/compare_frames.py                          # demo sequences, 3 seeds
    python benchmarks/compare_frames.py --steps 3000 --seeds 0 1 2 --frames 3 --out DIR

Trains ``model=espcn_mf`` on ``data=sequence`` twice per seed: with ``data.frames=K`` (the k
LR frames of a window in, the last frame's SR out) and with ``data.frames=1`` (the same network
on one frame: ESPCN), everything else equal (steps, batch, schedule, seed, training sequences),
each run in its own ``train.py`` process. Then scores both on the validation sequences with the
protocol of ``sr.evaluation.evaluate_sequences`` (every frame of every sequence, Y PSNR/SSIM with
``scale`` border pixels cropped, border frames standing in for missing neighbours; mean over
sequences of each sequence's mean), with bicubic of the target frame beside them. Prints a
markdown table and writes ``compare_frames.json`` and ``compare_frames.md`` into ``--out``
(default ``docs/perf``); the runs go to ``--runs`` (default a temporary folder), where a run
that already reached ``--steps`` is scored again without training.
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


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="compare_frames.py", description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000, help="training steps of every run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--frames", type=int, default=3, help="k of the multi-frame runs")
    parser.add_argument(
        "--val-every",
        type=int,
        help="validate every N steps too (default: at the end only); the table of the gain "
        "over training is drawn from these validations",
    )
    parser.add_argument("--hr-dir", help="training sequences (default: the demo's)")
    parser.add_argument("--val-dir", help="validation sequences (default: the demo's)")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "docs" / "perf"))
    parser.add_argument("--runs", help="folder of the training runs (default: a temporary one)")
    parser.add_argument("overrides", nargs="*", help="more train.py overrides for every run")
    return parser.parse_args(argv)


def train(run_dir: Path, frames: int, seed: int, args) -> float:
    """One ``train.py`` run; returns its wall time in seconds."""
    cmd = [
        sys.executable,
        str(PROJECT_ROOT / "train.py"),
        "data=sequence",
        "model=espcn_mf",
        f"data.frames={frames}",
        f"seed={seed}",
        f"train.steps={args.steps}",
        f"train.val_every={args.val_every or args.steps}",
        f"train.ckpt_every={args.steps}",
        "train.log_every=500",
        f"hydra.run.dir={run_dir}",
        *([f"data.hr_dir={args.hr_dir}"] if args.hr_dir else []),
        *([f"data.val_dir={args.val_dir}"] if args.val_dir else []),
        *args.overrides,
    ]
    print("$", " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def score(run_dir: Path) -> dict:
    """Validation scores of a run's last checkpoint on its ``data.val_dir`` sequences."""
    from sr.core.frames import list_sequences, target_index
    from sr.evaluation import evaluate_sequences
    from sr.loading.models import load_model_from_run

    model, cfg, step = load_model_from_run(run_dir)
    d = cfg.data
    res = evaluate_sequences(
        model,
        list_sequences(d.val_dir, "data.val_dir"),
        int(d.scale),
        int(d.frames),
        int(d.frame_stride),
        target_index(int(d.frames), d.target_frame),
        folder=Path(d.val_dir),
    )
    res.pop("panels", None)
    res.pop("per_image", None)
    return {"step": step, **res}


def curve(run_dir: Path) -> dict[int, float]:
    """``{step: validation PSNR}`` of a run, from its TensorBoard scalars ``val/psnr`` (the
    validation of the training loop: the protocol of :func:`score`)."""
    import tensorflow as tf

    out = {}
    for path in sorted((run_dir / "tb").glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == "val/psnr":
                    out[int(event.step)] = float(tf.make_ndarray(value.tensor))
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    runs = Path(args.runs) if args.runs else Path(tempfile.mkdtemp(prefix="compare_frames_"))
    rows = []
    for seed in args.seeds:
        for frames in (args.frames, 1):
            run_dir = runs / f"frames{frames}_seed{seed}"
            done = run_dir / "checkpoints" / f"ckpt-{args.steps}.index"
            seconds = float("nan") if done.is_file() else train(run_dir, frames, seed, args)
            res = score(run_dir)
            rows.append(
                {
                    "frames": frames,
                    "seed": seed,
                    "seconds": seconds,
                    "curve": curve(run_dir),
                    **res,
                }
            )
            print(
                f"frames={frames} seed={seed}: {res['psnr']:.3f} dB (bicubic "
                f"{res['psnr_bicubic']:.3f}), SSIM {res['ssim']:.4f}, {seconds:.0f} s",
                flush=True,
            )
    multi = {r["seed"]: r for r in rows if r["frames"] == args.frames}
    single = {r["seed"]: r for r in rows if r["frames"] == 1}
    gains = [multi[s]["psnr"] - single[s]["psnr"] for s in args.seeds]
    summary = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "steps": args.steps,
        "seeds": args.seeds,
        "frames": args.frames,
        "overrides": args.overrides,
        "gain_db": gains,
        "gain_mean_db": statistics.mean(gains),
        "gain_min_db": min(gains),
        "rows": rows,
    }
    lines = [
        f"Multi-frame (`data.frames={args.frames}`) against single-frame (`data.frames=1`), "
        f"`model=espcn_mf`, {args.steps} steps each, validation sequences "
        f"({rows[0]['n']} frames), Y PSNR (dB) / SSIM:",
        "",
        "| seed | k frames | 1 frame | gain | bicubic | SSIM k / 1 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for s in args.seeds:
        m, o = multi[s], single[s]
        lines.append(
            f"| {s} | {m['psnr']:.3f} | {o['psnr']:.3f} | {m['psnr'] - o['psnr']:+.3f} | "
            f"{m['psnr_bicubic']:.3f} | {m['ssim']:.4f} / {o['ssim']:.4f} |"
        )
    lines += [
        "",
        f"Gain: mean {statistics.mean(gains):+.3f} dB, smallest {min(gains):+.3f} dB over "
        f"{len(gains)} seed(s).",
        "",
        "Per sequence (first seed):",
        "",
        "| sequence | k frames | 1 frame | bicubic |",
        "| --- | --- | --- | --- |",
    ]
    first = args.seeds[0]
    for name, m in multi[first]["per_sequence"].items():
        o = single[first]["per_sequence"][name]
        lines.append(f"| {name} | {m['psnr']:.3f} | {o['psnr']:.3f} | {m['psnr_bicubic']:.3f} |")
    steps = sorted(set.intersection(*(set(r["curve"]) for r in rows)))
    if len(steps) > 1:
        lines += [
            "",
            "Over training (validation of the training loop, mean over the seeds):",
            "",
            "| step | k frames | 1 frame | gain | gain per seed |",
            "| --- | --- | --- | --- | --- |",
        ]
        for step in steps:
            m = [multi[s]["curve"][step] for s in args.seeds]
            o = [single[s]["curve"][step] for s in args.seeds]
            per_seed = ", ".join(f"{a - b:+.3f}" for a, b in zip(m, o))
            lines.append(
                f"| {step} | {statistics.mean(m):.3f} | {statistics.mean(o):.3f} | "
                f"{statistics.mean(m) - statistics.mean(o):+.3f} | {per_seed} |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare_frames.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "compare_frames.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
