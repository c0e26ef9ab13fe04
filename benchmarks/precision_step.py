"""Milliseconds per training step of the cpu20 recipes in float32 and in bfloat16
(``train.precision``), measured side by side in one process (issue 35, item 7).

    python benchmarks/precision_step.py [--recipes cpu20_realesrnet cpu20_hr_sample
        cpu20_realesrgan cpu20_realesrgan+vgg] [--repeat 9] [--steps 10]

For each recipe (``conf/experiment/<recipe>.yaml``) the recipe's model, optimizer (its schedule
and ``train.ema``) and training step (``sr.train.parts.training_part``: the pixel step, or the
GAN step with its discriminator for ``cpu20_realesrgan``) are built twice, once under Keras's
``float32`` policy and once under ``mixed_bfloat16`` (:mod:`sr.train.precision`), from the same
seed, and fed the same random batch of the recipe's shape (``data.batch_size`` LR patches of
``data.patch_size / scale`` pixels, the recipe's channels). After 5 warm-up steps of each, the
two alternate step by step (each step timed to its loss on the host, the order of a pair swapped
at every pair), so that the load of a shared machine falls on both alike: ``--repeat``
repetitions of ``--steps`` pairs. Each repetition gives the ratio float32 / bfloat16 of its
median steps; the table gives the median milliseconds per step of each over all steps, the
median ratio over the repetitions and its range. The input pipeline and the degradation are not
included. ``cpu20_realesrgan+vgg`` (not in the default list: its steps take seconds) times
``cpu20_realesrgan`` with the paper's perceptual term (a VGG19 of random weights: the cost is
torchvision's).

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
from sr.core.batch import Batch  # noqa: E402
from sr.loading.models import build_model  # noqa: E402
from sr.train.optimizers import make_optimizer  # noqa: E402
from sr.train.parts import training_part  # noqa: E402
from sr.train.precision import CPU_BF16_FLAGS, POLICIES, cpu_flags  # noqa: E402
from sr.train.step import StepArgs  # noqa: E402

# what each row trains: a recipe, or the GAN recipe with the paper's perceptual term (a VGG19 of
# random weights: the same cost as torchvision's)
RUNS = {
    "cpu20_realesrnet": ("experiment=cpu20_realesrnet",),
    "cpu20_hr_sample": ("experiment=cpu20_hr_sample",),
    "cpu20_realesrgan": ("experiment=cpu20_realesrgan",),
    "cpu20_realesrgan+vgg": (
        "experiment=cpu20_realesrgan", "++loss.terms.perceptual.vgg_weights=random",
    ),
}  # fmt: skip
DEFAULT = ("cpu20_realesrnet", "cpu20_hr_sample", "cpu20_realesrgan")
PRECISIONS = ("float32", "bfloat16")


def make_step(cfg, precision: str):
    """The recipe's training step under ``precision``'s policy: ``(step, batch, about)``,
    ``step(batch)`` a ``tf.function`` of one optimizer update (the run's, as
    ``sr.train.loop.Trainer`` wires it), ``about`` the model and the batch in words."""
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
        step = part.make_step(StepArgs(
            model=model, optimizer=optimizer, loss=loss, strategy=tf.distribute.get_strategy(),
            global_batch=int(cfg.data.batch_size), counters=counters,
        ))  # fmt: skip
    finally:
        keras.mixed_precision.set_global_policy("float32")
    b, scale, hr = int(cfg.data.batch_size), int(cfg.data.scale), int(cfg.data.patch_size)
    g = tf.random.Generator.from_seed(1)
    batch = Batch(
        lq=g.uniform((b, hr // scale, hr // scale, channels)),
        gt=g.uniform((b, hr, hr, channels)),
    )
    about = f"{model.name}, {model.count_params() / 1e6:.2f} M, batch {b} x {hr // scale}^2 LR"
    return step.train_step, batch, f"{about} x {channels}"


def cpu_name() -> str:
    """The ``model name`` of ``/proc/cpuinfo`` (Linux), else what ``platform`` says."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def step_ms(step, batch) -> float:
    """Milliseconds of one step, to its loss on the host."""
    t0 = time.perf_counter()
    float(step(batch))
    return 1000 * (time.perf_counter() - t0)


def measure(overrides: tuple[str, ...], repeat: int, steps: int) -> dict:
    """Steps of the two precisions alternating; ``{"float32": [ms per step], "bfloat16": [...],
    "ratio": [float32 / bfloat16 of the median steps of each repetition]}``."""
    cfg = compose(*overrides)
    made = {p: make_step(cfg, p) for p in PRECISIONS}
    steps_of = {p: m[:2] for p, m in made.items()}
    for step, batch in steps_of.values():
        for _ in range(5):  # tracing, oneDNN's kernel choice
            step_ms(step, batch)
    times = {p: [] for p in PRECISIONS}
    times["ratio"] = []
    times["model"] = made["float32"][2]
    for _ in range(repeat):
        rep = {p: [] for p in PRECISIONS}
        for i in range(steps):
            for p in PRECISIONS if i % 2 == 0 else PRECISIONS[::-1]:
                rep[p].append(step_ms(*steps_of[p]))
        for p in PRECISIONS:
            times[p] += rep[p]
        times["ratio"].append(
            statistics.median(rep["float32"]) / statistics.median(rep["bfloat16"])
        )
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", nargs="+", default=list(DEFAULT), choices=list(RUNS))
    parser.add_argument("--repeat", type=int, default=9, help="interleaved repetitions")
    parser.add_argument("--steps", type=int, default=10, help="pairs of steps per repetition")
    args = parser.parse_args(argv)
    flags = cpu_flags() or frozenset()
    have = [f for f in CPU_BF16_FLAGS if f in flags]
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; bfloat16 flags: {have or 'none'}")
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}; {time.strftime('%Y-%m-%d')}")
    print(f"{args.repeat} repetitions of {args.steps} alternating pairs of steps\n")
    print("| recipe (model) | float32 ms/step | bfloat16 ms/step | float32 / bfloat16 (range) |")
    print("| --- | ---: | ---: | ---: |")
    for name in args.recipes:
        t = measure(RUNS[name], args.repeat, args.steps)
        med = {k: statistics.median(t[k]) for k in (*PRECISIONS, "ratio")}
        ms = f"{med['float32']:.0f} | {med['bfloat16']:.0f}"
        spread = f"{min(t['ratio']):.2f}-{max(t['ratio']):.2f}"
        print(
            f"| {name} ({t['model']}) | {ms} | {med['ratio']:.2f}x ({spread}) |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
