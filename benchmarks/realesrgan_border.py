"""Where do the border effects of Real-ESRGAN's degradation land in a training patch, and what
crop margin keeps them out?

The official code degrades a 400-pixel crop and takes its 256-pixel patch at a random position
inside (``realesrgan_dataset.py``, ``paired_random_crop`` in ``realesrnet_model.py``); this
project degrades the patch with a margin of m HR pixels on every side
(``sr.data.source.PatchSource.margin``) and cuts the margin away. Every filter of the degradation
pads the crop at its border (USM's 51-pixel Gaussian, the two blur kernels of up to 21 pixels,
PyTorch's resizes, the final sinc of 21 LR pixels), so near the crop's border its output is not
the one the same pixels get inside a larger image.

For each of ``--crops`` positions of the images of ``--images`` this degrades the crop of margin
m (for each m of ``--margins``) and the crop of margin ``--reference`` around the same patch, with
the same seed (so the same kernels, resizes and orders), and compares the two patches after the
cut: PSNR (RGB, [0, 1], from the mean squared error over all crops) by distance to the patch's
edge, in rings (``--lr-rings``, LR pixels; ``--hr-rings``, HR pixels for the sharpened target).
Noise is off (its fields are drawn for the crop's shape, so they differ everywhere between two
crop sizes) and so is JPEG (its 8 x 8 blocks sit on the crop's grid): what is compared is the
filters alone. With the paper's random resizes the interior is not equal either: a resize samples
each crop on a grid of its own, a fraction of a pixel apart; ``--keep-sizes`` draws both resizes
"keep", so that the grids stay aligned and only the border differs. Each crop draws its own
degradation (a batch of one).

    python benchmarks/realesrgan_border.py --crops 32 --keep-sizes --margins 8 16 36 48
    python benchmarks/realesrgan_border.py --crops 32 --margins 8 36 72

The worst case of the reach: ``--first-factor 0.15`` resizes every first stage by exactly 0.15
(the smallest down factor of ``resize_range``), so that the second blur reaches 10 / 0.15 = 67 HR
pixels, and the second resize goes to ``H / s`` (its "keep"); the kernels are 21 pixels wide
(``kernel_sizes=(21,)``, sigma up to 3). The grids stay aligned when every crop side and the
difference of two margins are multiples of 20 (0.15 x 20 = 3 pixels) and of 4: margins 16, 36,
56, ... (16 mod 20), reference 196, patch 128:

    python benchmarks/realesrgan_border.py --crops 32 --first-factor 0.15 --patch 128 \
        --reference 196 --margins 16 36 56 76 96 116 --lr-rings 0 2 4 8 16

prints one row per margin (docs/data.md, "The crop and its margin").
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

import sr.degradations.realesrgan as realesrgan  # noqa: E402
from sr.core.images import list_images, load_rgb  # noqa: E402
from sr.degradations import interpolate  # noqa: E402
from sr.degradations.realesrgan import Params, degrade_batch, image_seed  # noqa: E402
from sr.degradations.usm import usm_sharp  # noqa: E402

FILTERS_ONLY = dataclasses.replace(
    Params(),
    noise_range=(0.0, 0.0),
    poisson_scale_range=(0.0, 0.0),
    noise_range2=(0.0, 0.0),
    poisson_scale_range2=(0.0, 0.0),
)
"""The paper's parameters with both stages' noise at zero (Gaussian sigma and Poisson scale)."""

KEEP_SIZES = dataclasses.replace(
    FILTERS_ONLY, resize_prob=(0.0, 0.0, 1.0), resize_prob2=(0.0, 0.0, 1.0)
)
""":data:`FILTERS_ONLY` with both random resizes drawn "keep": the crops' sampling grids then
stay aligned (the LR is the crop's x4 downscale), and the patches differ at their border only."""


def fixed_resizes(first: float):
    """A stand-in for ``realesrgan.random_resize``: the first stage (``factor_given``) by
    exactly ``first`` (coordinates mapped by it, as ``interpolate(scale_factor=f)``), the second
    to ``floor(base)`` (its "keep"); the mode drawn as the real one draws it."""

    def resize(per_batch, images, stage, base, factor_given):
        mode = per_batch.choice([1 / 3] * 3)
        if factor_given:
            size = tf.cast(tf.floor(base * first), tf.int32)
            return interpolate.resize(images, size, mode, tf.constant(first, tf.float32))
        return interpolate.resize(images, tf.cast(tf.floor(base), tf.int32), mode)

    return resize


WIDEST = dataclasses.replace(FILTERS_ONLY, kernel_sizes=(21,))
""":data:`FILTERS_ONLY` with every blur kernel 21 pixels wide (the longest reach)."""


def no_jpeg(images, quality):
    """JPEG off: the batch as it is."""
    return images


def psnr_of(mse: float) -> str:
    return "inf" if mse == 0 else f"{10 * math.log10(1.0 / mse):.1f}"


def ring(side: int) -> np.ndarray:
    """int ``[side, side]``: each pixel's distance (pixels) to the nearest edge of the square."""
    i = np.arange(side)
    d = np.minimum(i, side - 1 - i)
    return np.minimum(d[:, np.newaxis], d[np.newaxis, :])


def degraded_patch(image, y, x, patch, margin, scale, seed, params):
    """``(lr, target)``, float64 ``[P / s, P / s, 3]`` and ``[P, P, 3]`` in [0, 1]: the patch
    at ``(y, x)`` degraded in the crop of ``margin`` (filters only), margin cut."""
    crop = image[y - margin : y + patch + margin, x - margin : x + patch + margin]
    hr = tf.constant(crop[np.newaxis], tf.float32) / 255.0
    target = tf.round(usm_sharp(hr) * 255.0) / 255.0
    lr = degrade_batch(target, scale, seed[tf.newaxis], params, jpeg_batch=no_jpeg)
    m = margin // scale
    lr = lr[0].numpy().astype(np.float64)[m : lr.shape[1] - m, m : lr.shape[2] - m]
    target = target[0].numpy().astype(np.float64)[margin : margin + patch, margin : margin + patch]
    return lr, target


def positions(images, count, patch, reference, rng):
    """``count`` (image index, y, x) patch corners, each with ``reference`` pixels around
    (multiples of 4, as the sources' crops at x4)."""
    out = []
    while len(out) < count:
        i = int(rng.integers(len(images)))
        h, w = images[i].shape[:2]
        if min(h, w) < patch + 2 * reference + 4:
            continue
        y = int(rng.integers(reference, h - patch - reference - 3))
        x = int(rng.integers(reference, w - patch - reference - 3))
        out.append((i, y - y % 4, x - x % 4))
    return out


def measure(args) -> dict[int, dict[str, np.ndarray]]:
    """Per margin, the mean squared error against the reference crop's patch by distance to the
    patch's edge: ``lr`` float64 ``[P / s / 2]`` (LR pixels), ``hr`` ``[P / 2]`` (HR pixels)."""
    files = list_images(Path(args.images))[: args.max_images]
    images = [load_rgb(p)[0] for p in files]
    rng = np.random.default_rng(args.seed)
    where = positions(images, args.crops, args.patch, args.reference, rng)
    s = args.scale
    lr_ring, hr_ring = ring(args.patch // s), ring(args.patch)
    params = KEEP_SIZES if args.keep_sizes else FILTERS_ONLY
    if args.first_factor:
        params = WIDEST
        realesrgan.random_resize = fixed_resizes(args.first_factor)  # degrade_batch's global
    out = {m: {"lr": np.zeros(lr_ring.max() + 1), "hr": np.zeros(hr_ring.max() + 1)}
           for m in args.margins}  # fmt: skip
    for n, (i, y, x) in enumerate(where):
        seed = image_seed(args.seed, n)
        ref = degraded_patch(images[i], y, x, args.patch, args.reference, s, seed, params)
        for m in args.margins:
            got = degraded_patch(images[i], y, x, args.patch, m, s, seed, params)
            for key, rings, k in (("lr", lr_ring, 0), ("hr", hr_ring, 1)):
                err = ((got[k] - ref[k]) ** 2).mean(axis=-1)
                out[m][key] += np.bincount(rings.ravel(), err.ravel()) / np.bincount(rings.ravel())
    for m in out:
        for key in out[m]:
            out[m][key] /= len(where)
    return out


def report(rows, args) -> str:
    """The table: PSNR of rings of the patch, by distance to its edge."""
    s, lr_cols, hr_cols = args.scale, args.lr_rings, args.hr_rings
    lines = [
        f"patch {args.patch} at x{s}, {args.crops} crops of {args.images}, noise and JPEG off"
        + (
            f", first resize x{args.first_factor}, 21-pixel kernels; "
            if args.first_factor
            else "; "
        )  # fmt: skip
        + f"PSNR (dB, RGB) against the same patch cut from a crop of margin {args.reference}, by "
        "distance to the patch's edge (pixels: LR for the LR, HR for the sharpened target); "
        '"rest": every pixel farther in',
        "",
        "| margin (HR px) | crop | "
        + " | ".join(f"LR {a}-{b - 1}" for a, b in zip(lr_cols, [*lr_cols[1:], None]) if b)
        + " | LR rest | "
        + " | ".join(f"target {a}-{b - 1}" for a, b in zip(hr_cols, [*hr_cols[1:], None]) if b)
        + " | target rest |",
        "| --- " * (2 + len(lr_cols) + len(hr_cols)) + "|",
    ]
    for m, r in rows.items():
        cells = []
        for key, cols in (("lr", lr_cols), ("hr", hr_cols)):
            edges = [*cols, len(r[key])]
            cells += [psnr_of(float(r[key][a:b].mean())) for a, b in zip(edges, edges[1:])]
        lines.append(f"| {m} | {args.patch + 2 * m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", default=str(Path(__file__).resolve().parents[2] / "shared" /
                                          "datasets" / "hr_sample"))  # fmt: skip
    p.add_argument("--max-images", type=int, default=40)
    p.add_argument("--crops", type=int, default=32)
    p.add_argument("--patch", type=int, default=96)
    p.add_argument("--scale", type=int, default=4)
    p.add_argument("--margins", type=int, nargs="+", default=[8, 36, 72])
    p.add_argument("--reference", type=int, default=144)
    p.add_argument(
        "--lr-rings",
        type=int,
        nargs="+",
        default=[0, 2, 4, 8],
        help="LR distances (pixels) where the rings of the table start",
    )
    p.add_argument(
        "--hr-rings",
        type=int,
        nargs="+",
        default=[0, 8, 16, 32],
        help="HR distances (pixels) where the target's rings start",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--keep-sizes",
        action="store_true",
        help="both random resizes kept: aligned grids, border effects alone",
    )
    p.add_argument(
        "--first-factor",
        type=float,
        default=None,
        help="the worst case: the first resize by exactly this factor (0.15), the second to "
        "H / s, 21-pixel kernels (module docstring: margins that keep the grids aligned)",
    )
    args = p.parse_args(argv)
    print(report(measure(args), args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
