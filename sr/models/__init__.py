"""SR model builders: each returns a Keras 3 model mapping ``[B, h, w, C]`` in [0, 1] to
``[B, scale h, scale w, C]`` for any h and w; multi-frame models (``build_espcn_mf``) take a
window of k frames, ``[B, k, h, w, C]``, and return the SR of its target frame."""

from sr.models.compact import build_compact
from sr.models.edsr import build_edsr
from sr.models.espcn import build_espcn
from sr.models.espcn_mf import build_espcn_mf
from sr.models.layers import PixelShuffle
from sr.models.rlfn import build_rlfn
from sr.models.rrdbnet import build_rrdbnet
from sr.models.span import build_span

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
