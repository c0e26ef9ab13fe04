"""RLFN (Kong et al., "Residual Local Feature Network for Efficient Super-Resolution", CVPR
Workshops (NTIRE) 2022; github.com/bytedance/RLFN ``model/rlfn.py``, ``model/block.py``): the
architecture's schema and registration; the network is :mod:`sr.models.rlfn.net`, the official
state-dict layout :mod:`sr.models.rlfn.layout`. ``conf/model/rlfn.yaml`` is the paper's RLFN."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.norms import NORMS, norm_rule
from sr.models.registry import ModelConfig, ModelSpec, register

MIN_SIZE = 15  # LR pixels: ESA's stride-2 3x3 conv then 7x7 max pool need 15 x 15


@dataclass
class RLFNConfig(ModelConfig):
    """Keys of ``model=rlfn``."""

    features: int = bounded(52, minimum=1, integer=True)  # channels between blocks
    # channels in a block's first two convolutions (null: features)
    mid_features: int | None = bounded(None, minimum=1, integer=True)
    blocks: int = bounded(6, minimum=1, integer=True)  # residual local feature blocks
    esa_channels: int = bounded(16, minimum=1, integer=True)  # channels of the attention (ESA)
    bicubic_skip: bool = False  # add the bicubic upscaling of the input to the output
    norm: str = bounded("centre", choices=NORMS)  # mean off the input, back on the output
    img_range: float = bounded(1.0, minimum=0, above=True)  # factor inside (official: 255)


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why RLFN cannot be built with ``channels`` and these keys, or None."""
    return norm_rule(keys, channels)


SPEC = register(
    ModelSpec(
        "rlfn",
        RLFNConfig,
        build="sr.models.rlfn.net:build_rlfn",
        layout="sr.models.rlfn.layout",
        rules=rules,
        local=False,  # ESA pools on a grid anchored at the input's corner
        legacy_targets=("sr.models.build_rlfn",),
        min_size=MIN_SIZE,
    )
)
