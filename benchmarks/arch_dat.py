"""DAT (and, with ``--arch omnisr``, OmniSR) beside the official PyTorch class on this CPU: for
each preset, the parameters (ours from the schema / PyTorch's module), max |Keras - PyTorch| on
the fixtures of tests/fixtures/pytorch/, and one training step (forward, L1 loss, backward, Adam)
of the same batch timed side by side in one process: median of ``--repeat`` steps after two
warm-up steps each, ratio PyTorch / ours (above 1: ours is faster).

    python -m benchmarks.arch_dat [--arch dat|omnisr] [--presets dat_tiny,dat_light]
        [--batch 2] [--patch 32] [--repeat 5] [--ms256] [--no-step]

``--ms256`` adds the milliseconds to upscale a 256 x 256 RGB LR image with Keras
(``benchmarks.arch_swinir.ms_256``: tf.function, batch 1, median of 3 after two warm-ups), the
README model table's column; ``--no-step`` leaves the training steps out.

The batch and LR patch default to a CPU-sized step (the official recipes train batch 32 of
64 x 64 LR patches on GPUs); the header gives the CPU (``lscpu``), the threads of both
frameworks and the load average. The PyTorch class is spandrel's copy of the official code,
imported without torchvision (``tests.fixtures.pytorch.make_dat.spandrel_module``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

import numpy as np

PRESETS = {
    "dat": ["dat_tiny", "dat_light", "dat_s", "dat"],
    "omnisr": ["omnisr_tiny", "omnisr"],
}
FIXTURES = {"dat": ["dat_tiny", "dat_light_tiny"], "omnisr": ["omnisr_tiny", "omnisr_nope"]}


def preset_keys(preset: str) -> dict:
    """The model keys of ``conf/model/<preset>.yaml`` (its defaults line aside)."""
    import yaml

    with open(f"conf/model/{preset}.yaml") as f:
        keys = yaml.safe_load(f) or {}
    keys.pop("defaults", None)
    return keys


def cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                 if ln.startswith("Model name")), "?")  # fmt: skip


def fixture_errors(arch: str) -> dict[str, float]:
    """max |Keras - PyTorch| on each fixture of ``arch``."""
    from safetensors.numpy import load_file

    from sr.models.registry import get

    layout = __import__(get(arch).layout, fromlist=["detect"])
    out = {}
    for name in FIXTURES[arch]:
        state = {k: v.astype(np.float32) for k, v in
                 load_file(f"tests/fixtures/pytorch/{name}.safetensors").items()}  # fmt: skip
        data = np.load(f"tests/fixtures/pytorch/{name}.npz")
        found = layout.detect(state)
        model = layout.build(found)
        layout.load(model, state, found)
        got = model(data["input"], training=False).numpy()
        out[name] = float(np.abs(got - data["output"]).max())
    return out


def torch_module(arch: str, keys: dict):
    from sr.models.registry import get
    from tests.fixtures.pytorch.make_dat import official

    cfg = {**get(arch).schema().__dict__, **keys}
    return official(arch, cfg, 3)


def keras_step(model):
    import keras
    import tensorflow as tf

    opt = keras.optimizers.Adam(1e-4)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.abs(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def torch_step(module):
    import torch

    opt = torch.optim.Adam(module.parameters(), 1e-4)
    module.train()

    def step(x, y):
        opt.zero_grad()
        loss = (module(x) - y).abs().mean()
        loss.backward()
        opt.step()
        return loss

    return step


def timed(step, x, y, repeat: int) -> float:
    for _ in range(2):
        step(x, y)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        float(step(x, y))
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def row(arch: str, preset: str, args) -> str:
    import torch

    from sr.models.complexity import parameters
    from sr.models.registry import build_model

    keys = preset_keys(preset)
    model = build_model({"arch": arch, **keys}, 4, 3)
    module = torch_module(arch, keys)
    ours, theirs = parameters(model), sum(p.numel() for p in module.parameters())
    rng = np.random.default_rng(0)
    x = rng.random((args.batch, args.patch, args.patch, 3), dtype=np.float32)
    y = rng.random((args.batch, 4 * args.patch, 4 * args.patch, 3), dtype=np.float32)
    cells = [f"{ours:,} / {theirs:,}"]
    if args.ms256:
        from benchmarks.arch_swinir import ms_256

        cells.append(f"{ms_256(model, 3):.0f}")
    if args.step:
        k_ms = timed(keras_step(model), x, y, args.repeat)
        tx, ty = (torch.from_numpy(np.ascontiguousarray(a.transpose(0, 3, 1, 2))) for a in (x, y))
        t_ms = timed(torch_step(module), tx, ty, args.repeat)
        cells += [f"{k_ms:.0f}", f"{t_ms:.0f}", f"{t_ms / k_ms:.2f}"]
    return f"| {preset} | " + " | ".join(cells) + " |"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="dat", choices=sorted(PRESETS))
    p.add_argument("--presets", default=None, help="comma-separated (default: all of --arch)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--patch", type=int, default=32)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--ms256", action="store_true", help="Keras ms per 256 x 256 RGB LR image")
    p.add_argument("--no-step", dest="step", action="store_false", help="no training steps")
    args = p.parse_args(argv)
    import tensorflow as tf
    import torch

    presets = args.presets.split(",") if args.presets else PRESETS[args.arch]
    print(
        f"CPU: {cpu()}; TF threads {tf.config.threading.get_intra_op_parallelism_threads()}"
        f" (0: all), torch threads {torch.get_num_threads()}; load {os.getloadavg()[0]:.1f}"
    )
    for name, err in fixture_errors(args.arch).items():
        print(f"{name}: max |Keras - PyTorch| = {err:.1e}")
    print(
        f"\ntraining step, batch {args.batch} of {args.patch}x{args.patch} LR, median of "
        f"{args.repeat}:\n"
    )
    head = ["parameters (ours / PyTorch)"] + ["ms per 256x256 LR (Keras)"] * args.ms256
    head += ["Keras ms", "PyTorch ms", "PyTorch / ours"] * args.step
    print("| preset | " + " | ".join(head) + " |")
    print("| --- |" + " ---: |" * len(head))
    for preset in presets:
        print(row(args.arch, preset, args), flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
