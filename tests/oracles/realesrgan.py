"""Real-ESRGAN's high-order degradation, one image at a time in NumPy + OpenCV: the oracle that
``sr.degradations.realesrgan`` (the tf.data graph version) is tested against
(``tests/test_realesrgan_reference.py`` checks this module itself,
``tests/test_realesrgan_distribution.py`` the graph against it) and timed against
(``python -m benchmarks.realesrgan_reference`` passes :func:`bench_degradation` to
``sr.bench.degradation_runs``: the NumPy/OpenCV reference rows of ``docs/performance.md``).

Source: X. Wang, L. Xie, C. Dong, Y. Shan, "Real-ESRGAN: Training Real-World Blind
Super-Resolution with Pure Synthetic Data", ICCV Workshops 2021, section 3, and its official code:
``realesrgan/data/realesrgan_dataset.py`` (the kernels of one image), ``feed_data`` of
``realesrgan/models/realesrnet_model.py`` (the two stages), ``options/train_realesrnet_x4plus.yml``
(the values of :data:`PAPER`), and BasicSR's ``basicsr/data/degradations.py`` (kernel formulas,
noise, JPEG) and ``basicsr/utils/img_process_util.py`` (``filter2D``). The operations run in
NumPy and OpenCV as BasicSR's NumPy functions do: ``cv2.filter2D`` with ``BORDER_REFLECT_101``
(PyTorch's ``reflect`` padding), ``cv2.resize``, ``cv2.imencode``/``imdecode``; every draw comes
from one ``np.random.Generator`` per image, in the order of the official code (the dataset's
kernels first, then the model's draws).

The LR of one HR image ``x`` (float32 RGB in [0, 1], ``H x W``) at scale ``s``:

1. first stage: blur by a random kernel (:func:`random_kernel`), resize by a factor drawn up /
   down / keep to ``floor(H f)`` with area, bilinear or bicubic interpolation, Gaussian noise
   (``gaussian_noise_prob``) else Poisson noise, grey (one plane for all channels) with
   ``gray_noise_prob``, clip to [0, 1], JPEG of a quality drawn from ``jpeg_range``;
2. second stage: blur with ``second_blur_prob``, resize to ``int(H / s f2)``, noise, then in
   random order (one half each) [resize to ``H // s`` + the final sinc filter
   (:func:`final_sinc_kernel`, the identity with ``1 - final_sinc_prob``)] and JPEG;
3. clip and round to the 8-bit grid.

Where this differs from the official PyTorch code, and why (inherent to a per-image CPU version):

- per-image draws: the official model draws the resize factors and modes, the noise kind and the
  final order once per batch (per image: the kernels, noise sigma/scale, grey flag, JPEG quality),
  and one grey Gaussian noise plane for the batch's grey images (each scaled by its own sigma; the
  graph does the same), which for one image is its own plane;
- ``cv2.resize`` maps pixels by the ratio of the sizes (PyTorch's ``interpolate(scale_factor=f)``
  by ``f`` itself: under half a pixel apart at the far edge); OpenCV's bicubic is Keys' cubic with
  a = -0.75 as PyTorch's (the TF graph uses a = -0.5); upscaling by ``INTER_AREA`` weights
  the source pixels by their overlap (as TensorFlow's area resize) where PyTorch's ``area``
  (adaptive average pooling) averages whole pixels; no antialiasing in either;
- JPEG is libjpeg (OpenCV's, 4:2:0 chroma, accurate integer IDCT) at the drawn quality rounded
  down to an integer, not the differentiable DiffJPEG approximation;
- every resized side is at least :data:`MIN_SIDE` = 11 pixels, the least the reflect padding of a
  21-pixel kernel allows (PyTorch and TensorFlow refuse less; the TF graph clamps the same way);
  it only binds for crops under 74 pixels at x4 (the official crops are 400);
- the grey Poisson noise uses torchvision's ``rgb_to_grayscale`` weights (0.2989, 0.587, 0.114),
  what the official training runs (``generate_poisson_noise_pt``), on RGB (BasicSR's NumPy
  ``generate_poisson_noise`` applies ``COLOR_BGR2GRAY``);
- with ``gt_usm`` (:func:`degrade_uint8`; on in the official options and in the graph's default)
  the HR is sharpened by BasicSR's NumPy ``usm_sharp`` and rounded to 8 bits, and the LR made
  from it.

Test code, not product code: NumPy, SciPy and OpenCV only (no TensorFlow, no ``sr``).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import cv2
import numpy as np
from scipy import special

KERNEL_SIZE = 21
"""Side of every kernel after padding (pixels), as the official dataset pads."""

MIN_SIDE = KERNEL_SIZE // 2 + 1
"""Smallest side (pixels) a resize may produce: reflect padding needs more pixels than it adds."""

KERNEL_LIST = (
    "iso",
    "aniso",
    "generalized_iso",
    "generalized_aniso",
    "plateau_iso",
    "plateau_aniso",
)
"""The kernel families of ``kernel_prob`` / ``kernel_prob2``, in this order (the official
``kernel_list``; fixed, as in ``sr.degradations.kernels.KERNEL_TYPES``)."""

RESIZE_MODES = ("area", "bilinear", "bicubic")
"""Interpolations of the random resizes, drawn uniformly (an int mode indexes this tuple)."""
INTERPOLATION = {"area": cv2.INTER_AREA, "bilinear": cv2.INTER_LINEAR, "bicubic": cv2.INTER_CUBIC}

GRAY_WEIGHTS = np.array([0.2989, 0.587, 0.114], np.float32)
"""R, G, B weights of the grey image of Poisson noise (torchvision ``rgb_to_grayscale``)."""

PAPER = dict(
    # options/train_realesrnet_x4plus.yml; kernel_sizes: realesrgan_dataset.py's kernel_range
    kernel_sizes=(7, 9, 11, 13, 15, 17, 19, 21),
    kernel_prob=(0.45, 0.25, 0.12, 0.03, 0.12, 0.03),  # one per KERNEL_LIST entry
    sinc_prob=0.1,
    blur_sigma=(0.2, 3.0),
    betag_range=(0.5, 4.0),
    betap_range=(1.0, 2.0),
    resize_prob=(0.2, 0.7, 0.1),  # up, down, keep
    resize_range=(0.15, 1.5),
    gaussian_noise_prob=0.5,
    noise_range=(1.0, 30.0),  # Gaussian sigma on 0..255
    poisson_scale_range=(0.05, 3.0),
    gray_noise_prob=0.4,
    jpeg_range=(30.0, 95.0),
    second_blur_prob=0.8,
    kernel_prob2=(0.45, 0.25, 0.12, 0.03, 0.12, 0.03),
    sinc_prob2=0.1,
    blur_sigma2=(0.2, 1.5),
    betag_range2=(0.5, 4.0),
    betap_range2=(1.0, 2.0),
    resize_prob2=(0.3, 0.4, 0.3),
    resize_range2=(0.3, 1.2),
    gaussian_noise_prob2=0.5,
    noise_range2=(1.0, 25.0),
    poisson_scale_range2=(0.05, 2.5),
    gray_noise_prob2=0.4,
    jpeg_range2=(30.0, 95.0),
    final_sinc_prob=0.8,
)
"""The paper's parameters: the keys of ``conf/degradation/realesrgan.yaml`` (and of
``sr.degradations.realesrgan.Params``), second-stage keys with the suffix ``2``."""


def full_params(params: dict | None = None) -> dict:
    """:data:`PAPER` updated with ``params``: a partial dict, or the whole
    ``conf/degradation/realesrgan.yaml`` as loaded (its ``_target_`` ignored; lists for tuples).

    Raises:
        ValueError: for a key that is not one of :data:`PAPER`'s (naming it).
    """
    params = dict(params or {})
    params.pop("_target_", None)
    unknown = sorted(set(params) - set(PAPER))
    if unknown:
        raise ValueError(
            f"unknown Real-ESRGAN parameter(s) {unknown}: the keys are {', '.join(PAPER)}"
        )
    return {**PAPER, **params}


def stage_params(params: dict, stage: int) -> dict:
    """The keys of stage ``stage`` (1 or 2) without their suffix ``2``: ``{"kernel_prob": ...}``.

    Raises:
        ValueError: if ``stage`` is not 1 or 2.
    """
    if stage not in (1, 2):
        raise ValueError(f"stage must be 1 or 2, got {stage!r}")
    names = ("kernel_prob", "sinc_prob", "blur_sigma", "betag_range", "betap_range")
    names += ("resize_prob", "resize_range", "gaussian_noise_prob", "noise_range")
    names += ("poisson_scale_range", "gray_noise_prob", "jpeg_range")
    suffix = "" if stage == 1 else "2"
    return {name: params[name + suffix] for name in names}


# ------------------------------------------------------------------------------------------------
# Kernels (BasicSR degradations.py): float64, sum 1, side ``size`` zero-padded to ``pad_to``
# ------------------------------------------------------------------------------------------------
def pad_kernel(kernel: np.ndarray, pad_to: int = KERNEL_SIZE) -> np.ndarray:
    """``kernel`` ``[k, k]`` (k odd) zero-padded to ``[pad_to, pad_to]`` (unchanged if
    ``pad_to <= k``), as ``realesrgan_dataset.py`` pads."""
    pad = max(0, (pad_to - kernel.shape[0]) // 2)
    return np.pad(kernel, ((pad, pad), (pad, pad)))


def quadratic_form(size: int, sigma_x: float, sigma_y: float, theta: float) -> np.ndarray:
    """``[x y] Sigma^-1 [x y]^T`` on the ``size`` x ``size`` grid centred at 0, ``Sigma = R
    diag(sigma_x^2, sigma_y^2) R^T`` with R the rotation by ``theta`` (radians): BasicSR's
    ``mesh_grid``, ``sigma_matrix2`` and ``pdf2``. float64 ``[size, size]`` (x: column, y: row).

    Raises:
        ValueError: if ``size`` is not a positive odd integer.
    """
    if size < 1 or size % 2 != 1:
        raise ValueError(f"kernel size must be a positive odd integer, got {size!r}")
    ax = np.arange(-size // 2 + 1.0, size // 2 + 1.0)
    xx, yy = np.meshgrid(ax, ax)
    c, s = math.cos(theta), math.sin(theta)
    rot = np.array([[c, -s], [s, c]])
    inverse = np.linalg.inv(rot @ np.diag([sigma_x**2, sigma_y**2]) @ rot.T)
    grid = np.stack([xx, yy], -1)
    return np.sum((grid @ inverse) * grid, -1)


def normalised(kernel: np.ndarray, pad_to: int) -> np.ndarray:
    """``kernel / sum(kernel)`` padded by :func:`pad_kernel`."""
    return pad_kernel(kernel / np.sum(kernel), pad_to)


def gaussian_kernel(
    size: int, sigma_x: float, sigma_y: float, theta: float, pad_to: int = KERNEL_SIZE
) -> np.ndarray:
    """Bivariate Gaussian ``exp(-q / 2)`` (BasicSR ``bivariate_Gaussian``; isotropic for
    ``sigma_y = sigma_x``, ``theta = 0``), sigmas in pixels, ``theta`` in radians.

    Returns:
        float64 ``[pad_to, pad_to]`` (``[size, size]`` if ``pad_to <= size``), sums to 1.
    """
    return normalised(np.exp(-0.5 * quadratic_form(size, sigma_x, sigma_y, theta)), pad_to)


def generalized_kernel(
    size: int, sigma_x: float, sigma_y: float, theta: float, beta: float, pad_to: int = KERNEL_SIZE
) -> np.ndarray:
    """Generalized Gaussian ``exp(-q^beta / 2)`` (BasicSR ``bivariate_generalized_Gaussian``;
    beta = 1 is the Gaussian). float64 ``[pad_to, pad_to]``, sums to 1."""
    q = quadratic_form(size, sigma_x, sigma_y, theta)
    return normalised(np.exp(-0.5 * np.power(q, beta)), pad_to)


def plateau_kernel(
    size: int, sigma_x: float, sigma_y: float, theta: float, beta: float, pad_to: int = KERNEL_SIZE
) -> np.ndarray:
    """Plateau ``1 / (1 + q^beta)`` (BasicSR ``bivariate_plateau``). float64
    ``[pad_to, pad_to]``, sums to 1."""
    q = quadratic_form(size, sigma_x, sigma_y, theta)
    return normalised(1.0 / (np.power(q, beta) + 1.0), pad_to)


def sinc_kernel(size: int, cutoff: float, pad_to: int = KERNEL_SIZE) -> np.ndarray:
    """2-D circular low-pass filter ``w_c J1(w_c r) / (2 pi r)``, ``w_c^2 / (4 pi)`` at the centre
    (BasicSR ``circular_lowpass_kernel``; ``cutoff`` w_c in radians, pi the Nyquist frequency),
    normalised on ``size`` x ``size`` then zero-padded.

    Returns:
        float64 ``[pad_to, pad_to]`` (``[size, size]`` if ``pad_to <= size``), sums to 1.

    Raises:
        ValueError: if ``size`` is not a positive odd integer.
    """
    if size < 1 or size % 2 != 1:
        raise ValueError(f"kernel size must be a positive odd integer, got {size!r}")
    ax = np.arange(size) - (size - 1) / 2
    r = np.hypot(ax[:, None], ax[None, :])
    safe = np.where(r > 0, r, 1.0)
    kernel = np.where(r > 0, cutoff * special.j1(cutoff * safe) / (2 * np.pi * safe), 0.0)
    kernel[size // 2, size // 2] = cutoff**2 / (4 * np.pi)
    return normalised(kernel, pad_to)


def pulse_kernel() -> np.ndarray:
    """The identity filter: float64 ``[21, 21]``, 1 at the centre (the official
    ``pulse_tensor``)."""
    kernel = np.zeros((KERNEL_SIZE, KERNEL_SIZE))
    kernel[KERNEL_SIZE // 2, KERNEL_SIZE // 2] = 1.0
    return kernel


def random_beta(rng: np.random.Generator, beta_range) -> float:
    """A shape parameter as BasicSR draws it: uniform in [low, 1) or [1, high), one half each."""
    if rng.uniform() < 0.5:
        return rng.uniform(beta_range[0], 1.0)
    return rng.uniform(1.0, beta_range[1])


def random_kernel(rng: np.random.Generator, stage: int, params: dict | None = None) -> np.ndarray:
    """One stage's blur kernel, drawn as ``realesrgan_dataset.py`` draws it: a side from
    ``kernel_sizes``; with ``sinc_prob`` a sinc of cutoff in [pi/3, pi] (side < 13) or [pi/5, pi];
    else a family of :data:`KERNEL_LIST` by ``kernel_prob`` (BasicSR ``random_mixed_kernels``),
    sigma_x (and for ``*_aniso`` sigma_y and an angle in [-pi, pi]) from ``blur_sigma``, beta by
    :func:`random_beta` from ``betag_range`` / ``betap_range``.

    Args:
        rng: the image's generator.
        stage: 1 or 2 (the second stage reads the keys with the suffix ``2``).
        params: :data:`PAPER` or a partial override of it (:func:`full_params`).

    Returns:
        float64 ``[21, 21]``, sums to 1.
    """
    params = full_params(params)
    p = stage_params(params, stage)
    size = int(rng.choice(params["kernel_sizes"]))
    if rng.uniform() < p["sinc_prob"]:
        low = np.pi / 3 if size < 13 else np.pi / 5
        return sinc_kernel(size, rng.uniform(low, np.pi))
    probs = np.asarray(p["kernel_prob"], np.float64)
    family = KERNEL_LIST[rng.choice(len(KERNEL_LIST), p=probs / probs.sum())]
    sigma_x = sigma_y = rng.uniform(*p["blur_sigma"])
    theta = 0.0
    if family.endswith("aniso"):
        sigma_y, theta = rng.uniform(*p["blur_sigma"]), rng.uniform(-np.pi, np.pi)
    if family.startswith("generalized"):
        return generalized_kernel(
            size, sigma_x, sigma_y, theta, random_beta(rng, p["betag_range"])
        )
    if family.startswith("plateau"):
        return plateau_kernel(size, sigma_x, sigma_y, theta, random_beta(rng, p["betap_range"]))
    return gaussian_kernel(size, sigma_x, sigma_y, theta)


def final_sinc_kernel(rng: np.random.Generator, params: dict | None = None) -> np.ndarray:
    """The final filter: with ``final_sinc_prob`` a sinc of a side from ``kernel_sizes`` and a
    cutoff in [pi/3, pi], else :func:`pulse_kernel`. float64 ``[21, 21]``, sums to 1."""
    p = full_params(params)
    if rng.uniform() < p["final_sinc_prob"]:
        size = int(rng.choice(p["kernel_sizes"]))
        return sinc_kernel(size, rng.uniform(np.pi / 3, np.pi))
    return pulse_kernel()


# ------------------------------------------------------------------------------------------------
# Operations on one image: float32 [H, W, 3] RGB
# ------------------------------------------------------------------------------------------------
def blur(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Correlate every channel of ``image`` ``[H, W, C]`` with ``kernel`` ``[k, k]`` (k odd),
    borders reflected without repeating the edge (``cv2.BORDER_REFLECT_101`` = PyTorch's
    ``reflect``): BasicSR's ``filter2D``. float32, same shape (no clipping)."""
    out = cv2.filter2D(
        np.ascontiguousarray(image, np.float32),
        -1,
        np.asarray(kernel, np.float32),
        borderType=cv2.BORDER_REFLECT_101,
    )
    return out.reshape(image.shape)


