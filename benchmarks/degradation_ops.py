"""Is Real-ESRGAN's degradation in the graph slower than the NumPy/OpenCV reference because of
per-op overhead or because of the ops themselves?

    python benchmarks/degradation_ops.py

Times each operation of the degradation on one core (TensorFlow's intra- and inter-op pools of
one thread, ``cv2.setNumThreads(1)``), in CPU-ms per 112 x 112 RGB crop: the reference's
NumPy/OpenCV call on one crop at a time, against the graph's op on a batch of 64 crops (in a
``tf.function``), and prints a markdown table. Reported in ``docs/performance.md`` ("Real-world
degradations in the graph").
"""

from __future__ import annotations

import time

import cv2
import numpy as np
import tensorflow as tf

B = 64


def per_crop_reference(crops: np.ndarray, fn) -> float:
    """CPU-ms per crop of ``fn`` called on each crop."""
    t0 = time.process_time()
    for c in crops:
        fn(c)
    return (time.process_time() - t0) / len(crops) * 1000


def per_crop_graph(fn, *args, repeats: int = 3) -> float:
    """CPU-ms per crop of ``fn`` on the batch, traced once, then timed ``repeats`` times."""
    f = tf.function(fn)
    f(*args)
    t0 = time.process_time()
    for _ in range(repeats):
        f(*args)
    return (time.process_time() - t0) / repeats / B * 1000


def rows(crops: np.ndarray) -> list[tuple[str, float, float]]:
    """``(operation, reference ms, graph ms)`` per crop."""
    import sr.degradations.interpolate as interpolate
    import sr.degradations.kernels as kernels
    import sr.degradations.realesrgan as R
    from sr.degradations.usm import usm_sharp

    rng = np.random.default_rng(0)
    k21 = rng.random((21, 21)).astype(np.float32)
    k21 /= k21.sum()
    x = tf.constant(crops)
    _, per_image = R.batch_draws(R.image_seed(0, tf.range(B, dtype=tf.int64)))
    k1 = R.kernels(per_image, R.Params())[0]
    seed = tf.constant([1, 2], tf.int64)
    lam = lambda a: tf.round(a * 255) / 255 * 256  # noqa: E731
    reflect = cv2.BORDER_REFLECT_101
    twice = lambda c: cv2.GaussianBlur(cv2.GaussianBlur(c, (51, 51), 0), (51, 51), 0)  # noqa: E731
    cubic = cv2.INTER_CUBIC
    return [
        ("blur 21x21",
         per_crop_reference(crops, lambda c: cv2.filter2D(c, -1, k21, borderType=reflect)),
         per_crop_graph(kernels.blur_batch, x, k1)),
        ("USM (two 51-tap Gaussian blurs)",
         per_crop_reference(crops, twice),
         per_crop_graph(usm_sharp, x)),
        ("bicubic resize 112 -> 84",
         per_crop_reference(crops, lambda c: cv2.resize(c, (84, 84), interpolation=cubic)),
         per_crop_graph(lambda a: interpolate.resize(a, [84, 84], 2), x)),
        ("Gaussian noise field",
         per_crop_reference(crops, lambda c: rng.standard_normal(c.shape, dtype=np.float32)),
         per_crop_graph(lambda a: tf.random.stateless_normal(tf.shape(a), seed), x)),
        ("Poisson noise field (lambda up to 256)",
         per_crop_reference(crops, lambda c: rng.poisson(np.round(c * 255) / 255 * 256)),
         per_crop_graph(lambda a: tf.random.stateless_poisson(tf.shape(a), seed, lam(a)), x)),
        ("JPEG round trip, quality 60",
         per_crop_reference(crops, lambda c: cv2.imdecode(cv2.imencode(
             ".jpg", (c * 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 60])[1], 1)),
         per_crop_graph(lambda a: R.libjpeg_batch(a, tf.fill([B], 60)), x)),
    ]  # fmt: skip


def main() -> int:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    cv2.setNumThreads(1)
    crops = np.random.default_rng(0).random((B, 112, 112, 3), dtype=np.float32)
    print(
        "| operation on a 112 x 112 RGB crop | NumPy/OpenCV, ms | graph, ms per crop (batch 64) |"
    )
    print("| --- | ---: | ---: |")
    for name, ref, graph in rows(crops):
        print(f"| {name} | {ref:.3f} | {graph:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
