"""SR model builders: each returns a Keras 3 model mapping ``[B, h, w, C]`` in [0, 1] to
``[B, scale h, scale w, C]`` for any h and w; multi-frame models (``build_espcn_mf``) take a
window of k frames, ``[B, k, h, w, C]``, and return the SR of its target frame.

The builders are imported on first use (PEP 562), so that the keys of the ``model``,
``discriminator`` and ``loss=realesrgan`` groups (``schemas``, ``gan_schemas``: no Keras) are read
by ``sr.config`` without importing TensorFlow."""

__all__ = [
    "PixelShuffle",
    "build_compact",
    "build_edsr",
    "build_espcn",
    "build_espcn_mf",
    "build_rlfn",
    "build_rrdbnet",
    "build_span",
]


def __getattr__(name: str):
    """The builders (``sr.models.build_espcn``, the ``_target_`` of ``conf/model/espcn.yaml``)
    and :class:`PixelShuffle`, imported (with Keras) when one is first read."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from sr.models.compact import build_compact
    from sr.models.edsr import build_edsr
    from sr.models.espcn import build_espcn
    from sr.models.espcn_mf import build_espcn_mf
    from sr.models.layers import PixelShuffle
    from sr.models.rlfn import build_rlfn
    from sr.models.rrdbnet import build_rrdbnet
    from sr.models.span import build_span

    globals().update(
        PixelShuffle=PixelShuffle,
        build_compact=build_compact,
        build_edsr=build_edsr,
        build_espcn=build_espcn,
        build_espcn_mf=build_espcn_mf,
        build_rlfn=build_rlfn,
        build_rrdbnet=build_rrdbnet,
        build_span=build_span,
    )
    return globals()[name]
