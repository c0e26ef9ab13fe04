"""The reports of ``scripts/bench_data.py``: the machine's description, the markdown tables and
targets of ``bench_data.md`` and ``bench_sequence.md``, and the charts ``bench_data.png`` and
``bench_ppi.png``."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from sr.bench.pipeline_runs import GEN_POOL, PIPELINES
from sr.bench.sequence_runs import SEQ_PIPELINES


def machine() -> dict:
    """CPU, cores, RAM, library versions and the load average before the run."""
    import numpy
    import PIL
    import tensorflow as tf

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo")
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal")
    )
    return {
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "ram_gb": round(mem / 2**20, 1),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "numpy": numpy.__version__,
        "pillow": PIL.__version__,
        "load_avg_before": os.getloadavg(),
    }


def fmt_ratio(x: float) -> str:
    """A speed ratio: 2 decimals below 10, none above."""
    return f"{x:.2f}" if x < 10 else f"{x:.0f}"


def table_head(head: str) -> list[str]:
    """A markdown table's header line ``head`` (``| a | b |``) and its separator line
    (``|---|---|``), one ``---`` per column."""
    return [head, "|" + "---|" * head.count(" | ") + "---|"]


def report(res: dict) -> str:
    """``bench_data.md``: the pipelines table, the decode-bound sweep and the targets."""
    rows, ceiling = res["pipelines"], res["pipelines"]["ceiling"]["median"]
    refs = {k: rows[k]["median"] for k in ("ref_a", "ref_b", "ref_c")}
    head = (
        "| pipeline | patches/s median (min-max) | batches/s | x(a) | x(b) | x(c) | of ceiling "
        "| first batch s | decodes/patch | KB read/patch | distinct/batch mean (min) "
        "| peak RSS MB | CPU-s/1000 patches |"
    )
    lines = table_head(head)
    for name, r in rows.items():
        m, b = r["median"], r["batch_size"]
        dist = (
            "-"
            if r["distinct_mean"] is None
            else f"{r['distinct_mean']:.1f} ({r['distinct_min']})"
        )
        lines.append(
            f"| {PIPELINES[name][0]} | {m:.0f} ({r['min']:.0f}-{r['max']:.0f}) | {m / b:.1f} "
            f"| {fmt_ratio(m / refs['ref_a'])} | {fmt_ratio(m / refs['ref_b'])} "
            f"| {fmt_ratio(m / refs['ref_c'])} | {100 * m / ceiling:.0f} % "
            f"| {r['first_batch_s']:.2f} | {r['decodes_per_patch']:.3f} "
            f"| {r['bytes_read_per_patch'] / 1024:.1f} | {dist} | {r['peak_rss_mb']:.0f} "
            f"| {r['cpu_s_per_1000']:.2f} |"
        )
    ideal = rows["tfrecord"]["distinct_ideal"]
    d = res["decode"]
    lines += [
        "",
        f"Independent-draw ideal of distinct images per batch of {rows['tfrecord']['batch_size']} "
        f"from {res['n_images']} images: {ideal:.1f}.",
        f"Files decoded alone ({d['workers']} threads): {d['median']:.1f} images/s "
        f"({d['min']:.1f}-{d['max']:.1f}), {d['cpu_ms_per_image']:.1f} CPU-ms per image.",
        "",
        "| patches per decode | generator patches/s median (min-max) | decode-bound ceiling "
        "| of ceiling | decodes/patch |",
        "|---|---|---|---|---|",
    ]
    for ppi, r in sorted(res["ppi_sweep"].items(), key=lambda kv: int(kv[0])):
        cap = min(d["median"] * int(ppi), ceiling)
        lines.append(
            f"| {ppi} | {r['median']:.0f} ({r['min']:.0f}-{r['max']:.0f}) | {cap:.0f} "
            f"| {100 * r['median'] / cap:.0f} % | {r['decodes_per_patch']:.4f} |"
        )
    lines += ["", "Targets:"] + [f"- {t}" for t in targets(res)]
    return "\n".join(lines)


def targets(res: dict) -> list[str]:
    """The targets of the input pipeline (``docs/performance.md``), each MET or MISSED."""
    rows, d = res["pipelines"], res["decode"]
    ceiling = rows["ceiling"]["median"]
    tf_, g = rows["tfrecord"], rows["generator_ppi100"]
    cap100 = min(d["median"] * 100, ceiling)

    def check(ok):
        return "MET" if ok else "MISSED"

    out = [
        f"tfrecord >= 70 % of ceiling: {100 * tf_['median'] / ceiling:.0f} % "
        f"{check(tf_['median'] >= 0.7 * ceiling)}",
        f"tfrecord >= 4x ref (c): {tf_['median'] / rows['ref_c']['median']:.1f}x "
        f"{check(tf_['median'] >= 4 * rows['ref_c']['median'])}",
        f"generator ppi=100 >= 4x ref (b): {g['median'] / rows['ref_b']['median']:.1f}x "
        f"{check(g['median'] >= 4 * rows['ref_b']['median'])}",
        f"generator ppi=100 >= 70 % of decode-bound ceiling ({cap100:.0f}/s): "
        f"{100 * g['median'] / cap100:.0f} % {check(g['median'] >= 0.7 * cap100)}",
        f"generator distinct/batch >= 60 (pool >= B): mean {g['distinct_mean']:.1f}, min "
        f"{g['distinct_min']} {check(g['distinct_min'] >= 60)}",
        f"tfrecord distinct/batch >= 90 % of ideal {tf_['distinct_ideal']:.1f}: mean "
        f"{tf_['distinct_mean']:.1f} ({100 * tf_['distinct_mean'] / tf_['distinct_ideal']:.0f} %) "
        f"{check(tf_['distinct_mean'] >= 0.9 * tf_['distinct_ideal'])}",
    ]
    return out


def charts(res: dict, out: Path) -> None:
    """Write ``bench_data.png`` (patches/s of every pipeline) and ``bench_ppi.png`` (the
    generator against patches per decoded image) into ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pipelines_chart(plt, res, out / "bench_data.png")
    ppi_chart(plt, res, out / "bench_ppi.png")


