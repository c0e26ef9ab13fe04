"""NIQE, the Natural Image Quality Evaluator: the implementation behind ``sr.metrics.niqe``.

Source: A. Mittal, R. Soundararajan and A. C. Bovik, "Making a 'Completely Blind' Image Quality
Analyzer", IEEE Signal Processing Letters 20(3), 2013, and its MATLAB release (``niqe.m``,
``computequality.m``, ``computefeature.m``, ``estimateaggdparam.m``), as MATLAB's ``niqe`` and
BasicSR's ``basicsr/metrics/niqe.py`` compute it. No reference image: the distance between a
multivariate Gaussian fitted to the image's natural-scene statistics and the one fitted to 125
pristine photographs. Lower is better; pristine photos score about 3 to 5, blurred or noisy
ones 7 and more.

The computation, on a grey image ``Y`` (``[H, W]`` on the 8-bit grid 0..255):

1. ``Y`` is cropped to whole 96 x 96 blocks (top-left kept); blocks do not overlap.
2. At each of two scales: MSCN coefficients ``(Y - mu) / (sigma + 1)``, ``mu`` and ``sigma`` the
   local mean and deviation under the 7 x 7 Gaussian window (sigma 7/6, summing to 1), borders
   replicated (MATLAB ``imfilter(..., 'replicate')``), in float32 (:func:`mscn`); per block 18
   features: the generalized Gaussian fit of the coefficients (shape alpha, and the mean of the
   two AGGD scales) and, for each of four neighbour products (horizontal, vertical and the two
   diagonals, circular shifts within the block as MATLAB ``circshift``), the asymmetric
   generalized Gaussian fit (shape, mean, left and right scales). Shapes are found on the grid
   0.2:0.001:10 by moment matching (Lasmar et al. 2009), as the release does.
3. The second scale is ``Y`` downscaled by 2 with MATLAB's antialiased bicubic ``imresize``: the
   project's one operator, ``sr.core.degrade.bicubic_downscale``; its 96 x 96 blocks are the
   48 x 48 blocks there.
4. Mean and covariance of the 36 features over the blocks (blocks with a NaN feature, which a
   flat block gives, are left out of the covariance and each feature's mean ignores its NaNs, as
   ``nanmean`` and ``nancov``); the quality is
   ``sqrt((mu_p - mu) pinv((C_p + C) / 2) (mu_p - mu)^T)`` (Eq. 10 of the paper).

The pristine model (``mu_p`` [1, 36], ``C_p`` [36, 36]) and the window are data shipped with the
package: ``niqe_pris_params.npz`` beside this module (:data:`PRISTINE_FILE`), converted from the
authors' ``modelparameters.mat`` by BasicSR (XPixelGroup/BasicSR,
``basicsr/metrics/niqe_pris_params.npz``, Apache-2.0). With it, Set14's ``baboon.png`` scores
5.72957338 with MATLAB R2021a's ``niqe``, 5.7295763 with BasicSR's, and 5.7295736 here
(``tests/test_niqe.py``).
"""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np
from scipy import ndimage
from scipy.special import gamma

from sr.core.color import y_channel
from sr.core.degrade import bicubic_downscale
from sr.metrics.psnr_ssim import crop_border
from sr.metrics.registry import MetricSpec, register

PRISTINE_FILE = "niqe_pris_params.npz"
"""The pristine model beside this module: ``mu_pris_param`` float64 [1, 36], ``cov_pris_param``
float64 [36, 36] and ``gaussian_window`` float64 [7, 7] (Mittal et al.'s ``modelparameters.mat``
as converted by BasicSR, Apache-2.0)."""

BLOCK = 96
"""Side of NIQE's blocks at full scale, in pixels (the release's and MATLAB's default)."""

