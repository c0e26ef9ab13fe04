"""Milliseconds per training step of the cpu20 recipes in float32 and in bfloat16
(``train.precision``), measured side by side in one process (issue 35, item 7).

    python benchmarks/precision_step.py [--recipes cpu20_realesrnet cpu20_hr_sample ...]
        [--repeat 9] [--steps 10] [--perceptual]

For each recipe (``conf/experiment/<recipe>.yaml``) the recipe's model, optimizer (its schedule
and ``train.ema``) and training step (``sr.train.parts.training_part``: the pixel step, or the
GAN step with its discriminator for ``cpu20_realesrgan``) are built twice, once under Keras's
``float32`` policy and once under ``mixed_bfloat16`` (:mod:`sr.train.precision`), from the same
seed, and fed the same random batch of the recipe's shape (``data.batch_size`` LR patches of
``data.patch_size / scale`` pixels, the recipe's channels). After 5 warm-up steps of each, the
two alternate: one block of ``--steps`` steps of one, then of the other (the order swapped at
every repetition), ``--repeat`` times, so that the load of a shared machine falls on both alike.
Each repetition gives a ratio float32 / bfloat16 of its two blocks; the table gives the median
milliseconds per step of each, the median ratio and its range over the repetitions. The input
pipeline and the degradation are not included. ``--perceptual`` also times ``cpu20_realesrgan``
with the paper's perceptual term (a VGG19 with random weights: the cost is the same).

The figures of docs/performance.md, "bfloat16 training on a CPU", come from this script.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import hydra  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from sr.config import compose  # noqa: E402
from sr.train.checkpoint import build_model  # noqa: E402
from sr.train.optimizers import make_optimizer  # noqa: E402
from sr.train.parts import training_part  # noqa: E402
from sr.train.precision import CPU_BF16_FLAGS, POLICIES, cpu_flags  # noqa: E402

RECIPES = ("cpu20_realesrnet", "cpu20_hr_sample", "cpu20_realesrgan")
PERCEPTUAL = ("loss.perceptual_weight=1", "loss.vgg_weights=random")
PRECISIONS = ("float32", "bfloat16")


def make_step(cfg, precision: str):
    """The recipe's training step under ``precision``'s policy: ``(step, batch)``, ``step(batch)``
    a ``tf.function`` of one optimizer update (the run's, as ``sr.train.loop.Trainer`` wires
    it)."""
    keras.mixed_precision.set_global_policy(POLICIES[precision])
    try:
        keras.utils.set_random_seed(0)
        model = build_model(cfg)
        optimizer = make_optimizer(cfg, mixed=False)
        optimizer.build(model.trainable_variables)
        loss = hydra.utils.instantiate(cfg.loss)
        channels = int(model.outputs[0].shape[-1])
        lr_scale = tf.Variable(1.0, trainable=False)
        part = training_part(cfg, loss, channels, False, lr_scale)
        counters = tuple(tf.Variable(v, dtype=tf.int64) for v in (0, -1, 0))
        step = part.make_step(
            model, optimizer, loss, tf.distribute.get_strategy(), int(cfg.data.batch_size),
            counters,
        )  # fmt: skip
    finally:
        keras.mixed_precision.set_global_policy("float32")
    b, scale, hr = int(cfg.data.batch_size), int(cfg.data.scale), int(cfg.data.patch_size)
    g = tf.random.Generator.from_seed(1)
    batch = (
        g.uniform((b, hr // scale, hr // scale, channels)),
        g.uniform((b, hr, hr, channels)),
    )
    return step.train_step, batch


def block_ms(step, batch, steps: int) -> float:
    """Milliseconds per step of ``steps`` steps in a row (the last one's loss read)."""
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step(batch)
    float(loss)
    return 1000 * (time.perf_counter() - t0) / steps


def measure(overrides: tuple[str, ...], repeat: int, steps: int) -> dict:
    """Interleaved blocks of the two precisions; ``{"float32": [ms], "bfloat16": [ms],
    "ratio": [float32 / bfloat16 per repetition]}``."""
    cfg = compose(*overrides)
    steps_of = {p: make_step(cfg, p) for p in PRECISIONS}
    for step, batch in steps_of.values():
        block_ms(step, batch, 5)  # tracing, oneDNN's kernel choice
    times = {p: [] for p in PRECISIONS}
    for r in range(repeat):
        for p in PRECISIONS if r % 2 == 0 else PRECISIONS[::-1]:
            times[p].append(block_ms(*steps_of[p], steps))
    times["ratio"] = [a / b for a, b in zip(times["float32"], times["bfloat16"])]
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--repeat", type=int, default=9, help="interleaved repetitions")
    parser.add_argument("--steps", type=int, default=10, help="steps per timed block")
    parser.add_argument("--perceptual", action="store_true", help="also the GAN step + VGG19")
    args = parser.parse_args(argv)
    flags = cpu_flags() or frozenset()
    have = [f for f in CPU_BF16_FLAGS if f in flags]
    print(f"CPU: {platform.processor() or platform.machine()}; bfloat16 flags: {have or 'none'}")
    print(f"{args.repeat} interleaved repetitions of {args.steps} steps each\n")
    print("| recipe (model) | float32 ms/step | bfloat16 ms/step | float32 / bfloat16 (range) |")
    print("| --- | ---: | ---: | ---: |")
    runs = [(r, (f"experiment={r}",)) for r in args.recipes]
    if args.perceptual:
        gan = ("experiment=cpu20_realesrgan", *PERCEPTUAL)
        runs.append(("cpu20_realesrgan + perceptual", gan))
    for name, overrides in runs:
        t = measure(overrides, args.repeat, args.steps)
        med = {k: statistics.median(v) for k, v in t.items()}
        print(
            f"| {name} | {med['float32']:.0f} | {med['bfloat16']:.0f} | {med['ratio']:.2f}x "
            f"({min(t['ratio']):.2f}-{max(t['ratio']):.2f}) |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
