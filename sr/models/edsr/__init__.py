"""EDSR (Lim et al., "Enhanced Deep Residual Networks for Single Image Super-Resolution", CVPRW
2017): the architecture's schema and registration; the network is :mod:`sr.models.edsr.net`,
BasicSR's state-dict layout :mod:`sr.models.edsr.layout`. Presets:
``conf/model/edsr_baseline.yaml`` (the paper's baseline), ``conf/model/edsr_lite.yaml``."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.norms import NORMS, norm_rule
from sr.models.registry import ModelConfig, ModelSpec, register

SCALES = (2, 3, 4, 8)  # x2 pixel-shuffle stages, or one x3


@dataclass
class EDSRConfig(ModelConfig):
    """Keys of ``model.arch=edsr`` (``model=edsr_baseline``, ``model=edsr_lite``)."""

    features: int = bounded(64, minimum=1, integer=True)  # filters of every body convolution
    blocks: int = bounded(16, minimum=1, integer=True)  # residual blocks
    res_scale: float = bounded(1.0, minimum=0, above=True)  # factor on each block's residual
    direct_upsample: bool = False  # one conv and one pixel shuffle of scale at the end
    bicubic_skip: bool = False  # add the bicubic upscaling of the input to the output
    norm: str = bounded("centre", choices=NORMS)  # mean off the input, back on the output
    img_range: float = bounded(1.0, minimum=0, above=True)  # factor inside (BasicSR: 255)


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why EDSR cannot be built at ``scale`` with ``channels`` and these keys, or None."""
    if scale not in SCALES and not keys.get("direct_upsample"):
        return (
            f"EDSR supports scales 2, 3, 4 and 8, got data.scale={scale} "
            "(model.direct_upsample=true takes any scale)"
        )
    return norm_rule(keys, channels)


SPEC = register(
    ModelSpec(
        "edsr",
        EDSRConfig,
        build="sr.models.edsr.net:build_edsr",
        layout="sr.models.edsr.layout",
        rules=rules,
        legacy_targets=("sr.models.build_edsr",),
    )
)
