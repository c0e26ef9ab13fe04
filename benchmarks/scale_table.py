"""How many input cores a GPU needs: the table of ``docs/scale.md``.

    python benchmarks/scale_table.py                           # print the markdown tables
    python benchmarks/scale_table.py --check --out outputs/scale_table.md
    python benchmarks/scale_table.py --gpu "H100 TF32" --bench my_gpu_host/bench_data.json

For ESPCN, EDSR-baseline and EDSR (32 x 256) at a per-GPU batch of 16 and 64 on 1, 4 and 8 GPUs:
the patches/s one GPU consumes and the CPU cores each data mode needs to keep data-wait below 2 %.

    step time       t = t0 + 3 F B / (P e)      F: forward conv FLOPs per patch (counted here
                                                from the project's builders), B: batch per GPU,
                                                P: GPU peak FLOP/s (datasheet), e: efficiency,
                                                t0: fixed cost per step (both assumed)
    per-GPU demand  R = B / t                   patches/s
    cores           n = G R c / u               c: CPU-seconds per patch (measured here by
                                                scripts/bench_data.py, worst of the runs given),
                                                u: highest utilisation of the input cores

Every input is marked in ``INPUTS`` below as measured here, published (with its source) or
assumed; ``docs/scale.md`` explains each. The FLOP counter (:func:`conv_flops`,
:func:`model_flops`) is tested in ``tests/test_scale_table.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------------------------------------
# inputs: published (P), assumed (A), measured here (M)
# ------------------------------------------------------------------------------------------------
# GPU peak dense FLOP/s (P): vendor datasheets. "fp32" is what train.precision=float32 runs
# on; TensorFlow runs float32 convolutions as TF32 on Ampere and Hopper by default
# (tf.config.experimental.enable_tensor_float_32_execution, on unless disabled), so a float32
# run of this project on an A100/H100 uses the TF32 peak. "mixed" is
# train.precision=float16 or bfloat16.
GPUS = {
    "V100 fp32": (15.7e12, "NVIDIA V100 datasheet (SXM2): FP32 15.7 TFLOPS"),
    "V100 mixed": (125e12, "NVIDIA V100 datasheet (SXM2): Tensor Core 125 TFLOPS"),
    "A100 TF32": (156e12, "NVIDIA A100 datasheet: TF32 Tensor Core 156 TFLOPS (dense)"),
    "A100 mixed": (312e12, "NVIDIA A100 datasheet: FP16/BF16 Tensor Core 312 TFLOPS (dense)"),
    "H100 TF32": (
        494.7e12,
        "NVIDIA H100 SXM datasheet: TF32 Tensor Core 989 TFLOPS with sparsity, 494.7 dense",
    ),
    "H100 mixed": (
        989.4e12,
        "NVIDIA H100 SXM datasheet: FP16/BF16 Tensor Core 1979 TFLOPS with sparsity, 989.4 dense",
    ),
}
DEFAULT_GPU = "A100 TF32"
EFFICIENCY = 0.5  # (A) sustained / peak FLOP/s of the convolutions (docs/scale.md: why)
STEP_OVERHEAD_S = 1e-3  # (A) fixed cost of a step: launches, optimizer update, dispatch
TRAIN_FLOPS_FACTOR = 3  # (A) forward + backward = 3 x forward (backward: grads of x and of W)
UTILISATION = 0.9  # (A, from M) input cores at most 90 % busy: the per-repeat spread
#                    of bench_data (slowest repeat 0.94 of the median, tfrecord and generator)
HANDOFF_S = 0.38e-3  # (M) next(iterator) of a ready batch inside training, docs/performance.md
DATA_WAIT_TARGET = 0.02
BENCH_PATCH = 96  # (M) HR patch of every bench_data figure (the project default, x4: LR 24)
MODEL_CONF = {  # name: (conf/model YAML, overrides): the project's own configs
    "ESPCN": ("espcn", {}),
    "EDSR-baseline": ("edsr_baseline", {}),
    "EDSR (32x256)": ("edsr_baseline", {"blocks": 32, "features": 256, "res_scale": 0.1}),
}
# data mode: (label, bench_data key, note); the key is looked up in "pipelines" then "ppi_sweep"
MODES = {
    "tfrecord": ("data=tfrecord", "tfrecord"),
    "generator": ("data=generator, folder in the pool", "generator"),
    "generator_decode": ("data=generator, decoding (64 patches/decode)", "64"),
}
DEFAULT_BENCH = (
    ROOT / "docs" / "perf" / "bench_data.json",
    ROOT / "docs" / "perf" / "run2" / "bench_data.json",
)
BATCHES = (16, 64)
GPU_COUNTS = (1, 4, 8)


# ------------------------------------------------------------------------------------------------
# FLOPs of the project's models
# ------------------------------------------------------------------------------------------------
def conv_flops(
    kernel: tuple[int, int], c_in: int, c_out: int, h_out: int, w_out: int, groups: int = 1
) -> int:
    """Forward FLOPs of one 2-D convolution: 2 per multiply-add (bias, activation excluded).

    ``2 * kh * kw * (c_in / groups) * c_out * h_out * w_out``."""
    kh, kw = kernel
    return 2 * kh * kw * (c_in // groups) * c_out * h_out * w_out


def model_flops(model, h: int, w: int) -> dict:
    """Conv FLOPs of one forward pass of ``model`` on a ``[1, h, w, C]`` input.

    The model (built with unknown height and width, as the builders make them) is cloned on a
    fixed input shape so that every ``Conv2D`` has concrete input and output shapes; each is
    counted by :func:`conv_flops`. Element-wise layers (activations, additions, rescaling) and
    the pixel shuffle are left out: for these models they are below 1 % of the conv FLOPs.

    Returns:
        ``{"flops": total, "per_pixel": total / (h w), "params": parameters,
        "layers": [(name, flops), ...]}``.
    """
    import keras

    c = model.input.shape[-1]
    fixed = keras.models.clone_model(model, input_tensors=keras.Input((h, w, c), batch_size=1))
    layers = []
    for layer in fixed.layers:
        if isinstance(layer, keras.layers.Conv2D) and not isinstance(
            layer, keras.layers.Conv2DTranspose
        ):
            if layer.data_format != "channels_last":
                raise ValueError(f"{layer.name}: only channels_last is counted")
            _, ho, wo, co = layer.output.shape
            ci = layer.input.shape[-1]
            layers.append(
                (layer.name, conv_flops(layer.kernel_size, ci, co, ho, wo, layer.groups))
            )
    total = sum(f for _, f in layers)
    return {
        "flops": total,
        "per_pixel": total / (h * w),
        "params": model.count_params(),
        "layers": layers,
    }


def build_model(name: str, scale: int = 4):
    """The model ``name`` of ``MODEL_CONF``: its ``conf/model`` preset composed as train.py does,
    with the overrides of the table, built by the registry (``sr.models.registry``), on Y."""
    from omegaconf import OmegaConf

    from sr.config import compose
    from sr.models.registry import build_model as build

    yaml, overrides = MODEL_CONF[name]
    keys = {**OmegaConf.to_container(compose(f"model={yaml}").model, resolve=True), **overrides}
    return build(keys, scale, 1)


# ------------------------------------------------------------------------------------------------
# the formula
# ------------------------------------------------------------------------------------------------
def step_time(
    flops_per_patch: float,
    batch: int,
    peak: float,
    efficiency: float = EFFICIENCY,
    overhead: float = STEP_OVERHEAD_S,
    factor: float = TRAIN_FLOPS_FACTOR,
) -> float:
    """Seconds per training step on one GPU: ``overhead + factor F B / (peak efficiency)``."""
    return overhead + factor * flops_per_patch * batch / (peak * efficiency)


def cores_needed(
    gpus: int,
    patches_per_s_per_gpu: float,
    cpu_s_per_patch: float,
    utilisation: float = UTILISATION,
) -> float:
    """CPU cores that supply ``gpus`` GPUs with the input cores at most ``utilisation`` busy:
    ``G R c / u``."""
    return gpus * patches_per_s_per_gpu * cpu_s_per_patch / utilisation


def cpu_cost(bench: list[dict], key: str) -> tuple[float, list[float]]:
    """CPU-seconds per patch of a bench_data pipeline: the worst (highest) of the runs given,
    and every run's value. ``key`` is a pipeline name or a patches-per-decode of the sweep."""
    values = []
    for res in bench:
        row = res["pipelines"].get(key) or res.get("ppi_sweep", {}).get(key)
        if row is None:
            raise KeyError(f"bench_data has no pipeline or ppi_sweep entry {key!r}")
        values.append(row["cpu_s_per_1000"] / 1000)
    return max(values), values


