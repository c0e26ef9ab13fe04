"""PSNR and SSIM on the Y channel with the SR literature's protocol, and NIQE, the no-reference
score of real photos.

Protocol (SRCNN, VDSR, EDSR, RCAN tables): HR cropped to a multiple of the scale, LR by MATLAB
bicubic, metrics on Y of BT.601 (MATLAB ``rgb2ycbcr``, 16..235) computed from 8-bit RGB, ``scale``
pixels cropped from every border, PSNR with peak 255, SSIM of Wang et al. 2004 (11x11 Gaussian
window, sigma 1.5, K1 = 0.01, K2 = 0.03, statistics over the valid part of the window). The
metrics take Y channels ``[H, W]``: ``sr.core.color.y_channel`` makes them (a single-channel image
is its own Y). Everything is computed in float64.

NIQE (:func:`niqe`, Mittal et al. 2013) needs no HR: it scores an 8-bit image alone, on its
rounded Y; the computation is :mod:`sr.metrics.niqe`.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from sr.metrics.registry import MetricSpec, register

SSIM_SIGMA = 1.5
SSIM_RADIUS = 5  # 11x11 window
SSIM_K1, SSIM_K2 = 0.01, 0.03


def crop_border(x: np.ndarray, border: int) -> np.ndarray:
    """Cut ``border`` pixels from each side of the two leading (spatial) axes."""
    if border <= 0:
        return x
    if x.shape[0] <= 2 * border or x.shape[1] <= 2 * border:
        raise ValueError(f"image {x.shape[:2]} is too small to crop a border of {border} pixels")
    return x[border:-border, border:-border]


def _check_pair(sr_y, hr_y) -> tuple[np.ndarray, np.ndarray]:
    sr_y = np.asarray(sr_y, dtype=np.float64)
    hr_y = np.asarray(hr_y, dtype=np.float64)
    if sr_y.shape != hr_y.shape or sr_y.ndim != 2:
        raise ValueError(
            f"SR and HR must be [H, W] of one shape, got {sr_y.shape} and {hr_y.shape}"
        )
    return sr_y, hr_y


def psnr(sr_y, hr_y, border: int = 0, peak: float = 255.0) -> float:
    """PSNR in dB: ``10 log10(peak^2 / MSE)`` after cropping ``border`` pixels from each side.

    Args:
        sr_y, hr_y: ``[H, W]`` Y channels, values in [0, ``peak``] (not rounded here).
        border: pixels cut from every border, ``scale`` in the SR protocol.
        peak: 255 for 8-bit-range data.

    Returns:
        PSNR in dB; ``inf`` for identical images.
    """
    sr_y, hr_y = _check_pair(sr_y, hr_y)
    mse = np.mean((crop_border(sr_y, border) - crop_border(hr_y, border)) ** 2)
    return float("inf") if mse == 0 else float(10.0 * np.log10(peak**2 / mse))


def _gaussian_filter_valid(x: np.ndarray) -> np.ndarray:
    # Separable 11x11 Gaussian (sigma 1.5, normalised) keeping only positions where the whole
    # window lies inside the image, as Wang et al.'s ssim_index.m does with filter2(..., 'valid').
    out = ndimage.gaussian_filter(x, SSIM_SIGMA, truncate=SSIM_RADIUS / SSIM_SIGMA, mode="reflect")
    r = SSIM_RADIUS
    return out[r:-r, r:-r]


def ssim(sr_y, hr_y, border: int = 0, peak: float = 255.0) -> float:
    """Mean SSIM of Wang et al., "Image quality assessment: from error visibility to structural
    similarity", IEEE TIP 2004, as their ``ssim_index.m``: 11x11 Gaussian window (sigma 1.5),
    K1 = 0.01, K2 = 0.03, population statistics, valid positions only.

    Args:
        sr_y, hr_y: ``[H, W]`` Y channels in [0, ``peak``]; at least 11x11 after the crop.
        border: pixels cut from every border before the window slides.
        peak: dynamic range L.

    Returns:
        Mean SSIM in [-1, 1].
    """
    x, y = (crop_border(a, border) for a in _check_pair(sr_y, hr_y))
    if min(x.shape) < 2 * SSIM_RADIUS + 1:
        raise ValueError(f"SSIM needs at least 11x11 pixels after the border crop, got {x.shape}")
    c1, c2 = (SSIM_K1 * peak) ** 2, (SSIM_K2 * peak) ** 2
    mu_x, mu_y = _gaussian_filter_valid(x), _gaussian_filter_valid(y)
    var_x = _gaussian_filter_valid(x * x) - mu_x**2
    var_y = _gaussian_filter_valid(y * y) - mu_y**2
    cov = _gaussian_filter_valid(x * y) - mu_x * mu_y
    num = (2 * mu_x * mu_y + c1) * (2 * cov + c2)
    den = (mu_x**2 + mu_y**2 + c1) * (var_x + var_y + c2)
    return float(np.mean(num / den))


def psnr_rgb(sr, hr, scale: int) -> float:
    """PSNR in dB (peak 255) over every channel of ``[H, W, C]`` images (the mean squared error
    over R, G and B), ``scale`` pixels cropped from each border: :func:`psnr` of the cropped
    channels side by side.

    Raises:
        ValueError: for images of different shapes, or too small for the crop.
    """
    sr, hr = np.asarray(sr, np.float64), np.asarray(hr, np.float64)
    if sr.shape != hr.shape or sr.ndim != 3:
        raise ValueError(f"SR and HR must be [H, W, C] of one shape, got {sr.shape}, {hr.shape}")
    sr, hr = crop_border(sr, scale), crop_border(hr, scale)
    return psnr(sr.reshape(sr.shape[0], -1), hr.reshape(hr.shape[0], -1))


def _psnr_y(sr_y, hr_y, scale: int) -> float:
    return psnr(sr_y, hr_y, border=scale)


def _ssim_y(sr_y, hr_y, scale: int) -> float:
    return ssim(sr_y, hr_y, border=scale)


# The protocol's metrics: Y with ``scale`` border pixels cropped; RGB PSNR of an RGB output.
PSNR = register(MetricSpec("psnr", _psnr_y, unit="dB", reads="y", title="PSNR (dB)"))
SSIM = register(MetricSpec("ssim", _ssim_y, reads="y", title="SSIM"))
PSNR_RGB = register(
    MetricSpec("psnr_rgb", psnr_rgb, unit="dB", reads="rgb", title="RGB PSNR (dB)")
)
