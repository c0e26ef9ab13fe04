"""Shuffle quality of both loader modes against the reference pipelines, measured and drawn.

    python scripts/shuffle_report.py                 # ../shared/datasets/hr_sample (80 images)
    python scripts/shuffle_report.py --quick         # fewer draws
    python scripts/shuffle_report.py --folder DIR --out outputs/shuffle

The folder's images are sorted by name, and the source index of every drawn patch is known
(``DataLoader.patch_dataset()`` yields it; the reference pipelines carry it). For each pipeline:
the Spearman correlation between draw order and source index over the first ``--first`` draws and
over a whole epoch (the project's TFRecord record count), distinct source images per batch, and
the chi-square of per-image draw counts against uniform (and, for record-based pipelines, against
each image's share of records). Draws the scatter of source index against draw order, one panel
per pipeline, and sweeps the shuffle buffer of reference (c) written as one shard (DIV2K's
proportions: far more records per shard than the buffer holds). Writes ``shuffle_report.json``,
``shuffle_report.md`` and ``shuffle_report.png`` into ``--out``.
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
    from sr.data.images import list_images

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


def chart(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(res["draws"])
    fig, axes = plt.subplots(1, len(names), figsize=(2.6 * len(names), 2.8), dpi=80, sharey=True)
    for ax, name in zip(np.atleast_1d(axes), names):
        d = np.asarray(res["draws"][name])
        ax.plot(np.arange(len(d)), d, ",", alpha=0.6, color="tab:blue")
        ax.set_title(f"{name}\nrho={res['pipelines'][name]['rho_first']:+.2f}", fontsize=8)
        ax.set_xlabel("draw order", fontsize=8)
        ax.tick_params(labelsize=7)
    np.atleast_1d(axes)[0].set_ylabel("source image index (sorted)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folder", type=Path, default=SHARED_SAMPLE, help="folder of sorted images")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "outputs" / "shuffle_report")
    p.add_argument("--first", type=int, default=10_000, help="draws for the early-bias figure")
    p.add_argument("--quick", action="store_true", help="only the first draws, not an epoch")
    a = p.parse_args(argv)
    if not a.folder.is_dir():
        p.error(f"image folder {a.folder} does not exist: pass --folder DIR")
    if a.quick and a.first == 10_000:
        a.first = 4000
    with tempfile.TemporaryDirectory(prefix="shuffle_report-") as tmp:
        res = run(a.folder, Path(tmp), a.first, a.quick)
    a.out.mkdir(parents=True, exist_ok=True)
    table = report(res)
    (a.out / "shuffle_report.md").write_text(table + "\n")
    chart(res, a.out / "shuffle_report.png")
    res.pop("draws")
    (a.out / "shuffle_report.json").write_text(json.dumps(res, indent=1))
    print()
    print(table)
    print(f"\nwrote {a.out}/shuffle_report.json, shuffle_report.md, shuffle_report.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
