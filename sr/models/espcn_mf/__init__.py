"""Multi-frame ESPCN by early fusion (VESPCN, Caballero et al., CVPR 2017, section 3.1): the
architecture's schema and registration; the network is :mod:`sr.models.espcn_mf.net` (with
``data=sequence``: a window of k LR frames in, the target frame's SR out)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sr.core.schema import bounded
from sr.models.espcn import ESPCNConfig
from sr.models.registry import ModelSpec, register

FUSION_INITS = ("target", "glorot")
"""``model.fusion_init``: how its fusion convolution starts."""

ALIGNS = ("global", "none")
"""``model.align``: register the frames to the target first, or not."""


@dataclass
class ESPCNMFConfig(ESPCNConfig):
    """Keys of ``model=espcn_mf``."""

    frames: int = bounded(3, minimum=1, integer=True)  # LR frames per sample (data.frames)
    target_frame: Any = "last"  # the frame the output is the SR of (data.target_frame)
    fusion_init: str = bounded("target", choices=FUSION_INITS)  # how the fusion conv starts
    align: str = bounded("global", choices=ALIGNS)  # register the frames to the target first


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why ``model.target_frame`` is not a frame of a window of ``model.frames``, or None."""
    from sr.core.target_frame import target_index

    try:
        target_index(keys["frames"], keys["target_frame"])
    except ValueError as e:
        return str(e)
    return None


SPEC = register(
    ModelSpec(
        "espcn_mf",
        ESPCNMFConfig,
        build="sr.models.espcn_mf.net:build_espcn_mf",
        frames=True,
        rules=rules,
        legacy_targets=("sr.models.build_espcn_mf",),
    )
)
