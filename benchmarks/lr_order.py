"""Measure what the order of colour conversion and LR changes: evaluation's LR (RGB, then Y) vs
training's (Y, then LR).

    python benchmarks/lr_order.py [RUN_DIR] --folder ../shared/datasets/Set5 [--scale 4]

Evaluation follows the literature (MATLAB ``imresize`` of the RGB HR, rounded to uint8, then
``rgb2ycbcr``); training makes the LR from the rounded uint8 Y of the HR (``sr.core.degrade``
explains why). For every HR image of the folder, cropped to a multiple of the scale, this prints:

(a) the mean and max absolute difference, in grey levels, between the two LR Y images: Y of
    ``make_lr`` of the RGB HR (unrounded, the model input of ``sr.evaluation``) and ``make_lr`` of
    the rounded Y of the HR (what training feeds the model);
(b) the Y PSNR in dB (protocol of ``sr.evaluation``: SR rounded to 8 bits, ``scale`` pixels of
    border, peak 255) of each upscaler fed the LR Y made each way, and the difference (Y-then-LR
    minus RGB-then-Y). The upscalers are bicubic (``bicubic_upscale`` of the LR Y) and, given
    RUN_DIR, the run's model (latest checkpoint, at the run's scale).

Then the means over the folder. Nothing is written. For reference, the protocol's bicubic baseline
(which upscales the RGB LR, then takes Y) is printed too.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import sr.config  # noqa: E402,F401  (registers the ${sr_root:} resolver of saved run configs)
from sr.core.color import y_channel  # noqa: E402
from sr.core.degrade import bicubic_upscale, make_lr  # noqa: E402
from sr.core.errors import RunDirError  # noqa: E402
from sr.core.images import ImageFolderError, list_images, load_image  # noqa: E402
from sr.evaluation import modcrop, prepare, score, super_resolve_y  # noqa: E402
from sr.loading.models import load_model_from_run  # noqa: E402


def training_lr_y(image: np.ndarray, scale: int) -> np.ndarray:
    """The LR Y training makes: ``make_lr`` of the rounded uint8 Y of the cropped HR.

    Args:
        image: uint8 ``[H, W, 1|3]``.
        scale: s.

    Returns:
        float64 ``[H / s, W / s]`` on the 8-bit grid 0..255.
    """
    hr_y = y_channel(modcrop(np.asarray(image), scale))  # uint8, as sr.core.images.load_y
    return make_lr(hr_y[..., np.newaxis], scale).numpy()[..., 0].astype(np.float64)


def measure(files, scale: int, upscalers: dict) -> list[dict]:
    """Per image: LR Y differences and the PSNR of each upscaler with each LR.

    Args:
        files: HR image paths.
        scale: s.
        upscalers: ``{name: model}``, a model mapping float32 ``[1, h, w, 1]`` in [0, 1] to
            ``[1, s h, s w, 1]``.

    Returns:
        One dict per image: ``name``, ``mean_diff``, ``max_diff`` (grey levels),
        ``protocol_bicubic`` (dB) and, per upscaler, ``<name>/rgb_y``, ``<name>/y_lr`` (dB).

    Raises:
        ImageFolderError: for an image that cannot be decoded.
        ValueError: for an image smaller than ``3 scale`` pixels.
    """
    rows = []
    for path in files:
        image = load_image(path)
        item = prepare(image, scale, path.name)  # evaluation: RGB, then LR, then Y
        lr_y_train = training_lr_y(image, scale)  # training: Y, then LR
        diff = np.abs(item.lr_y - lr_y_train)
        row = {
            "name": path.name,
            "mean_diff": float(diff.mean()),
            "max_diff": float(diff.max()),
            "protocol_bicubic": score(item.bicubic_y, item.hr_y, scale)[0],
        }
        for name, model in upscalers.items():
            for way, lr_y in (("rgb_y", item.lr_y), ("y_lr", lr_y_train)):
                row[f"{name}/{way}"] = score(super_resolve_y(model, lr_y), item.hr_y, scale)[0]
        rows.append(row)
    return rows


def table(rows: list[dict], upscalers) -> str:
    """Markdown table: one row per image, then the means."""
    head = ["image", "LR Y mean diff", "LR Y max diff"]
    for name in upscalers:
        head += [f"{name} RGB>Y (dB)", f"{name} Y>LR (dB)", f"{name} diff (dB)"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if k != "name"}
    for r in [*rows, {"name": "**mean**", **mean}]:
        cells = [r["name"], f"{r['mean_diff']:.3f}", f"{r['max_diff']:.2f}"]
        for name in upscalers:
            a, b = r[f"{name}/rgb_y"], r[f"{name}/y_lr"]
            cells += [f"{a:.3f}", f"{b:.3f}", f"{b - a:+.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="lr_order.py",
        description="LR Y and Y-PSNR with the LR made from RGB then Y (evaluation) vs from the "
        "rounded Y (training), for bicubic and optionally a trained run.",
    )
    parser.add_argument("run", nargs="?", help="run directory of train.py (optional)")
    parser.add_argument("--folder", required=True, help="folder of HR images (PNG/JPEG)")
    parser.add_argument("--scale", type=int, help="scale (default: the run's, else 4)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        scale = args.scale or 4
        upscalers = {}
        if args.run:
            model, cfg, step = load_model_from_run(args.run)
            if args.scale and args.scale != int(cfg.data.scale):
                raise ValueError(
                    f"run {args.run} was trained at x{cfg.data.scale}: drop --scale {args.scale}"
                )
            scale = int(cfg.data.scale)
        upscalers["bicubic"] = lambda x, training=False: bicubic_upscale(x, scale)
        if args.run:
            upscalers[f"{model.name} (step {step})"] = model
        files = list_images(args.folder)
        rows = measure(files, scale, upscalers)
    except (RunDirError, ImageFolderError, ValueError) as e:
        print(f"lr_order.py: error: {e}", file=sys.stderr)
        return 2
    protocol = np.mean([r["protocol_bicubic"] for r in rows])
    print(f"x{scale}, {args.folder}, {len(rows)} images; PSNR on Y, {scale}-pixel border crop")
    print(
        "RGB>Y: LR made from the RGB HR, then Y (evaluation); Y>LR: from the rounded Y "
        "(training)\n"
    )
    print(table(rows, upscalers))
    print(f"\nprotocol bicubic baseline (RGB LR upscaled, then Y): {protocol:.3f} dB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
