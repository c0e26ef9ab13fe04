"""SRVGGNetCompact, Real-ESRGAN's compact model (Wang et al., ICCV Workshops 2021;
``realesrgan/archs/srvgg_arch.py``): the architecture's schema and registration; the network is
:mod:`sr.models.compact.net`, the official state-dict layout :mod:`sr.models.compact.layout`.
``conf/model/compact.yaml`` is realesr-general-x4v3 (32 convs)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register

ACTIVATIONS = ("prelu", "relu", "leakyrelu")
"""``model.activation``: the reference's ``act_type`` options."""


@dataclass
class CompactConfig(ModelConfig):
    """Keys of ``model=compact``."""

    features: int = bounded(64, minimum=1, integer=True)  # channels of every body convolution
    convs: int = bounded(16, minimum=0, integer=True)  # 3x3 convolutions between first and last
    # after every convolution but the last (the released models: prelu)
    activation: str = bounded("prelu", choices=ACTIVATIONS)


SPEC = register(
    ModelSpec(
        "compact",
        CompactConfig,
        build="sr.models.compact.net:build_compact",
        layout="sr.models.compact.layout",
        legacy_targets=("sr.models.build_compact",),
    )
)
