"""The README's model table: parameters, multiply-adds per output megapixel, and milliseconds to
upscale a 256 x 256 LR image with Keras on this CPU, for each single-image model at x4 on Y.

    python benchmarks/model_table.py [--repeat 10] [--out docs/perf/model_table.md]

Each model is built from its ``conf/model/<name>.yaml`` (random weights: time does not depend on
them) and called on a float32 ``[1, 256, 256, 1]`` input inside one ``tf.function`` (traced once),
batch 1, TensorFlow's default threads (all cores); the time is the median of ``--repeat`` calls
after two warm-up calls, with the minimum and maximum. Parameters are as deployed
(``sr.models.complexity.parameters``: SPAN's re-parameterised convs count as the 3x3 convs they
run as); multiply-adds are those of the convolutions (``macs_per_output_megapixel``), in G per
megapixel of output (a 1024 x 1024 output is 1.05 megapixels).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from sr.config import compose  # noqa: E402
from sr.loading.models import build_model  # noqa: E402
from sr.models.complexity import macs_per_output_megapixel, parameters  # noqa: E402

# (label, overrides): the shipped single-image models, and the sizes the recipes use
MODELS = [
    ("espcn", ["model=espcn"]),
    ("edsr_lite (8 x 32)", ["model=edsr_lite"]),
    ("edsr_lite 8 x 48 (experiment=cpu20_*)", ["model=edsr_lite", "model.features=48"]),
    ("edsr_baseline", ["model=edsr_baseline"]),
    ("rlfn", ["model=rlfn"]),
    ("span", ["model=span"]),
    ("rrdbnet", ["model=rrdbnet"]),
]
SIZE = 256


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def time_model(model, repeat: int) -> list[float]:
    """Milliseconds of each of ``repeat`` calls on a 256 x 256 Y image, after two warm-ups."""
    x = tf.constant(np.random.default_rng(0).random((1, SIZE, SIZE, 1), dtype=np.float32))
    call = tf.function(lambda t: model(t, training=False))
    for _ in range(2):
        call(x).numpy()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call(x).numpy()
        times.append(1000 * (time.perf_counter() - t0))
    return times


def table(repeat: int) -> str:
    lines = [
        f"x4, Y, LR {SIZE} x {SIZE} -> SR {4 * SIZE} x {4 * SIZE}, Keras (TensorFlow "
        f"{tf.__version__}), batch 1, {os.cpu_count()} cores: {cpu_name()}",
        "",
        "| model | parameters | G multiply-adds per output megapixel | ms per 256 x 256 LR "
        "(median, min-max) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, overrides in MODELS:
        model = build_model(compose(*overrides))
        ms = time_model(model, repeat)
        lines.append(
            f"| {label} | {parameters(model):,} | {macs_per_output_megapixel(model, 4):.1f} | "
            f"{statistics.median(ms):.0f} ({min(ms):.0f}-{max(ms):.0f}) |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="timed calls per model")
    parser.add_argument("--out", type=Path, help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    text = table(args.repeat)
    print(text)
    if args.out:
        cmd = f"python benchmarks/model_table.py --out {args.out}"
        args.out.write_text(f"# Models: size, cost, CPU time\n\n    {cmd}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
