"""SR model builders: each returns a Keras 3 model mapping ``[B, h, w, C]`` in [0, 1] to
``[B, scale h, scale w, C]`` for any h and w."""

from sr.models.edsr import build_edsr
from sr.models.espcn import build_espcn
from sr.models.layers import PixelShuffle

__all__ = ["PixelShuffle", "build_edsr", "build_espcn"]
