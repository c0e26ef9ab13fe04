"""SwinIR and HAT beside their official PyTorch classes (issue 45): for each preset, parameters
(ours, counted by the layout's shapes and by Keras; the official class's), G multiply-adds per
output megapixel (convs, linears and attention products, counted from the shapes), ms to
upscale a 256 x 256 RGB LR image with Keras (as benchmarks/model_table.py: tf.function, batch
1, median of --repeat after two warm-ups), max |Keras - PyTorch| and TFLite / ONNX dB against
PyTorch on the tiny fixtures, and a training step (forward, L1, backward, Adam) timed beside the
official class on the same CPU, batch and patch: median of --steps after two warm-ups, the
ratio PyTorch / Keras (> 1: Keras faster).

    python -m benchmarks.arch_swinir [--presets swinir_tiny,hat_tiny,...] [--batch 4]
        [--patch 48] [--steps 5] [--repeat 3] [--no-256] [--no-export]

Needs torch and spandrel's files (the official classes, tests/fixtures/pytorch/make_*.py).
Every figure is printed with the CPU (``/proc/cpuinfo``), the cores and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.model_table import cpu_name  # noqa: E402
from sr.config import compose  # noqa: E402
from sr.models.hat import layout as hat_layout  # noqa: E402
from sr.models.registry import build_model  # noqa: E402
from sr.models.swinir import layout as swinir_layout  # noqa: E402

PRESETS = ["swinir_tiny", "hat_tiny", "swinir_light", "swinir", "swinir_real", "hat_s", "hat"]
FIXTURES = {"swinir": ["swinir_tiny", "swinir_light_tiny", "swinir_real_tiny"],
            "hat": ["hat_tiny"]}  # fmt: skip


def keys_of(preset: str) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(compose(f"model={preset}").model)


def torch_module(keys: dict):
    """The official class of ``keys`` (x4 RGB), in train mode."""
    from tests.fixtures.pytorch import make_hat, make_swinir

    common = {"embed_dim": keys["embed_dim"], "depths": list(keys["depths"]),
              "num_heads": list(keys["heads"]), "window_size": keys["window"],
              "mlp_ratio": keys["mlp_ratio"], "img_size": keys["img_size"]}  # fmt: skip
    if keys["arch"] == "hat":
        return make_hat.reference(compress_ratio=keys["compress_ratio"],
                                  squeeze_factor=keys["squeeze_factor"],
                                  num_feat=keys["num_feat"], **common)  # fmt: skip
    return make_swinir.reference(upsampler=keys["upsampler"],
                                 resi_connection=keys["resi_connection"], **common)  # fmt: skip


def macs_per_output_mp(keys: dict, scale: int = 4) -> float:
    """G multiply-adds per output megapixel: every conv and linear of the layout's shapes at its
    resolution (the upsampler's convs after a pixel shuffle or nearest x2 at 4 or 16 times the
    LR pixels), plus the attention products (2 N C per token for windows of N, 2 o^2 C per
    query for HAT's overlapping windows)."""
    layout = hat_layout if keys["arch"] == "hat" else swinir_layout
    shapes = layout.shapes_of(keys, 3, scale)
    up = {"upsample.2": 4, "conv_last": 16, "conv_up2": 4, "conv_hr": 16}
    if keys.get("upsampler") == "nearest+conv":
        up |= {"conv_up1": 4}
    macs = 0.0
    for key, shape in shapes.items():
        if key.endswith(".weight") and len(shape) in (2, 4):
            prefix = key[: -len(".weight")]
            macs += float(np.prod(shape)) * up.get(prefix, 1)
    dim, w = keys["embed_dim"], keys["window"]
    blocks = sum(keys["depths"])
    macs += blocks * 2 * w * w * dim
    if keys["arch"] == "hat":
        o = w + int(w * keys["overlap_ratio"])
        macs += len(keys["depths"]) * 2 * o * o * dim
    return macs * 1e6 / (scale * scale) / 1e9


def ms_256(model, repeat: int) -> float:
    x = tf.constant(np.random.default_rng(0).random((1, 256, 256, 3), dtype=np.float32))
    call = tf.function(lambda t: model(t, training=False))
    for _ in range(2):
        call(x).numpy()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call(x).numpy()
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def keras_step(model, batch: int, patch: int):
    import keras

    opt = keras.optimizers.Adam(2e-4)
    opt.build(model.trainable_variables)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.abs(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    rng = np.random.default_rng(0)
    x = tf.constant(rng.random((batch, patch, patch, 3), dtype=np.float32))
    y = tf.constant(rng.random((batch, 4 * patch, 4 * patch, 3), dtype=np.float32))
    return lambda: step(x, y).numpy()


def torch_step(module, batch: int, patch: int):
    import torch

    opt = torch.optim.Adam(module.parameters(), lr=2e-4)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(batch, 3, patch, patch, generator=g)
    y = torch.rand(batch, 3, 4 * patch, 4 * patch, generator=g)
    module.train()

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.l1_loss(module(x), y)
        loss.backward()
        opt.step()
        return float(loss)

    return step


def median_ms(run, steps: int) -> float:
    for _ in range(2):
        run()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        run()
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def fixture_rows(arch: str, export: bool) -> list[str]:
    """max |Keras - PyTorch| and the exports' dB on each fixture of ``arch``."""
    import tempfile
    from pathlib import Path

    from sr.deploy import psnr_float
    from tests.test_swinir import exported_outputs, fixture, imported

    layout = hat_layout if arch == "hat" else swinir_layout
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

    keys = keys_of(preset)
    layout = hat_layout if keys["arch"] == "hat" else swinir_layout
    ours = layout.parameters(layout.shapes_of(keys, 3))
    module = torch_module(keys)
    theirs = sum(p.numel() for p in module.parameters())
    model = build_model(keys, 4, 3)
    line = (f"{preset}: parameters {model.count_params():,} (Keras) / {ours:,} (layout) / "
            f"{theirs:,} (PyTorch), {macs_per_output_mp(keys):.2f} G mult-adds per output "
            "MP")  # fmt: skip
    if args.size256:
        line += f", {ms_256(model, args.repeat):.0f} ms per 256x256 LR (Keras)"
    rows = [line]
    torch.set_num_threads(os.cpu_count())
    k = median_ms(keras_step(model, args.batch, args.patch), args.steps)
    t = median_ms(torch_step(module, args.batch, args.patch), args.steps)
    rows.append(f"  train step, batch {args.batch}, LR patch {args.patch}: Keras {k:.0f} ms, "
                f"PyTorch {t:.0f} ms, ratio PyTorch/Keras {t / k:.2f}")  # fmt: skip
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--patch", type=int, default=48)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-256", dest="size256", action="store_false")
    parser.add_argument("--no-export", dest="export", action="store_false")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}; "
          f"TensorFlow {tf.__version__}", flush=True)  # fmt: skip
    for arch in ("swinir", "hat"):
        for row in fixture_rows(arch, args.export):
            print(row, flush=True)
    for preset in args.presets.split(","):
        for row in preset_rows(preset, args):
            print(row, flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
