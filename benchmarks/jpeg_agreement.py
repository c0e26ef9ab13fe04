"""How close is the batched JPEG in TensorFlow ops (``sr.degradations.jpeg``) to Pillow's, and how
fast?

    python benchmarks/jpeg_agreement.py
    python benchmarks/jpeg_agreement.py --images ../shared/datasets/hr_sample --crops 48 --crop 112

Takes ``--crops`` crops of ``--crop`` x ``--crop`` pixels (plus odd-sized ones, ``--crop`` + 5
wide) from the photos of ``--images`` (default ``../shared/datasets/hr_sample`` and ``Set14``),
compresses each at qualities 30, 50, 70, 80, 90, 95 with :func:`sr.degradations.jpeg.jpeg_batch`
(all
qualities in one batch) and with Pillow (``Image.save(format="JPEG", quality=q)``, its defaults:
4:2:0, ISLOW DCT; then decoded), and prints per quality the PSNR between the two (mean and min
over crops; ``inf`` when identical), the share of identical crops, and the PSNR of Pillow's JPEG
against its input for scale. Then the time of a batch of 16 crops: ours eager, in a
``tf.function`` and compiled by XLA, in both carriers of its integers (float64, int32), against
Pillow's encode + decode one image after another; median of ``--repeat`` runs after a warm-up,
on this machine's CPU (printed), whose load the other processes set.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import PIL  # noqa: E402
import tensorflow as tf  # noqa: E402
from PIL import Image, features  # noqa: E402

from sr.config import PROJECT_ROOT  # noqa: E402
from sr.degradations.jpeg import jpeg_batch  # noqa: E402

QUALITIES = (30, 50, 70, 80, 90, 95)
SHARED = PROJECT_ROOT.parent / "shared" / "datasets"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jpeg_agreement.py", description=__doc__.split("\n")[0])
    default = [str(SHARED / "hr_sample"), str(SHARED / "Set14")]
    parser.add_argument("--images", nargs="+", default=default, help="folders of photos")
    parser.add_argument("--crops", type=int, default=48, help="crops per size")
    parser.add_argument("--crop", type=int, default=112, help="crop side (pixels)")
    parser.add_argument("--batch", type=int, default=16, help="batch of the timing")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs (median)")
    return parser.parse_args(argv)


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (``platform.processor()`` elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def load_crops(folders: list[str], count: int, height: int, width: int) -> np.ndarray:
    """uint8 ``[count, height, width, 3]``: crops at fixed pseudo-random places, photo by photo."""
    missing = [f for f in folders if not Path(f).is_dir()]
    if missing:
        raise SystemExit(f"no folder {missing}: pass --images FOLDER [FOLDER ...]")
    paths = sorted(p for f in folders for p in Path(f).iterdir() if p.suffix in (".png", ".jpg"))
    if not paths:
        raise SystemExit(f"no .png or .jpg photos in {folders}: pass --images FOLDER")
    rng = np.random.default_rng(0)
    crops = []
    while len(crops) < count:
        image = np.asarray(Image.open(paths[len(crops) % len(paths)]).convert("RGB"))
        if image.shape[0] < height or image.shape[1] < width:
            continue
        top = rng.integers(0, image.shape[0] - height + 1)
        left = rng.integers(0, image.shape[1] - width + 1)
        crops.append(image[top : top + height, left : left + width])
    return np.stack(crops)


def pillow(image: np.ndarray, quality: int) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=int(quality))
    buf.seek(0)
    return np.asarray(Image.open(buf).convert("RGB"))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0**2 / mse) if mse else float("inf")


def agreement(crops: np.ndarray) -> dict[int, tuple[list[float], list[float]]]:
    """Per quality: PSNR(ours, Pillow) and PSNR(Pillow, input) of each crop."""
    batch = np.concatenate([crops] * len(QUALITIES))
    qualities = np.repeat(QUALITIES, len(crops))
    ours = jpeg_batch(tf.constant(batch, tf.float32) / 255.0, qualities).numpy()
    ours = np.round(ours * 255.0).astype(np.uint8)
    scores = {}
    for quality in QUALITIES:
        pick = qualities == quality
        refs = [pillow(image, quality) for image in batch[pick]]
        scores[quality] = (
            [psnr(o, r) for o, r in zip(ours[pick], refs, strict=True)],
            [psnr(r, c) for r, c in zip(refs, batch[pick], strict=True)],
        )
    return scores


def ms(run, repeat: int) -> float:
    run()  # warm-up (tracing, compilation)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def timings(crops: np.ndarray, repeat: int) -> dict[str, float]:
    """ms per batch of ``len(crops)``: ours eager / tf.function / XLA in both carriers (float64,
    int32), Pillow one image after another."""
    images = tf.constant(crops, tf.float32) / 255.0
    qualities = tf.constant(np.resize(np.array(QUALITIES, np.float32), len(crops)))
    result = {}
    for dtype in (tf.float64, tf.int32):

        def run(x, q, dtype=dtype):
            return jpeg_batch(x, q, dtype=dtype)

        graph, xla = tf.function(run), tf.function(run, jit_compile=True)
        for name, f in (("eager", run), ("tf.function", graph), ("XLA", xla)):
            key = f"ours {dtype.name}, {name}"
            result[key] = ms(lambda f=f: f(images, qualities).numpy(), repeat)
    result["Pillow, per image"] = ms(
        lambda: [pillow(c, q) for c, q in zip(crops, qualities.numpy(), strict=True)], repeat
    )
    return result


def main(argv=None) -> None:
    args = parse_args(argv)
    square = load_crops(args.images, args.crops, args.crop, args.crop)
    odd = load_crops(args.images, args.crops, args.crop, args.crop + 5)
    size = f"{args.crop}x{args.crop}"
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; TensorFlow {tf.__version__}")
    print(f"Pillow {PIL.__version__}, libjpeg-turbo {features.version('libjpeg_turbo')}")
    print(
        f"{2 * args.crops} crops: {args.crops} of {size}, {args.crops} of {args.crop + 5} wide\n"
    )
    print("| quality | ours-Pillow mean (dB) | min (dB) | identical | Pillow-input (dB) |")
    print("|---:|---:|---:|---:|---:|")
    square_scores, odd_scores = agreement(square), agreement(odd)
    for quality in QUALITIES:
        ours = square_scores[quality][0] + odd_scores[quality][0]
        jpeg = square_scores[quality][1] + odd_scores[quality][1]
        identical = sum(s == float("inf") for s in ours) / len(ours)
        print(
            f"| {quality} | {statistics.mean(ours):.2f} | {min(ours):.2f} | "
            f"{100 * identical:.1f} % | {statistics.mean(jpeg):.2f} |"
        )
    print(f"\nms per batch of {args.batch} crops of {size} (median of {args.repeat} runs)")
    print("| codec | ms per batch | ms per image |")
    print("|---|---:|---:|")
    for name, value in timings(square[: args.batch], args.repeat).items():
        print(f"| {name} | {value:.1f} | {value / args.batch:.2f} |")


if __name__ == "__main__":
    main()