def pipelines_chart(plt, res: dict, path: Path) -> None:
    """Horizontal bars: median patches/s of each pipeline, min-max whiskers, log scale."""
    rows = res["pipelines"]
    names = list(rows)
    med = [rows[n]["median"] for n in names]
    err = [
        [m - rows[n]["min"] for n, m in zip(names, med)],
        [rows[n]["max"] - m for n, m in zip(names, med)],
    ]
    colors = [
        "tab:blue"
        if PIPELINES[n][1] == "project"
        else "tab:gray"
        if PIPELINES[n][1] == "ref"
        else "tab:green"
        for n in names
    ]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=90)
    ax.barh([PIPELINES[n][0] for n in names], med, xerr=err, color=colors)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("patches/s (median, min-max whiskers; log scale)")
    ax.set_title(f"Input pipelines, {res['n_images']} PNGs, B=64, {res['machine']['nproc']} cores")
    for y, m in enumerate(med):
        ax.text(m * 1.05, y, f"{m:.0f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def ppi_chart(plt, res: dict, path: Path) -> None:
    """The generator's patches/s against patches per decoded image, beside its decode-bound
    ceiling and reference (b)."""
    rows = res["pipelines"]
    sweep = sorted(res["ppi_sweep"].items(), key=lambda kv: int(kv[0]))
    ppi = [int(k) for k, _ in sweep]
    ceiling, dec = rows["ceiling"]["median"], res["decode"]["median"]
    fig, ax = plt.subplots(figsize=(5.5, 3.4), dpi=90)
    ax.plot(ppi, [r["median"] for _, r in sweep], "o-", label="generator (measured)")
    ax.plot(ppi, [min(dec * p, ceiling) for p in ppi], "k--", label="decode-bound ceiling")
    ax.axhline(rows["ref_b"]["median"], color="tab:gray", ls=":", label="ref (b), 100/decode")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ppi, [str(p) for p in ppi])
    ax.set_xlabel("patches per decoded image")
    ax.set_ylabel("patches/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title(f"Generator mode, pool of {GEN_POOL} < {res['n_images']} images")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def report_sequence(res: dict) -> str:
    """``bench_sequence.md``: the sequence pipelines table and the pool's figures."""
    rows, d = res["pipelines"], res["decode"]
    proj, naive = rows["seq_project"], rows["seq_naive"]
    head = (
        "| pipeline | patches/s median (min-max) | batches/s | x naive | first batch s "
        "| frame decodes/patch | KB read/patch | distinct sequences/batch mean (min) "
        "| peak RSS MB | CPU-s/1000 patches |"
    )
    lines = table_head(head)
    for name, r in rows.items():
        m = r["median"]
        lines.append(
            f"| {SEQ_PIPELINES[name]} | {m:.0f} ({r['min']:.0f}-{r['max']:.0f}) "
            f"| {m / r['batch_size']:.2f} | {fmt_ratio(m / naive['median'])} "
            f"| {r['first_batch_s']:.2f} | {r['decodes_per_patch']:.3f} "
            f"| {r['bytes_read_per_patch'] / 1024:.1f} "
            f"| {r['distinct_mean']:.2f} ({r['distinct_min']}) | {r['peak_rss_mb']:.0f} "
            f"| {r['cpu_s_per_1000']:.2f} |"
        )
    cap = d["median"] / max(proj["decodes_per_patch"], 1e-9)
    h, w = proj["frame_size"]
    lines += [
        "",
        f"Folder: {proj['n_sequences']} sorted sequences, {proj['n_frames']} PNG frames of "
        f"{w} x {h}, {proj['n_windows']} windows of 3 frames at stride 1; batch "
        f"{proj['batch_size']}, lr {proj['lr_shape']}, hr {proj['hr_shape']}. Independent-draw "
        f"ideal of distinct sequences per batch: {proj['distinct_ideal']:.2f}.",
        f"Project pool: {proj['pool_windows']} windows (of {proj['n_windows']}), "
        f"{proj['patches_per_window']} patches per window; peak {proj['peak_frames']} decoded "
        f"frames held against the bound data.pool_frames={proj['pool_frames']} "
        f"({'within' if proj['peak_frames'] <= proj['pool_frames'] else 'OVER'} the bound).",
        f"Frames decoded alone ({d['workers']} threads, load_y): {d['median']:.1f} frames/s "
        f"({d['min']:.1f}-{d['max']:.1f}), {d['cpu_ms_per_frame']:.1f} CPU-ms per frame; "
        f"decode-bound ceiling of the project's loader at "
        f"{proj['decodes_per_patch']:.3f} decodes/patch: {cap:.0f} patches/s "
        f"(measured {100 * proj['median'] / cap:.0f} % of it).",
        f"Ratio project / naive: {proj['median'] / naive['median']:.1f}x; frame decodes per "
        f"patch {naive['decodes_per_patch'] / max(proj['decodes_per_patch'], 1e-9):.0f}x fewer.",
    ]
    return "\n".join(lines)
