"""The metrics of the SR literature's protocol, as BasicSR's ``basicsr/metrics``: PSNR and SSIM
of the Y channel (or RGB) with ``scale`` pixels of border cropped (``psnr_ssim``: MATLAB's
``psnr`` and Wang et al.'s SSIM, 11 x 11 Gaussian window, sigma 1.5), and NIQE, the no-reference
quality of Mittal et al. 2013 as MATLAB computes it (``niqe``, with its pristine model
``niqe_pris_params.npz``: ``from sr.metrics.niqe import niqe``). NumPy on 8-bit images;
imports only ``sr.core``. Each metric is registered by name where it is computed
(``sr.metrics.registry``: psnr, ssim, psnr_rgb, niqe)."""

from sr.metrics import niqe as _niqe  # noqa: F401  (registers niqe)
from sr.metrics.psnr_ssim import crop_border, psnr, psnr_rgb, ssim
from sr.metrics.registry import MetricSpec, get, names, register

__all__ = ["MetricSpec", "crop_border", "get", "names", "psnr", "psnr_rgb", "register", "ssim"]
