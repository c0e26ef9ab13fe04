"""A fixed degraded LR set of Set14, made outside the project's degradation code.

    python benchmarks/fixed_degraded_set14.py --out DIR [--hr ../shared/datasets/Set14]

Why: a model trained on Real-ESRGAN's degradations (``sr.degradations.realesrgan``) and scored on
an LR
set made by the same sampler is judged on its own training distribution. This set is made by a
short, fixed recipe in NumPy and Pillow only (the images read by ``sr.core.images``; no
``sr.core.degrade``, no ``sr.degradations.realesrgan``, no OpenCV), so that no trained sampler
produced
it. It is the same set on every run and machine
(for one NumPy and Pillow: the JPEG codec is Pillow's libjpeg).

The recipe, for HR image ``i`` of the folder in name order (PNG/JPEG; EXIF orientation applied;
a gray image stays gray, any other mode is converted to RGB):

1. Crop the HR to multiples of 4 (top-left kept, as the evaluation protocol's ``modcrop``):
   ``H x W``, uint8.
2. Blur: one isotropic Gaussian, sigma 1.2 px on the HR, a 21 x 21 kernel (``exp(-d^2 / (2
   sigma^2))`` at integer offsets -10..10, normalised to sum 1; applied as two 21-tap passes,
   which is the same kernel), reflect padding of 10 pixels (NumPy's ``mode="reflect"``: the edge
   pixel is not repeated, as OpenCV's default ``BORDER_REFLECT_101`` that Real-ESRGAN's
   ``filter2D`` uses), computed in float64, then rounded (``np.rint``) and clipped to uint8.
3. Downscale: Pillow's ``Image.resize((W / 4, H / 4), Image.Resampling.BICUBIC)`` of the blurred
   uint8 image (Pillow's antialiased bicubic, a = -0.5).
4. Noise: Gaussian, sigma 10 on the 0..255 scale, independent per pixel and channel, drawn by
   ``numpy.random.default_rng([0, i])`` (``standard_normal(lr.shape) * 10``); added in float64,
   rounded (``np.rint``) and clipped to uint8.
5. JPEG: Pillow's encoder at quality 75 (its defaults otherwise: 4:2:0 chroma subsampling for
   RGB, standard tables, baseline), decoded back by Pillow.
6. Written as ``DIR/<HR stem>.png`` (the name ``scripts/evaluate.py --lr-dir DIR`` pairs with
   ``<HR stem>.<ext>``: ``sr.evaluation.match_lr_files``), ``(H / 4) x (W / 4)``; and
   ``DIR/recipe.json``: the recipe's parameters, ``{"<LR file>": "<HR file>"}`` and the NumPy and
   Pillow versions.

Score a run on it with ``python scripts/evaluate.py RUN ../shared/datasets/Set14 --lr-dir DIR``
(``benchmarks/gan_study.py`` does, and makes the set when it is missing). Exit code 2 (nothing
written) for a missing or empty HR folder or an output folder that already holds files.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np
import PIL
from PIL import Image

from sr.core.images import list_images, load_image  # the project's one image reader

ROOT = Path(__file__).resolve().parents[1]
SET14 = ROOT.parent / "shared" / "datasets" / "Set14"
SCALE = 4
BLUR_SIGMA = 1.2  # px, on the HR
KERNEL_SIZE = 21
NOISE_SIGMA = 10.0  # on the 0..255 scale
JPEG_QUALITY = 75
SEED = 0


def gaussian_taps(sigma: float = BLUR_SIGMA, size: int = KERNEL_SIZE) -> np.ndarray:
    """The 1-D Gaussian of the blur: float64 ``[size]``, ``exp(-d^2 / (2 sigma^2))`` at the
    integer offsets ``d = -(size // 2) .. size // 2``, summing to 1. Its outer product with itself
    is the normalised ``size x size`` isotropic kernel."""
    d = np.arange(size, dtype=np.float64) - size // 2
    taps = np.exp(-(d**2) / (2.0 * sigma**2))
    return taps / taps.sum()


def blur(image: np.ndarray, sigma: float = BLUR_SIGMA, size: int = KERNEL_SIZE) -> np.ndarray:
    """Isotropic Gaussian blur of ``[H, W, C]`` (any real dtype) with reflect padding (NumPy's
    ``"reflect"``, OpenCV's ``BORDER_REFLECT_101``): float64 ``[H, W, C]``, not rounded."""
    taps, r = gaussian_taps(sigma, size), size // 2
    x = np.pad(image.astype(np.float64), ((r, r), (r, r), (0, 0)), mode="reflect")
    h, w = image.shape[:2]
    rows = sum(t * x[k : k + h] for k, t in enumerate(taps))  # [H, W + 2r, C]
    return sum(t * rows[:, k : k + w] for k, t in enumerate(taps))


def to_uint8(x: np.ndarray) -> np.ndarray:
    """Round half to even (``np.rint``) and clip to ``[0, 255]``: uint8."""
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def pil(image: np.ndarray) -> Image.Image:
    """uint8 ``[H, W, 1]`` (mode L) or ``[H, W, 3]`` (RGB) as a Pillow image."""
    return Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image)


def array(image: Image.Image) -> np.ndarray:
    """A Pillow image (L or RGB) as uint8 ``[H, W, C]``."""
    x = np.asarray(image, dtype=np.uint8)
    return x[..., None] if x.ndim == 2 else x


def degrade(
    hr: np.ndarray,
    index: int,
    noise_sigma: float = NOISE_SIGMA,
    jpeg_quality: int | None = JPEG_QUALITY,
) -> np.ndarray:
    """The recipe of the module docstring (steps 1-5) for HR image ``index`` of the set.

    Args:
        hr: uint8 ``[H, W, C]``, C = 1 (gray) or 3 (RGB), each side at least 4.
        index: the image's index in the folder's name order (seeds its noise: ``[0, index]``).
        noise_sigma: the noise's standard deviation on the 0..255 scale (0: none).
        jpeg_quality: Pillow's JPEG quality, or None for no JPEG (step 5 skipped).

    Returns:
        uint8 ``[H // 4, W // 4, C]``.
    """
    h, w = hr.shape[0] // SCALE * SCALE, hr.shape[1] // SCALE * SCALE
    blurred = to_uint8(blur(hr[:h, :w]))
    lr = pil(blurred).resize((w // SCALE, h // SCALE), Image.Resampling.BICUBIC)
    x = array(lr).astype(np.float64)
    if noise_sigma:
        x = x + np.random.default_rng([SEED, index]).standard_normal(x.shape) * noise_sigma
    lr = to_uint8(x)
    if jpeg_quality is None:
        return lr
    buffer = io.BytesIO()
    pil(lr).save(buffer, format="JPEG", quality=jpeg_quality)
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        return array(decoded)


def write_set(hr_folder: Path, out_dir: Path) -> list[Path]:
    """Write the LR of every HR image of ``hr_folder`` into ``out_dir`` (created) as
    ``<stem>.png``, and ``recipe.json``; returns the LR paths in name order.

    Raises:
        ValueError: for a bad HR folder, two HR images of one stem, or an ``out_dir`` that
            already holds files (nothing is written).
    """
    files = list_images(hr_folder)  # ImageFolderError (a ValueError) names a bad folder
    stems = [p.stem for p in files]
    if len(set(stems)) != len(stems):
        raise ValueError(f"HR folder {hr_folder} has two images of one stem: {stems}")
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ValueError(f"{out_dir} already exists and is not an empty folder: give a new --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, path in enumerate(files):
        written.append(out_dir / f"{path.stem}.png")
        pil(degrade(load_image(path), i)).save(written[-1])
    recipe = {
        "scale": SCALE,
        "blur": {"sigma_px": BLUR_SIGMA, "kernel": KERNEL_SIZE, "padding": "numpy reflect"},
        "downscale": "Pillow BICUBIC resize of the rounded blurred image",
        "noise": {"sigma": NOISE_SIGMA, "rng": "numpy.random.default_rng([0, index])"},
        "jpeg_quality": JPEG_QUALITY,
        "hr_folder": str(hr_folder),
        "files": {lr.name: hr.name for lr, hr in zip(written, files)},
        "numpy": np.__version__,
        "pillow": PIL.__version__,
    }
    (out_dir / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n")
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="new folder for the LR set")
    parser.add_argument("--hr", type=Path, default=SET14, help="HR folder (default Set14)")
    args = parser.parse_args(argv)
    try:
        written = write_set(args.hr, args.out)
    except ValueError as e:
        print(f"fixed_degraded_set14.py: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} LR images (x{SCALE}) of {args.hr} and recipe.json to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
