"""The degradations that make a training pair's LR from its HR, the ``degradation`` group: the
SR literature's bicubic (``bicubic.Bicubic``, the default; the operator itself,
``sr.core.degrade.make_lr``, stays in core since evaluation, inference and NIQE use it) and
Real-ESRGAN's second-order real-world degradation (``realesrgan.RealESRGAN``) with its parts:
random blur kernels (``kernels``), PyTorch's ``interpolate`` as matrices (``interpolate``),
unsharp masking of the target (``usm``) and a batched JPEG in TensorFlow ops (``jpeg``).
Imports only ``sr.core``; ``sr.data`` and ``sr.config`` use it.

Each degradation is registered by name (``registry``: every module here with a top-level
``SPEC = register(...)``, importing no TensorFlow: ``bicubic`` and ``realesrgan_params``, the keys
of ``degradation=realesrgan``) and implements the protocol of ``protocol.Degradation``, which is
all the data sources and validation ask of it. The two classes below are imported on first use
(PEP 562), so that ``sr.config`` checks a command line without importing TensorFlow."""

__all__ = ["Bicubic", "RealESRGAN"]


def __getattr__(name: str):
    """:class:`Bicubic` and :class:`RealESRGAN`, imported (with TensorFlow) when first read."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from sr.degradations.bicubic import Bicubic
    from sr.degradations.realesrgan import RealESRGAN

    globals().update(Bicubic=Bicubic, RealESRGAN=RealESRGAN)
    return globals()[name]
