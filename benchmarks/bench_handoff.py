"""How long ``next(iterator)`` takes when a batch is already waiting: the floor of the training
log's data-wait.

    python benchmarks/bench_handoff.py [--pause-ms 24] [--steps 200]

Calls ``next()`` on several pipelines, with the consumer pausing ``--pause-ms`` between calls (as a
training step does) and in a tight loop, and prints the mean time per call in ms. A synthetic
in-memory dataset (one batch repeated through a trivial ``map``) shows the cost that no input
pipeline can remove: handing a ready batch to Python and waking tf.data's threads after a pause.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import hydra  # noqa: E402
import tensorflow as tf  # noqa: E402

from sr.config import compose  # noqa: E402
from sr.data.demo import ensure_demo  # noqa: E402


def wait_per_call(ds: tf.data.Dataset, steps: int, pause: float) -> float:
    """Mean seconds inside ``next()`` over ``steps`` calls, after 30 warm-up calls."""
    it = iter(ds)
    for _ in range(30):
        next(it)
        time.sleep(pause)
    total = 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        next(it)
        total += time.perf_counter() - t0
        if pause:
            time.sleep(pause)
    del it  # a generator-mode iterator must go before interpreter shutdown
    return total / steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pause-ms", type=float, default=24.0, help="consumer pause per call")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the loaders")
    args = parser.parse_args(argv)
    cfgs = {m: compose(f"data={m}", *args.overrides) for m in ("tfrecord", "generator")}
    ensure_demo(cfgs["tfrecord"].demo_dir)
    b, p, s = (cfgs["tfrecord"].data[k] for k in ("batch_size", "patch_size", "scale"))
    lr, hr = tf.random.uniform((b, p // s, p // s, 1)), tf.random.uniform((b, p, p, 1))
    synthetic = tf.data.Dataset.from_tensors((lr, hr)).repeat()
    pipelines = {
        "synthetic in-memory batch": synthetic.map(lambda a, c: (a + 0, c + 0)).prefetch(
            tf.data.AUTOTUNE
        ),
        **{f"data={m}": hydra.utils.instantiate(c.data).dataset() for m, c in cfgs.items()},
    }
    print(f"| pipeline | next() ms, {args.pause_ms:g} ms pause | next() ms, tight loop |")
    print("|---|---|---|")
    for name, ds in pipelines.items():
        paused = wait_per_call(ds, args.steps, args.pause_ms / 1e3)
        tight = wait_per_call(ds, args.steps, 0.0)
        print(f"| {name} | {1e3 * paused:.3f} | {1e3 * tight:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