# The release's grid of AGGD shapes and the moment ratio r(alpha) = G(2/a)^2 / (G(1/a) G(3/a))
# at each, strictly increasing in alpha (so the nearest grid point is found by bisection).
_SHAPES = np.arange(0.2, 10.001, 0.001)
_RATIOS = np.square(gamma(2.0 / _SHAPES)) / (gamma(1.0 / _SHAPES) * gamma(3.0 / _SHAPES))
# Neighbour products of step 2, as np.roll shifts within a block: horizontal, vertical, diagonals.
_SHIFTS = ((0, 1), (1, 0), (1, 1), (1, -1))


@functools.lru_cache(maxsize=1)
def pristine_model() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mu_p [1, 36], C_p [36, 36], window [7, 7])``, float64, from :data:`PRISTINE_FILE`
    (read once, with ``importlib.resources``, so also from an installed wheel)."""
    with resources.files(__package__).joinpath(PRISTINE_FILE).open("rb") as f, np.load(f) as data:
        return (
            np.array(data["mu_pris_param"]),
            np.array(data["cov_pris_param"]),
            np.array(data["gaussian_window"]),
        )


def _nearest_shape(ratio: np.ndarray) -> np.ndarray:
    """The grid shape whose moment ratio is nearest ``ratio`` ``[N]``: MATLAB's
    ``min((r_gam - r).^2)`` (ties to the smaller shape; a NaN ratio gives the first, 0.2)."""
    right = np.clip(np.searchsorted(_RATIOS, ratio), 1, len(_RATIOS) - 1)
    left = right - 1
    take_left = np.abs(_RATIOS[left] - ratio) <= np.abs(_RATIOS[right] - ratio)
    index = np.where(take_left, left, right)
    return _SHAPES[np.where(np.isnan(ratio), 0, index)]


def aggd_fit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit an asymmetric generalized Gaussian to each row of ``x`` by moment matching
    (``estimateaggdparam.m`` of the NIQE release; Lasmar, Stitou and Berthoumieu, ICIP 2009).

    Args:
        x: float64 ``[N, M]``, N samples of M values each (a flattened block per row).

    Returns:
        ``(alpha, beta_left, beta_right)``, float64 ``[N]`` each: the shape on the grid
        0.2:0.001:10 and the left and right scales. A row without negative or without positive
        values has NaN scales (and shape 0.2), as the release gives.
    """
    squares = x * x
    negative, positive = x < 0, x > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        left = np.sqrt((squares * negative).sum(1) / negative.sum(1))
        right = np.sqrt((squares * positive).sum(1) / positive.sum(1))
        ratio_lr = left / right
        r_hat = np.mean(np.abs(x), axis=1) ** 2 / np.mean(squares, axis=1)
        r_norm = r_hat * (ratio_lr**3 + 1) * (ratio_lr + 1) / (ratio_lr**2 + 1) ** 2
    alpha = _nearest_shape(r_norm)
    spread = np.sqrt(gamma(1.0 / alpha) / gamma(3.0 / alpha))
    return alpha, left * spread, right * spread