def resize(image: np.ndarray, size, mode) -> np.ndarray:
    """``image`` ``[H, W, 3]`` resized to ``size`` (height, width), each side at least
    :data:`MIN_SIDE`, by ``cv2.resize`` without antialiasing.

    Args:
        image: float32 ``[H, W, 3]``.
        size: (height, width) in pixels.
        mode: ``"area"``, ``"bilinear"``, ``"bicubic"`` or its index in :data:`RESIZE_MODES`.

    Returns:
        float32 ``[max(height, 11), max(width, 11), 3]`` (bicubic may leave [0, 1]).

    Raises:
        ValueError: for an unknown mode.
    """
    name = RESIZE_MODES[mode] if isinstance(mode, int | np.integer) else mode
    if name not in INTERPOLATION:
        raise ValueError(f"resize mode must be one of {RESIZE_MODES} or 0..2, got {mode!r}")
    h, w = max(int(size[0]), MIN_SIDE), max(int(size[1]), MIN_SIDE)
    return cv2.resize(image, (w, h), interpolation=INTERPOLATION[name])


def gaussian_noise(
    image: np.ndarray, sigma: float, gray: bool, rng: np.random.Generator
) -> np.ndarray:
    """``image`` + N(0, (sigma / 255)^2), one noise plane for every channel if ``gray``, clipped
    to [0, 1] (BasicSR ``add_gaussian_noise``, ``clip=True``; ``sigma`` on the 0..255 scale).
    float32 ``[H, W, 3]``."""
    shape = image.shape[:2] + ((1,) if gray else image.shape[2:])
    noise = rng.standard_normal(shape, dtype=np.float32) * np.float32(sigma / 255.0)
    return np.clip(image + noise, 0.0, 1.0, dtype=np.float32)


