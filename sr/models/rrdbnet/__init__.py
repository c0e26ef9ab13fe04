"""RRDBNet, the generator of ESRGAN (Wang et al., ECCV Workshops 2018) and Real-ESRGAN (Wang et
al., ICCV Workshops 2021); BasicSR ``basicsr/archs/rrdbnet_arch.py``: the architecture's schema
and registration; the network is :mod:`sr.models.rrdbnet.net`, BasicSR's state-dict layout
:mod:`sr.models.rrdbnet.layout`. ``conf/model/rrdbnet.yaml`` is Real-ESRGAN's RRDBNet_x4plus."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register

SCALES = (2, 3, 4, 8)  # nearest x2 stages, or one x3


@dataclass
class RRDBNetConfig(ModelConfig):
    """Keys of ``model=rrdbnet``."""

    features: int = bounded(64, minimum=1, integer=True)  # channels of the trunk
    blocks: int = bounded(23, minimum=1, integer=True)  # residual-in-residual dense blocks
    growth: int = bounded(32, minimum=1, integer=True)  # channels each dense conv adds


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why RRDBNet cannot be built at ``scale``, or None."""
    if scale not in SCALES:
        return (
            f"model=rrdbnet supports data.scale 2, 3, 4 and 8 (nearest-neighbour upsampling "
            f"stages), got data.scale={scale}"
        )
    return None


SPEC = register(
    ModelSpec(
        "rrdbnet",
        RRDBNetConfig,
        build="sr.models.rrdbnet.net:build_rrdbnet",
        layout="sr.models.rrdbnet.layout",
        rules=rules,
        legacy_targets=("sr.models.build_rrdbnet",),
    )
)