def _blur(x: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """``x`` (float64) under the separable window ``outer(taps, taps)``, borders replicated,
    rounded to float32: the 2-D filter of the release at 2 x 7 instead of 49 products a pixel."""
    x = ndimage.correlate1d(x, taps, axis=0, mode="nearest")
    return ndimage.correlate1d(x, taps, axis=1, mode="nearest").astype(np.float32)


def mscn(y: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Mean-subtracted contrast-normalised coefficients ``(y - mu) / (sigma + 1)`` of ``[H, W]``
    (Eq. 1 of the paper), ``mu`` and ``sigma`` under ``window``, borders replicated.

    The statistics are float32, as in BasicSR (its image is float32) and, by their agreement,
    MATLAB R2021a: on Set14's ``baboon.png`` this gives 5.7295736 against MATLAB's 5.72957338,
    where float64 gives 5.7299602. (The shape fit on a 0.001 grid makes NIQE sensitive to
    rounding at the level of 1e-6: a shape moves to the next grid point.)

    Args:
        y: ``[H, W]`` on the 8-bit scale.
        window: ``[7, 7]`` separable window (``outer(g, g)``, summing to 1).

    Returns:
        float64 ``[H, W]`` (of the float32 coefficients).
    """
    taps = window.sum(axis=1)  # g: the window is outer(g, g) with sum(g) = 1
    y = np.asarray(y, dtype=np.float32)
    y64 = y.astype(np.float64)
    mu = _blur(y64, taps)
    sigma = np.sqrt(np.abs(_blur(y64 * y64, taps) - mu * mu))
    return ((y - mu) / (sigma + np.float32(1.0))).astype(np.float64)


def block_features(coefficients: np.ndarray, block: int) -> np.ndarray:
    """The 18 features of each ``block`` x ``block`` tile of MSCN coefficients (step 2 of the
    module docstring; ``computefeature.m``).

    Args:
        coefficients: float64 ``[h block, w block]``.
        block: tile side in pixels.

    Returns:
        float64 ``[h w, 18]``, tiles in row-major order: alpha and the mean scale of the
        coefficients, then per neighbour product alpha, mean, left and right scales.
    """
    rows, cols = coefficients.shape[0] // block, coefficients.shape[1] // block
    tiles = coefficients.reshape(rows, block, cols, block).swapaxes(1, 2)
    tiles = tiles.reshape(rows * cols, block, block)
    alpha, left, right = aggd_fit(tiles.reshape(len(tiles), -1))
    features = [alpha, (left + right) / 2]
    for shift in _SHIFTS:
        products = tiles * np.roll(tiles, shift, axis=(1, 2))
        alpha, left, right = aggd_fit(products.reshape(len(tiles), -1))
        mean = (right - left) * gamma(2.0 / alpha) / gamma(1.0 / alpha)  # Eq. 8
        features += [alpha, mean, left, right]
    return np.stack(features, axis=1)


def _covariance(features: np.ndarray) -> np.ndarray:
    """Covariance ``[36, 36]`` of the rows without a NaN (``nancov``); one such row gives zeros,
    as MATLAB's ``cov`` of one observation.

    Raises:
        ValueError: if every row has a NaN (every block is flat: NIQE is undefined).
    """
    whole = features[~np.isnan(features).any(axis=1)]
    if len(whole) == 0:
        raise ValueError(
            f"NIQE is undefined for this image: none of its {len(features)} {BLOCK}x{BLOCK} "
            "blocks has texture (each is flat in some feature); score a textured image"
        )
    if len(whole) == 1:
        return np.zeros((features.shape[1], features.shape[1]))
    return np.cov(whole, rowvar=False)


def niqe_y(y: np.ndarray) -> float:
    """NIQE of a grey image (module docstring; Mittal et al. 2013, Eq. 10).

    Args:
        y: ``[H, W]`` uint8, or float on the 8-bit grid (MATLAB's ``niqe`` reads uint8: values
            off the grid are used as they are), H and W >= 96.

    Returns:
        NIQE, a float >= 0; lower is better.

    Raises:
        ValueError: for a shape other than ``[H, W]`` with H, W >= 96 (names it), or an image
            with no textured block.
    """
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 2 or min(y.shape) < BLOCK:
        raise ValueError(
            f"NIQE needs a grey image [H, W] of at least {BLOCK}x{BLOCK} pixels (one block), got "
            f"shape {y.shape}"
        )
    mu_p, cov_p, window = pristine_model()
    rows, cols = y.shape[0] // BLOCK, y.shape[1] // BLOCK
    y = y[: rows * BLOCK, : cols * BLOCK]
    half = bicubic_downscale(y[:, :, np.newaxis], 2).numpy()[:, :, 0].astype(np.float64)
    features = np.concatenate(
        [block_features(mscn(y, window), BLOCK), block_features(mscn(half, window), BLOCK // 2)],
        axis=1,
    )
    cov = _covariance(features)  # first: it refuses an image whose every block is flat
    d = mu_p[0] - np.nanmean(features, axis=0)
    quality = d @ np.linalg.pinv((cov_p + cov) / 2) @ d
    return float(np.sqrt(quality))


def niqe(image) -> float:
    """NIQE, the Natural Image Quality Evaluator of Mittal, Soundararajan and Bovik, "Making a
    'Completely Blind' Image Quality Analyzer", IEEE SPL 2013, as MATLAB's ``niqe`` and BasicSR's
    ``calculate_niqe`` (crop_border 0) compute it on the Y channel: 96 x 96 blocks, two scales
    (the second by MATLAB's antialiased bicubic ``imresize``, the project's operator), MSCN
    coefficients, AGGD fits, the distance to the pristine model's Gaussian
    (``sr.metrics.niqe``, which ships the model's parameters). No reference image is needed.

    The Y is the project's one conversion (``sr.core.color.y_channel``: BT.601 as MATLAB
    ``rgb2ycbcr`` of uint8, rounded to the 8-bit grid as MATLAB keeps uint8 and BasicSR rounds
    before NIQE). Set14's ``baboon.png`` scores 5.72957338 with MATLAB R2021a; this gives
    5.7295736.

    Args:
        image: uint8 ``[H, W, 3]`` (RGB), or a grey / Y image ``[H, W]`` or ``[H, W, 1]``;
            H, W >= 96. Only whole 96 x 96 blocks are scored (the top-left ``96 floor(H / 96)``
            x ``96 floor(W / 96)``); crop any border before.

    Returns:
        NIQE, a float >= 0, lower is better (pristine photos about 3 to 5; blurred, noisy or
        JPEG-damaged ones 7 and more).

    Raises:
        TypeError: for another dtype than uint8 (names it and the fix).
        ValueError: for another shape, an image smaller than 96 x 96, or an image without any
            textured block (NIQE is then undefined).
    """
    x = np.asarray(image)
    if x.dtype != np.uint8:
        raise TypeError(
            f"niqe needs an 8-bit image (uint8 0..255), got {x.dtype}: round and convert it, "
            "e.g. np.clip(np.floor(x + 0.5), 0, 255).astype(np.uint8) for [0, 255] floats"
        )
    if not (x.ndim == 2 or (x.ndim == 3 and x.shape[-1] in (1, 3))):
        raise ValueError(f"niqe needs an image [H, W], [H, W, 1] or [H, W, 3], got {x.shape}")
    if min(x.shape[:2]) < BLOCK:
        raise ValueError(
            f"niqe needs an image of at least {BLOCK}x{BLOCK} pixels (one block), got "
            f"{x.shape[1]}x{x.shape[0]}"
        )
    return niqe_y(y_channel(x))


def niqe_cropped(image, scale: int, name: str = "") -> float:
    """NIQE (:func:`niqe`) of an 8-bit image with ``scale`` pixels cropped from each border, as
    the protocol scores.

    Args:
        image: ``[H, W]`` or ``[H, W, 1|3]`` on the 8-bit grid 0..255 (float or uint8).
        scale: pixels cut from every border (0: none).
        name: the image's name, for error messages.

    Raises:
        ValueError: for an image under 96 x 96 pixels after the crop, or without texture
            (names it).
    """
    try:
        return _niqe_border(image, scale)
    except ValueError as e:
        raise ValueError(f"NIQE of {name or 'an image'}: {e}") from e


def _niqe_border(image, scale: int) -> float:
    return niqe(crop_border(np.asarray(image), scale).astype(np.uint8))


# No reference, lower is better, on the 8-bit output (RGB of an RGB model, Y of a Y model).
NIQE = register(
    MetricSpec(
        "niqe", _niqe_border, reference=False, direction="min", reads="output", title="NIQE"
    )
)