def poisson_noise(
    image: np.ndarray, scale: float, gray: bool, rng: np.random.Generator
) -> np.ndarray:
    """``image`` + ``scale`` x Poisson noise, clipped to [0, 1] (BasicSR
    ``generate_poisson_noise_pt`` for one image): of the grey image (:data:`GRAY_WEIGHTS`, in
    every channel) if ``gray``; the source rounded to 8 bits, ``v = 2^ceil(log2(its number of
    distinct levels))``, noise = Poisson(source v) / v - source. float32 ``[H, W, 3]``."""
    source = image @ GRAY_WEIGHTS if gray else image
    source = np.clip(np.round(source * 255.0), 0, 255) / 255.0
    vals = 2.0 ** np.ceil(np.log2(len(np.unique(source))))
    noise = (rng.poisson(source * vals) / vals - source).astype(np.float32)
    if gray:
        noise = noise[..., np.newaxis]
    return np.clip(image + noise * np.float32(scale), 0.0, 1.0, dtype=np.float32)


def jpeg(image: np.ndarray, quality) -> np.ndarray:
    """JPEG round trip of an RGB image by OpenCV's libjpeg (BasicSR ``add_jpg_compression``):
    clipped, rounded to 8 bits, encoded as BGR (so that 4:2:0 chroma subsampling acts on the
    chroma of the right colours) at ``int(quality)`` (1..100, rounded down), decoded.

    Args:
        image: float32 ``[H, W, 3]`` RGB.
        quality: JPEG quality.

    Returns:
        float32 ``[H, W, 3]`` RGB in [0, 1] on the 8-bit grid.

    Raises:
        ValueError: if OpenCV cannot encode the image.
    """
    levels = np.clip(np.round(image * 255.0), 0, 255).astype(np.uint8)
    params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    ok, data = cv2.imencode(".jpg", cv2.cvtColor(levels, cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise ValueError(f"cv2.imencode failed on a {levels.shape} image at quality {quality}")
    bgr = cv2.imdecode(data, cv2.IMREAD_COLOR)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB).astype(np.float32) / 255.0


# ------------------------------------------------------------------------------------------------
# The random steps and the two stages (feed_data of realesrnet_model.py)
# ------------------------------------------------------------------------------------------------
def random_factor(rng: np.random.Generator, p: dict) -> float:
    """A resize factor: up (in [1, high)), down (in [low, 1)) or kept, by ``resize_prob``."""
    kind = rng.choice(3, p=np.asarray(p["resize_prob"]) / np.sum(p["resize_prob"]))
    if kind == 0:
        return rng.uniform(1.0, p["resize_range"][1])
    if kind == 1:
        return rng.uniform(p["resize_range"][0], 1.0)
    return 1.0


def random_noise(image: np.ndarray, rng: np.random.Generator, p: dict) -> np.ndarray:
    """Gaussian noise with ``gaussian_noise_prob`` (sigma from ``noise_range``), else Poisson
    noise (scale from ``poisson_scale_range``), grey with ``gray_noise_prob``."""
    if rng.uniform() < p["gaussian_noise_prob"]:
        sigma = rng.uniform(*p["noise_range"])
        return gaussian_noise(image, sigma, rng.uniform() < p["gray_noise_prob"], rng)
    scale = rng.uniform(*p["poisson_scale_range"])
    return poisson_noise(image, scale, rng.uniform() < p["gray_noise_prob"], rng)


def check_hr(hr: np.ndarray, scale: int) -> np.ndarray:
    """``hr`` as float32, checked.

    Raises:
        ValueError: if ``hr`` is not ``[H, W, 3]`` or ``H // scale`` or ``W // scale`` is under
            :data:`MIN_SIDE`.
    """
    hr = np.asarray(hr, np.float32)
    if hr.ndim != 3 or hr.shape[-1] != 3:
        raise ValueError(f"hr must be an RGB image [H, W, 3], got shape {hr.shape}")
    if min(hr.shape[:2]) // scale < MIN_SIDE:
        raise ValueError(
            f"hr {hr.shape[0]}x{hr.shape[1]} is too small at x{scale}: the LR sides must be "
            f">= {MIN_SIDE} pixels (give at least {scale * MIN_SIDE} pixels a side)"
        )
    return hr


def degrade(
    hr: np.ndarray, scale: int, rng: np.random.Generator, params: dict | None = None
) -> np.ndarray:
    """The LR of ``hr`` by Real-ESRGAN's two-stage degradation (module docstring).

    Args:
        hr: float32 ``[H, W, 3]`` RGB in [0, 1]; ``H // scale``, ``W // scale`` >= 11.
        scale: s, the SR factor.
        rng: the image's generator (all draws, in the official code's order).
        params: :data:`PAPER` or a partial override of it.

    Returns:
        float32 ``[H // s, W // s, 3]`` in [0, 1] on the 8-bit grid (k / 255).

    Raises:
        ValueError: for a bad ``hr`` (:func:`check_hr`) or an unknown parameter.
    """
    hr, p = check_hr(hr, scale), full_params(params)
    one, two = stage_params(p, 1), stage_params(p, 2)
    kernel1, kernel2 = random_kernel(rng, 1, p), random_kernel(rng, 2, p)
    sinc = final_sinc_kernel(rng, p)
    h, w = hr.shape[:2]
    out_size = (h // scale, w // scale)

    x = blur(hr, kernel1)  # first stage
    f = random_factor(rng, one)
    x = resize(x, (math.floor(h * f), math.floor(w * f)), int(rng.integers(3)))
    x = random_noise(x, rng, one)
    x = jpeg(x, rng.uniform(*one["jpeg_range"]))

    if rng.uniform() < p["second_blur_prob"]:  # second stage
        x = blur(x, kernel2)
    f = random_factor(rng, two)
    x = resize(x, (int(h / scale * f), int(w / scale * f)), int(rng.integers(3)))
    x = random_noise(x, rng, two)
    if rng.uniform() < 0.5:  # [resize back + sinc] then JPEG
        x = blur(resize(x, out_size, int(rng.integers(3))), sinc)
        x = jpeg(x, rng.uniform(*two["jpeg_range"]))
    else:  # JPEG then [resize back + sinc]
        x = jpeg(x, rng.uniform(*two["jpeg_range"]))
        x = blur(resize(x, out_size, int(rng.integers(3))), sinc)
    return (np.clip(np.round(x * 255.0), 0, 255) / 255.0).astype(np.float32)


def usm_sharp(image: np.ndarray, weight=0.5, radius=50, threshold=10) -> np.ndarray:
    """Unsharp masking, BasicSR's ``usm_sharp`` (``basicsr/utils/img_process_util.py``, the NumPy
    twin of the ``USMSharp`` that ``feed_data`` applies with ``gt_usm``): float32 ``[H, W, 3]``
    in [0, 1] to the same; a Gaussian of side 51 (sigma 8.3, OpenCV's rule), borders
    ``BORDER_REFLECT_101``, a mask of the residual above ``threshold`` / 255, blurred."""
    if radius % 2 == 0:
        radius += 1
    blurred = cv2.GaussianBlur(image, (radius, radius), 0)
    residual = image - blurred
    mask = (np.abs(residual) * 255 > threshold).astype(np.float32)
    soft_mask = cv2.GaussianBlur(mask, (radius, radius), 0)
    sharp = np.clip(image + weight * residual, 0, 1)
    return soft_mask * sharp + (1 - soft_mask) * image


def degrade_uint8(
    hr_uint8: np.ndarray, scale: int, seed, params: dict | None = None, gt_usm: bool = False
) -> np.ndarray:
    """:func:`degrade` of a uint8 image with a generator of its own.

    Args:
        hr_uint8: uint8 ``[H, W, 3]`` RGB.
        scale: s.
        seed: int (or sequence of ints) for ``np.random.default_rng``.
        params: :data:`PAPER` or a partial override of it.
        gt_usm: sharpen the HR first (:func:`usm_sharp`, rounded to 8 bits), as the official
            options and ``degradation.gt_usm`` do: the LR is made from the sharpened HR.

    Returns:
        uint8 ``[H // s, W // s, 3]``.
    """
    hr = np.asarray(hr_uint8, np.float32) / 255.0
    if gt_usm:
        hr = np.round(usm_sharp(hr) * 255.0) / 255.0
    lr = degrade(hr, scale, np.random.default_rng(seed), params)
    return np.round(lr * 255.0).astype(np.uint8)


def random_crops(folder, crop: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` uint8 RGB crops ``[n, crop, crop, 3]``, each from an image of ``folder`` drawn
    uniformly, at a uniform position.

    Raises:
        FileNotFoundError: if ``folder`` holds no PNG/JPEG image.
        ValueError: if an image is smaller than the crop (naming it).
    """
    files = sorted(
        f for f in Path(folder).iterdir() if f.suffix.lower() in (".png", ".jpg", ".jpeg")
    )
    if not files:
        raise FileNotFoundError(f"no PNG/JPEG image in {folder}: give a folder of photos")
    images = []
    for f in files:
        bgr = cv2.imdecode(np.fromfile(f, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None or min(bgr.shape[:2]) < crop:
            raise ValueError(f"{f}: not an image of at least {crop}x{crop} pixels")
        images.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    rng = np.random.default_rng(seed)
    crops = np.empty((n, crop, crop, 3), np.uint8)
    for i in range(n):
        image = images[rng.integers(len(images))]
        top = rng.integers(image.shape[0] - crop + 1)
        left = rng.integers(image.shape[1] - crop + 1)
        crops[i] = image[top : top + crop, left : left + crop]
    return crops


def bench_degradation():
    """:func:`degrade_uint8` as ``benchmarks/realesrgan_reference.py`` times it, the way a PyTorch
    ``DataLoader`` worker runs BasicSR's code: the HR sharpened first (``gt_usm``, the graph's
    default), OpenCV on one thread in this process (``cv2.setNumThreads(1)``).

    Returns:
        ``degrade(hr_uint8, scale, seed)``: uint8 ``[P, P, 3]`` to uint8 ``[P / s, P / s, 3]``.
    """
    cv2.setNumThreads(1)
    return functools.partial(degrade_uint8, gt_usm=True)
