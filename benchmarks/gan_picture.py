"""A picture of upscaled real photos side by side: crops of a few RealSRSet photos, one column per
method (bicubic, Real-ESRNet, Real-ESRGAN, ...), each crop at the same place.

    python benchmarks/gan_picture.py --real-outputs bicubic=DIR ESRNet=DIR ESRGAN=DIR \\
        [--lr ../shared/datasets/RealSRSet] --out docs/realsr_gan.png [--images 4] [--crop 160]

Each ``DIR`` holds one method's outputs ``<stem>.png`` of the LR photos ``<stem>.<ext>`` of
``--lr`` (what ``scripts/evaluate.py --real LR --save S`` writes into ``S/<LR folder>/<method>``;
``benchmarks/gan_study.py`` into ``OUT/<key>_real/RealSRSet/<method>``). The scale s is the
output's width over its LR's (the same for every photo and method).

The picture (PNG): a label row (Pillow's default font), then one row per photo: the LR crop
enlarged by pixel repetition (column ``LR (nearest xs)``, the photo's file name on it), then
each method in the order given. The photos are ``--images`` of those every folder has, evenly
spaced in name order (first and last included). The crop (``--crop`` output pixels, rounded
down to a multiple of s; the LR crop is 1/s of it) is, in every column, the window of the
largest gradient energy (sum of squared horizontal and vertical differences of the luma,
Pillow's ``L``) in the first method's output (give bicubic first: then the place favours no
trained model), on a grid of s pixels, the first in row-major order on ties: a textured region.
Deterministic: the same inputs give the same PNG.
Exit code 2 (nothing written) for a missing folder or output, or sizes that disagree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from sr.core.images import list_images, load_image

ROOT = Path(__file__).resolve().parents[1]
REALSRSET = ROOT.parent / "shared" / "datasets" / "RealSRSet"
GAP, LABEL = 4, 16  # px between tiles, height of the label row


def rgb(path: Path) -> np.ndarray:
    """uint8 ``[H, W, 3]`` (a gray image's one channel repeated): ``sr.core.images.load_image``."""
    image = load_image(path)
    return np.repeat(image, 3, axis=-1) if image.shape[-1] == 1 else image


def parse_outputs(pairs: list[str]) -> dict[str, Path]:
    """``["NAME=DIR", ...]`` -> ``{NAME: DIR}`` in order; ValueError naming a bad one."""
    outputs = {}
    for pair in pairs:
        name, sep, folder = pair.partition("=")
        if not sep or not name or not folder:
            raise ValueError(f"--real-outputs {pair!r}: give NAME=DIR (e.g. bicubic=out/bic)")
        if name in outputs:
            raise ValueError(f"--real-outputs: the name {name!r} is given twice")
        if not Path(folder).is_dir():
            raise ValueError(f"--real-outputs {name}: {folder} is not a folder of outputs")
        outputs[name] = Path(folder)
    return outputs


def photos(lr_dir: Path, outputs: dict[str, Path], n: int) -> list[Path]:
    """``n`` LR photos that every output folder has (as ``<stem>.png``), evenly spaced."""
    files = list_images(lr_dir)  # ImageFolderError (a ValueError) names a bad folder
    files = [p for p in files if all((d / f"{p.stem}.png").is_file() for d in outputs.values())]
    if not files:
        raise ValueError(f"no photo of {lr_dir} has an output <stem>.png in every folder")
    n = min(n, len(files))
    return [files[round(i * (len(files) - 1) / max(n - 1, 1))] for i in range(n)]


def crop_box(image: np.ndarray, crop: int, step: int) -> tuple[int, int]:
    """Top-left ``(y, x)``, multiples of ``step``, of the ``crop x crop`` window of the largest
    gradient energy of ``image`` (uint8 ``[H, W, 3]``), the first in row-major order on ties."""
    luma = np.asarray(Image.fromarray(image).convert("L"), dtype=np.float64)
    energy = np.zeros_like(luma)
    energy[:, 1:] += np.diff(luma, axis=1) ** 2
    energy[1:, :] += np.diff(luma, axis=0) ** 2
    total = np.pad(energy.cumsum(0).cumsum(1), ((1, 0), (1, 0)))  # summed-area table
    ys = np.arange(0, image.shape[0] - crop + 1, step)
    xs = np.arange(0, image.shape[1] - crop + 1, step)
    y, x = ys[:, None], xs[None, :]
    sums = total[y + crop, x + crop] - total[y, x + crop] - total[y + crop, x] + total[y, x]
    i, j = np.unravel_index(int(np.argmax(sums)), sums.shape)
    return int(ys[i]), int(xs[j])


def row(lr_path: Path, outputs: dict[str, Path], crop: int) -> tuple[list[np.ndarray], int]:
    """The tiles of one photo (LR enlarged, then each method) and the scale."""
    lr = rgb(lr_path)
    images = {name: rgb(d / f"{lr_path.stem}.png") for name, d in outputs.items()}
    first = next(iter(images.values()))
    s = first.shape[1] // lr.shape[1]
    for name, image in images.items():
        if image.shape[:2] != (s * lr.shape[0], s * lr.shape[1]):
            raise ValueError(
                f"{outputs[name] / (lr_path.stem + '.png')} is {image.shape[1]}x{image.shape[0]}"
                f", not x{s} of its LR {lr_path} ({lr.shape[1]}x{lr.shape[0]})"
            )
    c = min(crop, *first.shape[:2]) // s * s
    y, x = crop_box(first, c, s)
    lr_tile = lr[y // s : (y + c) // s, x // s : (x + c) // s].repeat(s, 0).repeat(s, 1)
    return [lr_tile] + [image[y : y + c, x : x + c] for image in images.values()], s


def picture(lr_dir: Path, outputs: dict[str, Path], n: int, crop: int) -> Image.Image:
    """The whole picture (RGB), as the module docstring describes."""
    chosen = photos(lr_dir, outputs, n)
    rows, scales = zip(*(row(p, outputs, crop) for p in chosen))
    if len(set(scales)) != 1:
        raise ValueError(f"the photos are upscaled by different factors: {sorted(set(scales))}")
    c = max(t.shape[0] for tiles in rows for t in tiles)
    names = [f"LR (nearest x{scales[0]})", *outputs]
    width = len(names) * (c + GAP) - GAP
    canvas = Image.new("RGB", (width, LABEL + len(rows) * (c + GAP)), "white")
    draw, font = ImageDraw.Draw(canvas), ImageFont.load_default()
    for k, name in enumerate(names):
        draw.text((k * (c + GAP) + 2, 2), name, fill="black", font=font)
    for i, tiles in enumerate(rows):
        for k, tile in enumerate(tiles):
            canvas.paste(Image.fromarray(tile), (k * (c + GAP), LABEL + i * (c + GAP)))
        bottom = LABEL + i * (c + GAP) + tiles[0].shape[0]  # the photo's name on its LR tile
        box = draw.textbbox((2, bottom - LABEL + 2), chosen[i].name, font=font)
        draw.rectangle((box[0] - 2, box[1] - 2, box[2] + 2, box[3] + 2), fill="white")
        draw.text((2, bottom - LABEL + 2), chosen[i].name, fill="black", font=font)
    return canvas


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real-outputs", nargs="+", required=True, metavar="NAME=DIR")
    parser.add_argument("--lr", type=Path, default=REALSRSET, help="the LR photos")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--images", type=int, default=4, help="how many photos (rows)")
    parser.add_argument("--crop", type=int, default=160, help="crop side, output pixels")
    args = parser.parse_args(argv)
    try:
        if args.images < 1 or args.crop < 1:
            raise ValueError("--images and --crop must be at least 1")
        image = picture(args.lr, parse_outputs(args.real_outputs), args.images, args.crop)
    except ValueError as e:
        print(f"gan_picture.py: error: {e}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    image.save(args.out)
    print(f"wrote {args.out} ({image.width}x{image.height})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
