"""What does TensorFloat-32 do to Real-ESRGAN's degraded pixels on an Ampere-or-later GPU?

On such GPUs TensorFlow runs float32 matrix products and convolutions in TF32 unless
``tf.config.experimental.enable_tensor_float_32_execution(False)``: each operand is rounded to
a 10-bit mantissa (relative error up to 2^-11), the products (exact: 11 x 11 bits) summed in
float32. With ``degradation.device=accelerator`` that covers the degradation's resizes
(``sr.degradations.interpolate.separable``: two matrix products), USM's blurs
(``sr.degradations.usm``: the same products) and the random blur kernels and final sinc
(``sr.degradations.kernels.blur_batch``: a depthwise convolution). The batched JPEG runs in
float64 and integers (no TF32), and the input pipeline on the CPU (no TF32 at all). PyTorch's
``F.interpolate`` and ``filter2D`` run in full float32 (``torch.backends.cudnn.allow_tf32``
covers convolutions: True by default, so the official ``filter2D`` itself runs in TF32 too).

No GPU is needed: this runs the degradation twice on the CPU with the same seeds, in float32 and
with every operand of those three ops rounded to TF32 first (round to nearest, 13 low mantissa
bits dropped): what a TF32 kernel computes, up to the order of its float32 sums. Not simulated:
the luma of grey Poisson noise (a ``tensordot`` with 3 weights). It compares the 8-bit LR and the
8-bit sharpened target (levels 0..255) of ``--crops`` crops of ``--images``, the paper's
parameters, noise and JPEG on:

    python benchmarks/realesrgan_tf32.py --crops 64

prints the share of pixels that differ, the mean and largest difference in levels, and the PSNR
(docs/training.md, "Deviations from the official code").
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

import numpy as np

from sr.core.quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()

import tensorflow as tf  # noqa: E402

import sr.degradations.interpolate as interpolate  # noqa: E402
import sr.degradations.realesrgan as realesrgan  # noqa: E402
import sr.degradations.usm as usm  # noqa: E402
from sr.core.images import list_images, load_rgb  # noqa: E402
from sr.degradations.jpeg import jpeg_batch  # noqa: E402


def tf32(x: tf.Tensor) -> tf.Tensor:
    """float32 rounded to TF32 (10-bit mantissa, round to nearest, ties away): the 13 low
    mantissa bits cleared after adding half of their weight."""
    bits = tf.bitcast(tf.cast(x, tf.float32), tf.int32)
    return tf.bitcast((bits + 0x1000) & ~0x1FFF, tf.float32)


def simulate_tf32() -> None:
    """Route the degradation's three float32 ops through :func:`tf32`-rounded operands."""
    separable, blur_batch = interpolate.separable, realesrgan.blur_batch

    def separable_tf32(images, rows, cols):
        x = separable(tf32(images), tf32(rows), tf.eye(tf.shape(cols)[1]))  # rows first
        return separable(tf32(x), tf.eye(tf.shape(rows)[0]), tf32(cols))  # then cols

    def blur_tf32(images, kernels):
        return blur_batch(tf32(images), tf32(kernels))

    interpolate.separable = usm.separable = separable_tf32
    realesrgan.blur_batch = blur_tf32


def crops(args) -> np.ndarray:
    """uint8 ``[N, c, c, 3]`` crops at random positions of the images."""
    files = list_images(Path(args.images))[: args.max_images]
    rng = np.random.default_rng(args.seed)
    images = [load_rgb(p)[0] for p in files]
    out = []
    while len(out) < args.crops:
        im = images[int(rng.integers(len(images)))]
        y = int(rng.integers(im.shape[0] - args.crop + 1))
        x = int(rng.integers(im.shape[1] - args.crop + 1))
        out.append(im[y : y + args.crop, x : x + args.crop])
    return np.stack(out)


FILTERS_ONLY = dataclasses.replace(
    realesrgan.Params(),
    noise_range=(0.0, 0.0),
    poisson_scale_range=(0.0, 0.0),
    noise_range2=(0.0, 0.0),
    poisson_scale_range2=(0.0, 0.0),
)
"""The paper's parameters with both stages' noise at zero."""


def pairs(hr: np.ndarray, args, filters_only: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(lr, target)`` levels (float64) of each batch of ``--batch`` crops; with
    ``filters_only`` noise and JPEG off (the filters alone, without the noise and the JPEG
    quantisation that turn a level's difference into another draw or another block)."""
    params = FILTERS_ONLY if filters_only else realesrgan.Params()
    coder = (lambda images, quality: images) if filters_only else jpeg_batch
    out = []
    for i in range(0, len(hr), args.batch):
        x = tf.constant(hr[i : i + args.batch], tf.float32) / 255.0
        seeds = realesrgan.image_seed(args.seed, tf.range(i, i + len(x)))
        target = tf.round(usm.usm_sharp(x) * 255.0) / 255.0
        lr = realesrgan.degrade_batch(target, 4, seeds, params, jpeg_batch=coder)
        out.append((np.round(lr.numpy() * 255.0), np.round(target.numpy() * 255.0)))
    return out


def row(name: str, a: np.ndarray, b: np.ndarray) -> str:
    diff = np.abs(a - b)
    mse = float((diff**2).mean())
    psnr = "inf" if mse == 0 else f"{10 * math.log10(255.0**2 / mse):.1f}"
    return (
        f"| {name} | {100 * (diff > 0).mean():.3f} % | {diff.mean():.4f} | {diff.max():.0f} "
        f"| {psnr} |"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", default=str(Path(__file__).resolve().parents[2] / "shared" /
                                          "datasets" / "hr_sample"))  # fmt: skip
    p.add_argument("--max-images", type=int, default=40)
    p.add_argument("--crops", type=int, default=64)
    p.add_argument("--crop", type=int, default=256, help="HR crop side (pixels)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    hr = crops(args)
    full = [pairs(hr, args, f) for f in (False, True)]
    simulate_tf32()
    rounded = [pairs(hr, args, f) for f in (False, True)]
    print(
        f"{args.crops} crops of {args.crop} x {args.crop} of {args.images}, batches of "
        f"{args.batch}, x4, the paper's parameters, batched TensorFlow JPEG; float32 against "
        "operands rounded to TF32 (levels 0..255)\n"
    )
    print("| image | pixels that differ | mean diff (levels) | max diff | PSNR (dB) |")
    print("| --- | --- | --- | --- | --- |")
    for k, name in ((0, "LR"), (1, "LR, noise and JPEG off")):
        a, b = (np.concatenate([r[0] for r in x[k]]) for x in (full, rounded))
        print(row(name, a, b))
    a, b = (np.concatenate([r[1] for r in x[0]]) for x in (full, rounded))
    print(row("sharpened target", a, b))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
