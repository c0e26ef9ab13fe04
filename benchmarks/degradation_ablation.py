"""Where does Real-ESRGAN's degradation of a batch spend its time?

    python benchmarks/degradation_ablation.py              # every variant, ~1 minute
    python benchmarks/degradation_ablation.py paper no_noise

Makes the training pairs of 64-crop batches of 112 x 112 RGB crops of scikit-image's astronaut
(in RAM) with ``sr.degradations.realesrgan.RealESRGAN.pair`` (USM, then the degradation, libjpeg)
in a
tf.data map (parallel, as the pair stage runs it) for 8 seconds per variant, each variant the
paper's parameters with one part switched off or fixed, and prints patches/s; then the op count
of a batch's whole degradation (every branch of its conditionals) and of its kernels. Reported in
``docs/performance.md`` ("Real-world degradations in the graph").
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import tensorflow as tf
from skimage import data

import sr.degradations.realesrgan as R

VARIANTS = {
    "paper": {},
    "gauss_only": dict(gaussian_noise_prob=1.0, gaussian_noise_prob2=1.0),
    "poisson_only": dict(gaussian_noise_prob=0.0, gaussian_noise_prob2=0.0),
    "no_noise": dict(
        gaussian_noise_prob=1.0,
        gaussian_noise_prob2=1.0,
        noise_range=(0.0, 0.0),
        noise_range2=(0.0, 0.0),
    ),
    "no_blur2": dict(second_blur_prob=0.0),
    "keep_size": dict(resize_prob=(0.0, 0.0, 1.0), resize_prob2=(0.0, 0.0, 1.0)),
    "no_usm": dict(gt_usm=False),
    "tf_jpeg": dict(jpeg="tensorflow"),
}
B, SECONDS = 64, 8.0


def rate(degradation: R.RealESRGAN, crops: tf.Tensor) -> float:
    """Patches/s of ``degradation.pair`` over :data:`SECONDS` after 3 warm-up batches."""
    n = int(crops.shape[0])

    def batch(i):
        hr = tf.cast(tf.gather(crops, i % n), tf.float32) / 255.0
        return degradation.pair(hr, 4, R.image_seed(0, i))

    ds = tf.data.Dataset.range(10**9).batch(B).map(batch, num_parallel_calls=-1).prefetch(2)
    it = iter(ds)
    for _ in range(3):
        next(it)
    t0, k = time.perf_counter(), 0
    while time.perf_counter() - t0 < SECONDS:
        next(it)
        k += 1
    return k * B / (time.perf_counter() - t0)


def op_count(graph) -> int:
    """Ops of a graph and of every function in its library (the branches of its conditionals)."""
    return len(graph.get_operations()) + sum(
        len(f.node_def) for f in graph.as_graph_def().library.function
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("variants", nargs="*", help=f"some of {', '.join(VARIANTS)} (default: all)")
    a = p.parse_args(argv)
    image = data.astronaut()
    tiles = [image[y : y + 112, x : x + 112] for y in range(0, 400, 24) for x in range(0, 400, 24)]
    crops = tf.constant(np.stack(tiles))
    unknown = set(a.variants) - set(VARIANTS)
    if unknown:
        p.error(
            f"unknown variant(s) {', '.join(sorted(unknown))}: choose from {', '.join(VARIANTS)}"
        )
    for name in a.variants or VARIANTS:
        keys = {**dataclasses.asdict(R.Params()), "jpeg": "libjpeg", **VARIANTS[name]}
        print(f"{name:14s} {rate(R.RealESRGAN(**keys), crops):6.0f} patches/s", flush=True)
    params = R.Params()
    whole = tf.function(lambda x, s: R.degrade_batch(x, 4, s, params)).get_concrete_function(
        tf.TensorSpec([B, 112, 112, 3]), tf.TensorSpec([B, 2], tf.int64)
    )
    kernels = tf.function(lambda s: R.kernels(R.batch_draws(s)[1], params)).get_concrete_function(
        tf.TensorSpec([B, 2], tf.int64)
    )
    print(f"ops of a batch's degradation (every branch): {op_count(whole.graph)}")
    print(f"ops of a batch's kernels: {op_count(kernels.graph)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
