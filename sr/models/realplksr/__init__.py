"""RealPLKSR (the community's real-world network from PLKSR: D. Lee, S. Yun and Y. Ro, "Partial
Large Kernel CNNs for Efficient Super-Resolution", arXiv 2404.11848, 2024; RealPLKSR by the
traiNNer-redux / neosr community, as spandrel copies it in
``spandrel/architectures/PLKSR/__arch/RealPLKSR.py``): the architecture's schema and
registration; the network is :mod:`sr.models.realplksr.net`, the state-dict layout
:mod:`sr.models.realplksr.layout`. Presets: ``conf/model/realplksr.yaml`` (dim 64, 28 blocks,
7,389,680 parameters RGB at x4), ``realplksr_tiny.yaml`` (CPU tests). The DySample upsampler
variant is not built (its layout is refused naming ``to_img.init_pos``)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register


def _odd(value) -> str | None:
    return None if int(value) % 2 == 1 else f"{value}: an odd kernel side ('same' padding)"


@dataclass
class RealPLKSRConfig(ModelConfig):
    """Keys of ``model=realplksr`` (its presets: conf/model/realplksr*.yaml)."""

    dim: int = bounded(64, minimum=1, integer=True)  # channels everywhere
    blocks: int = bounded(28, minimum=1, integer=True)  # PLK blocks (n_blocks)
    kernel_size: int = bounded(17, minimum=1, integer=True, check=_odd)  # the large kernel
    split_ratio: float = bounded(0.25, minimum=0, maximum=1, above=True)  # channels it sees
    use_ea: bool = True  # element-wise attention (3x3 conv, sigmoid, product)
    norm_groups: int = bounded(4, minimum=1, integer=True)  # GroupNorm groups (no layer_norm)
    layer_norm: bool = False  # a channel LayerNorm first instead of the GroupNorm last


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why RealPLKSR cannot be built with these keys, or None."""
    dim, groups = keys.get("dim", 64), keys.get("norm_groups", 4)
    if not keys.get("layer_norm", False) and dim % groups:
        return f"model.dim={dim} is not a multiple of model.norm_groups={groups} (GroupNorm)"
    if int(dim * keys.get("split_ratio", 0.25)) < 1:
        return "model.split_ratio leaves the large kernel no channel: int(dim * ratio) >= 1"
    return None


SPEC = register(
    ModelSpec(
        "realplksr",
        RealPLKSRConfig,
        build="sr.models.realplksr.net:build",
        layout="sr.models.realplksr.layout",
        rules=rules,
        local=False,  # GroupNorm reads the whole image
    )
)
