"""How far is this project's sharpened target of the GAN stage from the official one?

Officially (``realesrgan/models/realesrgan_model.py`` ``feed_data``, Real-ESRGAN a4abfb2) the LR
is made from ``USM(400-pixel crop)``, then the training-pair pool holds the plain ``gt`` of the
256-pixel patch, and ``gt_usm`` is recomputed from that patch after the pool (line 176):
``USM(patch)``, whose outer pixels carry USM's reflect-border effect (its 51-pixel Gaussian pads
25 pixels, and its soft mask is blurred by it again). Its stage 1 (``realesrnet_model.py``) pools
the sharpened ``gt`` cut from the sharpened crop instead: ``USM(crop)`` cut to the patch. This
project uses that one in both stages (``sr.degradations.realesrgan.traced_pair``, cut after by
``sr.data.pairs.degraded_pairs``), from the crop with its margin (``degradation.margin``).

For ``--crops`` patches of ``--images`` this compares ``USM(patch)`` with ``USM(patch with a
margin m)`` cut to the patch, both rounded to 8 bits, by distance to the patch's edge:

    python benchmarks/realesrgan_gan_target.py --crops 64 --patch 256 --margins 8 36

prints the PSNR (dB, RGB, levels 0..255) per ring and over the whole patch (docs/training.md,
"Deviations from the official code").
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from sr.core.quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()

import tensorflow as tf  # noqa: E402

from sr.core.images import list_images, load_rgb  # noqa: E402
from sr.degradations.usm import usm_sharp  # noqa: E402

RINGS = (0, 4, 8, 16, 25, 50)
"""HR distances (pixels) to the patch's edge where the table's rings start."""


def sharpened(crop: np.ndarray) -> np.ndarray:
    """8-bit levels (float64) of ``USM(crop)`` rounded, uint8 ``[c, c, 3]`` in."""
    x = tf.constant(crop[np.newaxis], tf.float32) / 255.0
    return np.round(usm_sharp(x)[0].numpy().astype(np.float64) * 255.0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", default=str(Path(__file__).resolve().parents[2] / "shared" /
                                          "datasets" / "hr_sample"))  # fmt: skip
    p.add_argument("--max-images", type=int, default=40)
    p.add_argument("--crops", type=int, default=64)
    p.add_argument("--patch", type=int, default=256)
    p.add_argument("--margins", type=int, nargs="+", default=[8, 36])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    images = [load_rgb(f)[0] for f in list_images(Path(args.images))[: args.max_images]]
    rng = np.random.default_rng(args.seed)
    big, n = max(args.margins), args.patch
    i = np.arange(n)
    d = np.minimum(i, n - 1 - i)
    rings = np.minimum(d[:, None], d[None, :])
    edges = [*RINGS, rings.max() + 1]
    sums = {m: np.zeros(len(RINGS)) for m in args.margins}
    differ = {m: 0.0 for m in args.margins}
    for _ in range(args.crops):
        im = images[int(rng.integers(len(images)))]
        y = int(rng.integers(big, im.shape[0] - n - big + 1))
        x = int(rng.integers(big, im.shape[1] - n - big + 1))
        official = sharpened(im[y : y + n, x : x + n])
        for m in args.margins:
            ours = sharpened(im[y - m : y + n + m, x - m : x + n + m])[m : m + n, m : m + n]
            err = ((official - ours) ** 2).mean(-1)
            differ[m] += (official != ours).any(-1).mean() / args.crops
            for k, (a, b) in enumerate(zip(edges, edges[1:])):
                sums[m][k] += err[(rings >= a) & (rings < b)].mean() / args.crops

    def db(mse):
        return "inf" if mse == 0 else f"{10 * math.log10(255.0**2 / mse):.1f}"

    area = [((rings >= a) & (rings < b)).mean() for a, b in zip(edges, edges[1:])]
    print(
        f"{args.crops} patches of {n} x {n} of {args.images}: USM(patch) (official GAN stage) "
        "against USM(patch with margin m) cut (ours), 8-bit; PSNR (dB, RGB) by distance to "
        "the patch's edge (HR pixels)\n"
    )
    heads = [f"{a}-{b - 1}" for a, b in zip(edges, edges[1:])]
    heads[-1] = f"{RINGS[-1]}+"
    print("| margin | pixels that differ | whole patch | " + " | ".join(heads) + " |")
    print("| --- " * (3 + len(heads)) + "|")
    for m in args.margins:
        whole = db(float(np.dot(sums[m], area)))
        cells = " | ".join(db(v) for v in sums[m])
        print(f"| {m} | {100 * differ[m]:.1f} % | {whole} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
