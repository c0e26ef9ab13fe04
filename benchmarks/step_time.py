"""Milliseconds per training step of candidate recipe models on this CPU, to give each the same
minutes at equal step counts (issue 22's exploration, docs/results.md).

    python benchmarks/step_time.py [--repeat 30] [--models edsr_lite rlfn_ntire span32 ...]

One training step (forward, L1 loss, gradients, Adam update) of each model on random Y pairs, x4,
in one ``tf.function``, at batch 8 of 24 x 24 LR patches (the recipe's) and batch 2 of 48 x 48
(the same pixels); the median of ``--repeat`` steps after 5 warm-up steps. The input pipeline is
not included (its data-wait is about 1 % of a step in the recipe). Ratios between models measured
in one sitting carry to other machines better than the milliseconds do.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from sr.models.registry import make_model  # noqa: E402

CANDIDATES = {
    "edsr_lite": lambda: make_model("edsr", 4, 1, **LITE48),
    "rlfn": lambda: make_model("rlfn", 4, 1, bicubic_skip=True),
    "rlfn_ntire": lambda: make_model("rlfn", 4, 1, **NTIRE),
    "span": lambda: make_model("span", 4, 1, features=52, bicubic_skip=True),
    "span32": lambda: make_model("span", 4, 1, features=32, bicubic_skip=True),
}
SHAPES = [(8, 24), (2, 48)]  # (batch, LR patch side)

LITE48 = {"features": 48, "blocks": 8, "direct_upsample": True, "bicubic_skip": True}
NTIRE = {"features": 46, "mid_features": 48, "blocks": 4, "bicubic_skip": True}


def step_ms(build, batch: int, side: int, repeat: int) -> float:
    """Median milliseconds of one training step."""
    model, optimizer = build(), keras.optimizers.Adam(1e-3)
    x = tf.random.uniform((batch, side, side, 1), seed=0)
    y = tf.random.uniform((batch, 4 * side, 4 * side, 1), seed=1)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.abs(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for _ in range(5):
        step().numpy()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        step().numpy()
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    heads = " | ".join(f"batch {b} x {s}x{s} LR: ms (ratio)" for b, s in SHAPES)
    print(f"| model | {heads} |")
    print("| --- |" + " ---: |" * len(SHAPES))
    base = None
    for name in args.models:
        ms = [step_ms(CANDIDATES[name], b, s, args.repeat) for b, s in SHAPES]
        base = base or ms[0]
        print(f"| {name} | " + " | ".join(f"{m:.1f} ({m / base:.2f})" for m in ms) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
