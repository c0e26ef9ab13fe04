"""SPAN (Wan et al., "Swift Parameter-free Attention Network for Efficient Super-Resolution",
CVPR Workshops (NTIRE) 2024; github.com/hongyuanyu/SPAN ``basicsr/archs/span_arch.py``): the
architecture's schema and registration; the network is :mod:`sr.models.span.net`, the official
state-dict layout :mod:`sr.models.span.layout`. ``conf/model/span.yaml`` is the paper's x4 SPAN
(52 features)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.norms import NORMS, norm_rule
from sr.models.registry import ModelConfig, ModelSpec, register


@dataclass
class SPANConfig(ModelConfig):
    """Keys of ``model=span``."""

    features: int = bounded(48, minimum=1, integer=True)  # channels of every block
    blocks: int = bounded(6, minimum=1, integer=True)  # parameter-free attention blocks
    bicubic_skip: bool = False  # add the bicubic upscaling of the input to the output
    img_range: float = bounded(255.0, minimum=0, above=True)  # factor on the centred input
    norm: str = bounded("centre", choices=NORMS)  # mean off the input (centre: back on output)
    fuse_silu: bool = False  # the fusion reads the last block's first conv after its SiLU


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why SPAN cannot be built with ``channels`` and these keys, or None."""
    return norm_rule(keys, channels)


SPEC = register(
    ModelSpec(
        "span",
        SPANConfig,
        build="sr.models.span.net:build_span",
        layout="sr.models.span.layout",
        rules=rules,
        legacy_targets=("sr.models.build_span",),
    )
)
