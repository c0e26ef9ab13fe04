"""Shuffle quality of both loader modes against the reference pipelines, measured and drawn.

    python benchmarks/shuffle_report.py                 # ../shared/datasets/hr_sample (80 images)
    python benchmarks/shuffle_report.py --quick         # fewer draws
    python benchmarks/shuffle_report.py --folder DIR --out outputs/shuffle
    python benchmarks/shuffle_report.py --only sequence # data=sequence only (~1.5 min)

The folder's images are sorted by name, and the source index of every drawn patch is known
(``DataLoader.patch_dataset()`` yields it; the reference pipelines carry it). For each pipeline:
the Spearman correlation between draw order and source index over the first ``--first`` draws and
over a whole epoch (the project's TFRecord record count), distinct source images per batch, and
the chi-square of per-image draw counts against uniform (and, for record-based pipelines, against
each image's share of records). Draws the scatter of source index against draw order, one panel
per pipeline, and sweeps the shuffle buffer of reference (c) written as one shard (DIV2K's
proportions: far more records per shard than the buffer holds). Writes ``shuffle_report.json``,
``shuffle_report.md`` and ``shuffle_report.png`` into ``--out``.

Sequence mode (``data=sequence``, issue 10): on a folder of sorted sequences (default: 40
sequences x 60 frames of 160 x 160, slow pans across real photos of the shared sample, written
into a temporary folder; ``--sequence-folder`` to use another), the first ``--first`` samples of
the project's loader (``patch_dataset()``, k = 3, stride 1, batch 64, default pool) against the
rank of their window in sorted (sequence, start frame) order: Spearman rho of draw order against
the window, the sequence and the frame index within the sequence, distinct sequences per batch
against the independent-draw ideal, and the same for two index-only references (windows read in
sorted order through a ``shuffle(2000)``, 32 crops each; the naive benchmark's shuffled window
list); then rho of the project's loader over ``--seeds`` seeds at 8 and 32 patches per window
against its expected spread without bias (``sr.bench.sequences.null_spread``). A second row of
panels in the chart. ``--only sequence`` writes ``shuffle_sequence.json``, ``.md`` and ``.png``
instead, leaving the full report's files as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sr.bench.folders import SHARED_SAMPLE  # noqa: E402
from sr.config import PROJECT_ROOT  # noqa: E402


def project_draws(mode: str, folder, data_root, n: int, *overrides: str):
    """Source indices of the first ``n`` patches of ``DataLoader.patch_dataset()`` built from the
    composed config, and the loader (for its manifest)."""
    import hydra
    import numpy as np

    from sr.bench.folders import compose_data

    cfg = compose_data(mode, folder, data_root, *overrides)
    loader = hydra.utils.instantiate(cfg.data)
    loader.prepare()
    it = iter(loader.patch_dataset())
    out = []
    while sum(len(b) for b in out) < n:
        out.append(next(it)["image"].numpy())
    del it  # a from_generator iterator must go before interpreter exit
    return np.concatenate(out)[:n], loader


def reference_draws(ds, n: int):
    """Source indices of the first ``n`` patches of a reference pipeline."""
    import numpy as np

    it = iter(ds)
    out = []
    while sum(len(b) for b in out) < n:
        batch = next(it)
        out.append((batch[-1] if isinstance(batch, tuple) else batch).numpy())
    del it
    return np.concatenate(out)[:n]


def run(folder: Path, work: Path, first: int, quick: bool, batch_size: int = 64) -> dict:
    import numpy as np

    from sr.bench import references as ref
    from sr.bench.measures import draw_stats, order_bias
    from sr.core.images import list_images

    files = list_images(folder)
    n_img = len(files)
    res = {"folder": str(folder), "n_images": n_img, "first": first, "pipelines": {}, "draws": {}}
    data_root = work / "data"

    draws, loader = project_draws("tfrecord", folder, data_root, first)
    manifest = loader.ensure_shards()
    epoch = manifest["records"] if not quick else first
    records_share = np.asarray(manifest["patches_per_image"], float)
    if epoch > first:
        draws, _ = project_draws("tfrecord", folder, data_root, epoch)
    res["epoch"] = epoch
    pipelines = {"tfrecord": (draws, records_share)}
    pipelines["generator"] = (project_draws("generator", folder, data_root, epoch)[0], None)
    small_pool = ("data.pool_size=64", "data.patches_per_image=100")
    if n_img > 64:
        pipelines["generator pool=64 ppi=100"] = (
            project_draws("generator", folder, data_root, epoch, *small_pool)[0],
            None,
        )
    n_ref = ref.gen_tfrecords(files, work / "ref_c")
    ds_c = ref.read_tfrecords(work / "ref_c", seed=0, pairs=False)
    c_draws = reference_draws(ds_c, min(epoch, n_ref))
    c_share = np.bincount(
        reference_draws(ref.read_tfrecords(work / "ref_c", shuffle_num=0, pairs=False), n_ref),
        minlength=n_img,
    )
    pipelines["ref (c) 004 TFRecord"] = (c_draws, c_share)
    # Reference (c) on DIV2K: ~52,000 records per shard against a 2000-record buffer. On a small
    # folder its 10 shards are shorter than the buffer, which hides the bias; one shard restores
    # DIV2K's proportions (records >> buffer, the first draws within the first shard).
    ref.gen_tfrecords(files, work / "ref_c1", tfrecord_num=1)
    c1_draws = reference_draws(
        ref.read_tfrecords(work / "ref_c1", seed=0, pairs=False), min(epoch, n_ref)
    )
    pipelines["ref (c) 1 shard"] = (c1_draws, c_share)
    ds_b, _ = ref.generator(files, seed=0)
    pipelines["ref (b) 004 generator"] = (reference_draws(ds_b, min(epoch, 100 * n_img)), None)
    for name, (d, share) in pipelines.items():
        res["pipelines"][name] = draw_stats(d, n_img, batch_size, first, share)
        res["draws"][name] = d.tolist()
        s = res["pipelines"][name]
        print(
            f"  {name:<26} rho first {s['first']}: {s['rho_first']:+.3f}  epoch: "
            f"{s['rho_all']:+.3f}  distinct {s['distinct_mean']:.1f} (min {s['distinct_min']})",
            flush=True,
        )

    sweep = {}
    for buf in (2000, 8000, n_ref):
        d = reference_draws(
            ref.read_tfrecords(work / "ref_c1", seed=0, shuffle_num=buf, pairs=False), n_ref
        )
        sweep[str(buf)] = {"rho_first": order_bias(d[:first]), "rho_all": order_bias(d)}
    res["ref_c_records"] = n_ref
    res["ref_c_buffer_sweep"] = sweep
    return res


SEQ_FOLDER = dict(sequences=40, frames=60, size=(160, 160))
PPW_SWEEP = (8, 32)


def run_sequence(work: Path, first: int, seeds: int, folder: Path | None = None) -> dict:
    """The sequence-mode figures (module docstring)."""
    import numpy as np

    from sr.bench.folders import write_sequences
    from sr.bench.sequences import measure_sequence_shuffle, null_spread

    spec = None
    if folder is None:
        folder = write_sequences(SHARED_SAMPLE, work / "sequences", **SEQ_FOLDER)
        spec = {**SEQ_FOLDER, "step": (1, 3), "from": str(SHARED_SAMPLE)}
    res = measure_sequence_shuffle(folder, first)
    res["folder_spec"] = spec
    for name, s in res["pipelines"].items():
        print(
            f"  {name:<48} rho window {s['rho_window']:+.3f}  sequence {s['rho_sequence']:+.3f}"
            f"  frame {s['rho_frame']:+.3f}  distinct {s['distinct_mean']:.1f} "
            f"(ideal {s['distinct_ideal']:.1f})",
            flush=True,
        )
    sweep = {}
    for ppw in PPW_SWEEP if seeds else ():
        rhos, others = [], []
        for seed in range(seeds):
            r = measure_sequence_shuffle(
                folder, first, overrides=(f"seed={seed}", f"data.patches_per_window={ppw}")
            )
            p = r["pipelines"]["project data=sequence"]
            rhos.append(p["rho_window"])
            others.append((p["rho_sequence"], p["rho_frame"]))
        rhos, others = np.asarray(rhos), np.asarray(others)
        sweep[str(ppw)] = {
            "seeds": seeds,
            "rho": rhos.tolist(),
            "rho_sequence": [float(v) for v in others[:, 0]],
            "rho_frame": [float(v) for v in others[:, 1]],
            "max_abs_sequence": float(np.abs(others[:, 0]).max()),
            "max_abs_frame": float(np.abs(others[:, 1]).max()),
            "mean": float(rhos.mean()),
            "sd": float(rhos.std(ddof=1)) if seeds > 1 else float("nan"),
            "max_abs": float(np.abs(rhos).max()),
            "within_005": int(np.sum(np.abs(rhos) <= 0.05)),
            "null_sd": null_spread(first, ppw, r["pool"]["windows"], r["n_windows"]),
        }
        w = sweep[str(ppw)]
        print(
            f"  seeds 0..{seeds - 1}, {ppw} patches/window: rho mean {w['mean']:+.3f} sd "
            f"{w['sd']:.3f} (expected {w['null_sd']:.3f}), |rho| <= 0.05 in {w['within_005']}/"
            f"{seeds}",
            flush=True,
        )
    res["seed_sweep"] = sweep
    return res


def report_sequence(res: dict) -> str:
    p = res["pool"]
    lines = [
        f"Sequence mode: {res['n_sequences']} sorted sequences, {res['n_windows']} windows of "
        f"{res['frames']} frames at stride {res['frame_stride']}; batch {res['batch_size']}; "
        f"project pool {p['windows']} windows (data.pool_frames={p['pool_frames']}, peak "
        f"{p['peak_frames']} frames), {p['patches_per_window']} patches per window; "
        f"independent-draw ideal of distinct sequences per batch "
        f"{next(iter(res['pipelines'].values()))['distinct_ideal']:.1f}.",
        "",
        f"| pipeline | rho vs window, first {res['first']} | rho vs sequence | rho vs frame in "
        "sequence | distinct sequences/batch mean (min) | windows seen | sequences seen |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in res["pipelines"].items():
        lines.append(
            f"| {name} | {s['rho_window']:+.3f} | {s['rho_sequence']:+.3f} "
            f"| {s['rho_frame']:+.3f} | {s['distinct_mean']:.1f} ({s['distinct_min']}) "
            f"| {s['windows_seen']} | {s['sequences_seen']} |"
        )
    ok = abs(res["pipelines"]["project data=sequence"]["rho_window"]) <= 0.05
    lines += [
        "",
        f"Target |rho| <= 0.05 for the project's loader (seed 0): "
        f"{'MET' if ok else 'MISSED'}. Spread of rho of an unbiased pool over {res['first']} "
        f"draws: estimated {res['null_sd']:.3f}, on the high side (sr.bench.sequences."
        f"null_spread{'; the seeds below measure it' if res.get('seed_sweep') else ''}).",
    ]
    if res.get("seed_sweep"):
        lines += [
            "",
            "Project loader, rho vs window over seeds (the spread of an unbiased loader):",
            "",
            "| patches per window | seeds | rho mean | rho sd | expected sd | max abs rho "
            "| seeds with abs rho <= 0.05 | max abs rho vs sequence | max abs rho vs frame |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for ppw, s in res["seed_sweep"].items():
            lines.append(
                f"| {ppw} | {s['seeds']} | {s['mean']:+.3f} | {s['sd']:.3f} | {s['null_sd']:.3f} "
                f"| {s['max_abs']:.3f} | {s['within_005']}/{s['seeds']} "
                f"| {s['max_abs_sequence']:.3f} | {s['max_abs_frame']:.3f} |"
            )
    return "\n".join(lines)


def report(res: dict) -> str:
    first, lines = res["first"], []
    lines += [
        f"Folder: {res['n_images']} images sorted by name; epoch = {res['epoch']} draws; "
        f"batch 64; "
        f"independent-draw ideal of distinct images per batch "
        f"{next(iter(res['pipelines'].values()))['distinct_ideal']:.1f}.",
        "",
        f"| pipeline | Spearman rho, first {first} | rho, epoch | distinct/batch mean (min) "
        "| chi2/dof vs uniform (p) | chi2/dof vs record share (p) |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in res["pipelines"].items():
        u = s["chi2_uniform"]
        e = s.get("chi2_expected")
        exp = f"{e['chi2_per_dof']:.2f} ({e['p']:.2g})" if e else "-"
        lines.append(
            f"| {name} | {s['rho_first']:+.3f} | {s['rho_all']:+.3f} | {s['distinct_mean']:.1f} "
            f"({s['distinct_min']}) | {u['chi2_per_dof']:.2f} ({u['p']:.2g}) | {exp} |"
        )
    lines += [
        "",
        f"Reference (c) with one shard ({res['ref_c_records']} records in sorted order), "
        "shuffle buffer sweep:",
        "",
        f"| shuffle buffer | rho, first {first} | rho, epoch |",
        "|---|---|---|",
    ]
    for buf, s in res["ref_c_buffer_sweep"].items():
        lines.append(f"| {buf} | {s['rho_first']:+.3f} | {s['rho_all']:+.3f} |")
    return "\n".join(lines)


def chart(res: dict | None, path: Path, seq: dict | None = None) -> None:
    """One panel per pipeline: source index against draw order; a second row (or the only one)
    for the sequence mode, window index (sorted (sequence, frame) order) against draw order."""
    import matplotlib

    matplotlib.use("Agg")
    import textwrap

    import matplotlib.pyplot as plt
    import numpy as np

    rows = []
    if res is not None:
        rows.append((res["draws"], res["pipelines"], "rho_first", "source image index (sorted)"))
    if seq is not None:
        rows.append((seq["draws"], seq["pipelines"], "rho_window", "window (sequence, frame)"))
    cols = max(len(r[0]) for r in rows)
    fig, axes = plt.subplots(
        len(rows), cols, figsize=(2.6 * cols, 2.8 * len(rows)), dpi=80, squeeze=False
    )
    for r, (draws, stats, key, ylabel) in enumerate(rows):
        top = max(int(np.max(d)) for d in draws.values())
        for c in range(cols):
            ax = axes[r, c]
            if c >= len(draws):
                ax.axis("off")
                continue
            name = list(draws)[c]
            d = np.asarray(draws[name])
            ax.plot(np.arange(len(d)), d, ",", alpha=0.6, color="tab:blue")
            title = name if r == 0 and res is not None else f"sequence mode: {name}"
            title = "\n".join(textwrap.wrap(title, 34))
            ax.set_title(f"{title}\nrho={stats[name][key]:+.2f}", fontsize=7)
            ax.set_xlabel("draw order", fontsize=8)
            ax.set_ylim(-0.02 * top, 1.02 * top)
            ax.tick_params(labelsize=7)
            if c:
                ax.set_yticklabels([])
        axes[r, 0].set_ylabel(ylabel, fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folder", type=Path, default=SHARED_SAMPLE, help="folder of sorted images")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "outputs" / "shuffle_report")
    p.add_argument("--first", type=int, default=10_000, help="draws for the early-bias figure")
    p.add_argument("--quick", action="store_true", help="only the first draws, not an epoch")
    p.add_argument(
        "--only",
        choices=("images", "sequence"),
        default=None,
        help="one part: the image loaders, or data=sequence (writes shuffle_sequence.*)",
    )
    p.add_argument(
        "--sequence-folder",
        type=Path,
        default=None,
        help="folder of sorted sequences (default: 40 x 60 frames of 160 x 160 from real photos)",
    )
    p.add_argument("--seeds", type=int, default=None, help="seeds of the sequence rho sweep")
    a = p.parse_args(argv)
    if a.only != "sequence" and not a.folder.is_dir():
        p.error(f"image folder {a.folder} does not exist: pass --folder DIR")
    if a.only != "images" and a.sequence_folder is None and not SHARED_SAMPLE.is_dir():
        p.error(f"{SHARED_SAMPLE} is absent: pass --sequence-folder DIR")
    if a.quick and a.first == 10_000:
        a.first = 4000
    if a.seeds is None:
        a.seeds = 5 if a.quick else 20
    res = seq = None
    with tempfile.TemporaryDirectory(prefix="shuffle_report-") as tmp:
        if a.only != "sequence":
            res = run(a.folder, Path(tmp), a.first, a.quick)
        if a.only != "images":
            print("sequence mode:", flush=True)
            seq = run_sequence(Path(tmp), a.first, a.seeds, a.sequence_folder)
    a.out.mkdir(parents=True, exist_ok=True)
    stem = "shuffle_sequence" if a.only == "sequence" else "shuffle_report"
    parts = ([report(res)] if res else []) + ([report_sequence(seq)] if seq else [])
    table = "\n\n".join(parts)
    (a.out / f"{stem}.md").write_text(table + "\n")
    chart(res, a.out / f"{stem}.png", seq)
    if res is not None:
        res.pop("draws")
    if seq is not None:
        seq.pop("draws")
    out = res if res is not None else {}
    if seq is not None:
        out["sequence"] = seq
    (a.out / f"{stem}.json").write_text(json.dumps(out, indent=1))
    print()
    print(table)
    print(f"\nwrote {a.out}/{stem}.json, {stem}.md, {stem}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
