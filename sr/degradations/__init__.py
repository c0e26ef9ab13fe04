"""The degradations that make a training pair's LR from its HR, the ``degradation`` group: the
SR literature's bicubic (``bicubic.Bicubic``, the default; the operator itself,
``sr.core.degrade.make_lr``, stays in core since evaluation, inference and NIQE use it) and
Real-ESRGAN's second-order real-world degradation (``realesrgan.RealESRGAN``) with its parts:
random blur kernels (``kernels``), PyTorch's ``interpolate`` as matrices (``interpolate``),
unsharp masking of the target (``usm``) and a batched JPEG in TensorFlow ops (``jpeg``).
Imports only ``sr.core``; ``sr.data`` and ``sr.config`` use it."""

from sr.degradations.bicubic import Bicubic
from sr.degradations.realesrgan import RealESRGAN

__all__ = ["Bicubic", "RealESRGAN"]