def scale_cost(c: float, patch: int, decode_s_per_patch: float = 0.0) -> float:
    """CPU cost per patch at HR ``patch`` from the cost measured at ``BENCH_PATCH`` (assumed:
    everything but decoding grows with the patch area; decoding per patch does not, at a fixed
    number of patches per decode)."""
    rest = c - decode_s_per_patch
    return decode_s_per_patch + rest * (patch / BENCH_PATCH) ** 2


def patch_bytes(patch: int, scale: int = 4) -> int:
    """Bytes of one training pair as the pipeline yields it: float32 LR and HR, one channel."""
    return 4 * (patch * patch + (patch // scale) ** 2)


# ------------------------------------------------------------------------------------------------
# tables
# ------------------------------------------------------------------------------------------------
def _n(x: float) -> str:
    if x < 0.05:
        return "<0.1"
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def inputs(
    bench: list[dict], patch: int = BENCH_PATCH, scale: int = 4, decode_scale: float = 1.0
) -> tuple[dict, dict]:
    """(models, costs): each model's parameters and conv FLOPs per LR pixel and per patch, and
    each data mode's CPU-seconds per patch (worst run, scaled to ``patch``; the decoding share
    of the decoding generator times ``decode_scale``, e.g. 3.6 for DIV2K-size images)."""
    lr = patch // scale
    models = {}
    for name in MODEL_CONF:
        f = model_flops(build_model(name, scale), lr, lr)
        models[name] = {
            "params": f["params"],
            "flops_per_lr_pixel": f["per_pixel"],
            "flops_per_patch": f["per_pixel"] * lr * lr,
        }
    decode_ms = max(r["decode"]["cpu_ms_per_image"] for r in bench if "decode" in r)
    costs = {}
    for mode, (label, key) in MODES.items():
        c, runs = cpu_cost(bench, key)
        dec = decode_ms / 1000 / int(key) if key.isdigit() else 0.0
        c = scale_cost(c, patch, dec) + dec * (decode_scale - 1)
        costs[mode] = {"label": label, "key": key, "c": c, "runs": runs, "decode_share": dec}
    return models, costs


def table_rows(
    models: dict,
    costs: dict,
    peak: float,
    gpu_counts=GPU_COUNTS,
    patch=BENCH_PATCH,
    scale: int = 4,
    efficiency: float = EFFICIENCY,
    overhead: float = STEP_OVERHEAD_S,
    utilisation: float = UTILISATION,
) -> list[dict]:
    rows = []
    for name, m in models.items():
        for b in BATCHES:
            t = step_time(m["flops_per_patch"], b, peak, efficiency, overhead)
            r = b / t
            for g in gpu_counts:
                rows.append(
                    {
                        "model": name,
                        "batch": b,
                        "gpus": g,
                        "step_s": t,
                        "per_gpu": r,
                        "demand": g * r,
                        "cores": {
                            k: cores_needed(g, r, v["c"], utilisation) for k, v in costs.items()
                        },
                        "service_gb_s": g * r * patch_bytes(patch, scale) / 1e9,
                        "floor": HANDOFF_S / t > DATA_WAIT_TARGET,
                    }
                )
    return rows


def compute(
    bench: list[dict],
    gpu: str = DEFAULT_GPU,
    patch: int = BENCH_PATCH,
    scale: int = 4,
    efficiency: float = EFFICIENCY,
    overhead: float = STEP_OVERHEAD_S,
    utilisation: float = UTILISATION,
    per_gpu: bool = True,
    decode_scale: float = 1.0,
) -> dict:
    """Everything the tables show: the main table for ``gpu`` and, with ``per_gpu``, one GPU of
    every kind in ``GPUS`` (cores grow linearly with the GPU count)."""
    models, costs = inputs(bench, patch, scale, decode_scale)
    kw = {
        "patch": patch,
        "scale": scale,
        "efficiency": efficiency,
        "overhead": overhead,
        "utilisation": utilisation,
    }
    rows = table_rows(models, costs, GPUS[gpu][0], **kw)
    others = []
    if per_gpu:
        for name, (peak, _) in GPUS.items():
            others += [dict(r, gpu=name) for r in table_rows(models, costs, peak, (1,), **kw)]
    return {
        "gpu": gpu,
        "peak": GPUS[gpu][0],
        "patch": patch,
        "scale": scale,
        "decode_scale": decode_scale,
        "efficiency": efficiency,
        "overhead": overhead,
        "utilisation": utilisation,
        "models": models,
        "costs": costs,
        "rows": rows,
        "per_gpu": others,
    }


# Cross-check of EFFICIENCY against a published training time (P: Lim et al., "Enhanced Deep
# Residual Networks for Single Image Super-Resolution", CVPRW 2017, sec. 4.2: EDSR took 8 days to
# train on NVIDIA Titan X GPUs). The paper's EDSR: RGB, x2 (x3 and x4 start from it), LR patches
# 48 x 48, batch 16. The number of updates is not in the paper (A: 300,000, the schedule of the
# project's recipe conf/experiment/edsr_baseline_div2k.yaml and of the authors' EDSR-PyTorch
# defaults, 300 epochs of 1000 batches). Titan X peak FP32 (P, NVIDIA): Maxwell 6.6, Pascal 11.0
# TFLOP/s; the paper does not say which.
EDSR_PAPER = {
    "days": 8,
    "steps": 300_000,
    "batch": 16,
    "lr_patch": 48,
    "titan_x": {"Maxwell": 6.6e12, "Pascal": 11.0e12},
}


def published_check() -> str:
    """Sustained FLOP/s implied by the EDSR paper's training time, and its share of Titan X
    peak (the efficiency the step-time model assumes: ``EFFICIENCY``)."""
    from sr.models.registry import make_model

    e = EDSR_PAPER
    model = make_model("edsr", scale=2, channels=3, features=256, blocks=32, res_scale=0.1)
    f = model_flops(model, e["lr_patch"], e["lr_patch"])["flops"]
    step = e["days"] * 86400 / e["steps"]
    sustained = TRAIN_FLOPS_FACTOR * f * e["batch"] / step
    shares = ", ".join(
        f"{100 * sustained / peak:.0f} % of Titan X {name}" for name, peak in e["titan_x"].items()
    )
    return (
        f"Cross-check (EDSR paper): EDSR x2 RGB, {f / 1e9:.0f} GFLOPs forward per 48 x 48 "
        f"patch; {e['days']} days / {e['steps']:,} steps = {step:.2f} s per step of "
        f"{e['batch']} -> {sustained / 1e12:.2f} TFLOP/s sustained = {shares} "
        f"(assumed here: {EFFICIENCY:g})."
    )


def markdown(res: dict) -> str:
    per_gpu = res["per_gpu"]
    lines = []
    lr = res["patch"] // res["scale"]
    lines += [
        f"Models at x{res['scale']}, Y channel, LR patch {lr} x {lr} (HR {res['patch']}):",
        "",
        "| model | parameters | forward MFLOPs per LR pixel | forward GFLOPs per patch |",
        "|---|---|---|---|",
    ]
    for name, m in res["models"].items():
        lines.append(
            f"| {name} | {m['params'] / 1e6:.3f} M | {m['flops_per_lr_pixel'] / 1e6:.4g} "
            f"| {m['flops_per_patch'] / 1e9:.4g} |"
        )
    lines += [
        "",
        "CPU cost per patch (measured here, `scripts/bench_data.py`; worst of the runs):",
        "",
        "| data mode | bench_data entry | CPU-ms per patch, runs | used |",
        "|---|---|---|---|",
    ]
    for c in res["costs"].values():
        runs = ", ".join(f"{1000 * v:.4f}" for v in c["runs"])
        lines.append(f"| {c['label']} | `{c['key']}` | {runs} | {1000 * c['c']:.4f} |")
    lines += [
        "",
        f"GPU: {res['gpu']}, peak {res['peak'] / 1e12:g} TFLOP/s x efficiency "
        f"{res['efficiency']:g}, fixed {1000 * res['overhead']:g} ms per step; input cores at "
        f"most {100 * res['utilisation']:.0f} % busy. † = step shorter than "
        f"{1000 * HANDOFF_S:g} ms / {100 * DATA_WAIT_TARGET:g} % = "
        f"{1000 * HANDOFF_S / DATA_WAIT_TARGET:.0f} ms: the batch handoff alone measured here "
        "exceeds 2 % (see docs/scale.md)."
        + (f" Decoding cost x{res['decode_scale']:g}." if res["decode_scale"] != 1 else ""),
        "",
        "| model | batch/GPU | GPUs | step ms | patches/s per GPU | patches/s total "
        "| cores "
        + " | cores ".join(c["label"] for c in res["costs"].values())
        + " | GB/s from tf.data service |",
        "|---|---|---|---|---|---|" + "---|" * len(res["costs"]) + "---|",
    ]
    for r in res["rows"]:
        dag = " †" if r["floor"] else ""
        cores = " | ".join(_n(v) for v in r["cores"].values())
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['gpus']} | {1000 * r['step_s']:.3g}{dag} "
            f"| {r['per_gpu']:,.0f} | {r['demand']:,.0f} | {cores} | {r['service_gb_s']:.3g} |"
        )
    if per_gpu:
        labels = [c["label"] for c in res["costs"].values()]
        lines += [
            "",
            "Per GPU (multiply the cores by the GPU count):",
            "",
            "| GPU | model | batch/GPU | step ms | patches/s per GPU | cores "
            + " | cores ".join(labels)
            + " |",
            "|---|---|---|---|---|" + "---|" * len(labels),
        ]
        for r in per_gpu:
            dag = " †" if r["floor"] else ""
            cores = " | ".join(_n(v) for v in r["cores"].values())
            lines.append(
                f"| {r['gpu']} | {r['model']} | {r['batch']} "
                f"| {1000 * r['step_s']:.3g}{dag} | {r['per_gpu']:,.0f} | {cores} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--bench",
        type=Path,
        action="append",
        default=None,
        help="bench_data.json (repeatable; the worst CPU cost of the runs is used; "
        "default: docs/perf/bench_data.json and docs/perf/run2/bench_data.json)",
    )
    p.add_argument("--gpu", default=DEFAULT_GPU, choices=sorted(GPUS))
    p.add_argument("--efficiency", type=float, default=EFFICIENCY)
    p.add_argument("--overhead-ms", type=float, default=1000 * STEP_OVERHEAD_S)
    p.add_argument("--utilisation", type=float, default=UTILISATION)
    p.add_argument("--patch", type=int, default=BENCH_PATCH, help="HR patch size (default 96)")
    p.add_argument(
        "--decode-scale",
        type=float,
        default=1.0,
        help="decode cost per image relative to the bench folder's (about 1024 x 768;"
        " DIV2K's 2040 x 1400: 3.6, assumed proportional to pixels)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="also print the cross-check against the EDSR paper's training time",
    )
    p.add_argument("--no-per-gpu", action="store_true", help="leave out the per-GPU table")
    p.add_argument("--out", type=Path, default=None, help="also write the tables here")
    a = p.parse_args(argv)
    paths = a.bench or [q for q in DEFAULT_BENCH if q.is_file()]
    if not paths:
        p.error("no bench_data.json: run python scripts/bench_data.py or pass --bench")
    bench = [json.loads(Path(q).read_text()) for q in paths]
    kw = {
        "efficiency": a.efficiency,
        "overhead": a.overhead_ms / 1000,
        "utilisation": a.utilisation,
    }
    res = compute(
        bench, a.gpu, a.patch, per_gpu=not a.no_per_gpu, decode_scale=a.decode_scale, **kw
    )
    shown = [
        str(q.resolve().relative_to(ROOT)) if q.resolve().is_relative_to(ROOT) else str(q)
        for q in paths
    ]
    text = "CPU costs from: " + ", ".join(f"`{q}`" for q in shown) + "\n\n" + markdown(res)
    if a.check:
        text += "\n" + published_check() + "\n"
    print(text, end="")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
        print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
