"""RCAN, SAFMN and RealPLKSR beside their official PyTorch classes (issue 45): for each preset,
parameters (ours: Keras and the layout's count; the official class's), G multiply-adds per
output megapixel (``sr.models.complexity``, convs), ms to upscale a 256 x 256 RGB LR image with
Keras (as benchmarks/model_table.py), max |Keras - PyTorch| and TFLite / ONNX dB against
PyTorch on the fixtures, and a training step (forward, L1, backward, Adam) timed beside the
official class on the same CPU, batch and patch: median of --steps after two warm-ups, the
ratio PyTorch / Keras (> 1: Keras faster). The timing helpers are benchmarks/arch_swinir.py's.

    python -m benchmarks.arch_rcan [--presets rcan_tiny,safmn_tiny,...] [--batch 4]
        [--patch 48] [--steps 5] [--repeat 3] [--no-256] [--no-export]

benchmarks/arch_safmn.py and arch_realplksr.py run it on their presets. Needs torch and
spandrel's files (the official classes, tests/fixtures/pytorch/make_*.py).
"""

from __future__ import annotations

import argparse
import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.arch_swinir import keras_step, median_ms, ms_256, torch_step  # noqa: E402
from benchmarks.model_table import cpu_name  # noqa: E402
from sr.config import compose  # noqa: E402
from sr.models.complexity import macs_per_output_megapixel  # noqa: E402
from sr.models.registry import build_model  # noqa: E402

PRESETS = ["rcan_tiny", "safmn_tiny", "realplksr_tiny", "safmn", "realplksr", "rcan"]
FIXTURES = {"rcan": ["rcan_tiny", "rcan_y"], "safmn": ["safmn_tiny", "safmn_ffn"],
            "realplksr": ["realplksr_tiny", "realplksr_ln"]}  # fmt: skip


def torch_module(keys: dict):
    """The official class of ``keys`` (x4 RGB), in train mode."""
    from tests.fixtures.pytorch.make_rcan import official

    return official(keys["arch"], keys, 3)


def fixture_rows(arch: str, export: bool) -> list[str]:
    """max |Keras - PyTorch| and the exports' dB on each fixture of ``arch``."""
    import tempfile
    from pathlib import Path

    from sr.deploy import psnr_float
    from tests.test_dat import fixture, imported
    from tests.test_swinir import exported_outputs

    layout = importlib.import_module(f"sr.models.{arch}.layout")
    rows = []
    for name in FIXTURES[arch]:
        _, model = imported(layout, name)
        _, x, want = fixture(name)
        diff = float(np.abs(model(x).numpy() - want).max())
        line = f"  fixture {name} {x.shape[1]}x{x.shape[2]}: max |Keras - PyTorch| {diff:.1e}"
        if export:
            with tempfile.TemporaryDirectory() as tmp:
                outs = exported_outputs(model, x, Path(tmp))
            line += "".join(f", {f} {psnr_float(o, want):.1f} dB" for f, o in outs.items())
        rows.append(line)
    return rows


def preset_rows(preset: str, args) -> list[str]:
    import torch

    keys = dict(compose(f"model={preset}").model)
    layout = importlib.import_module(f"sr.models.{keys['arch']}.layout")
    module = torch_module(keys)
    theirs = sum(p.numel() for p in module.parameters())
    model = build_model(keys, 4, 3)
    macs = macs_per_output_megapixel(model, 4)
    line = (f"{preset}: parameters {model.count_params():,} (Keras) / "
            f"{layout.expected_parameters(keys):,} (layout) / {theirs:,} (PyTorch), "
            f"{macs:.0f} G mult-adds per output MP")  # fmt: skip
    if args.size256:
        line += f", {ms_256(model, args.repeat):.0f} ms per 256x256 LR (Keras)"
    rows = [line]
    torch.set_num_threads(os.cpu_count())
    k = median_ms(keras_step(model, args.batch, args.patch), args.steps)
    t = median_ms(torch_step(module, args.batch, args.patch), args.steps)
    rows.append(f"  train step, batch {args.batch}, LR patch {args.patch}: Keras {k:.0f} ms, "
                f"PyTorch {t:.0f} ms, ratio PyTorch/Keras {t / k:.2f}")  # fmt: skip
    return rows


def main(argv=None, presets=PRESETS) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default=",".join(presets))
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--patch", type=int, default=48)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-256", dest="size256", action="store_false")
    parser.add_argument("--no-export", dest="export", action="store_false")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}; "
          f"TensorFlow {tf.__version__}", flush=True)  # fmt: skip
    chosen = args.presets.split(",")
    for arch in FIXTURES:
        if any(p.startswith(arch) for p in chosen):
            for row in fixture_rows(arch, args.export):
                print(row, flush=True)
    for preset in chosen:
        for row in preset_rows(preset, args):
            print(row, flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
