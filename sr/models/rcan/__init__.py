"""RCAN (Y. Zhang, K. Li, K. Li, L. Wang, B. Zhong and Y. Fu, "Image Super-Resolution Using Very
Deep Residual Channel Attention Networks", ECCV 2018; github.com/yulunzhang/RCAN
``RCAN_TrainCode/code/model/rcan.py``, as spandrel copies it in
``spandrel/architectures/RCAN/__arch/rcan_arch.py``, the layout of the released files: ``head``,
``body``, ``tail``, ``sub_mean`` / ``add_mean``): the architecture's schema and registration; the
network is :mod:`sr.models.rcan.net`, the state-dict layout :mod:`sr.models.rcan.layout`.
Presets: ``conf/model/rcan.yaml`` (the paper's x4 RCAN, 15,592,379 parameters RGB),
``rcan_tiny.yaml`` (CPU tests)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register


def _odd(value) -> str | None:
    return None if int(value) % 2 == 1 else f"{value}: an odd kernel side ('same' padding)"


@dataclass
class RCANConfig(ModelConfig):
    """Keys of ``model=rcan`` (its presets: conf/model/rcan*.yaml)."""

    features: int = bounded(64, minimum=1, integer=True)  # channels everywhere (n_feats)
    groups: int = bounded(10, minimum=1, integer=True)  # residual groups (n_resgroups)
    blocks: int = bounded(20, minimum=1, integer=True)  # RCABs per group (n_resblocks)
    reduction: int = bounded(16, minimum=1, integer=True)  # channel attention's squeeze
    kernel_size: int = bounded(3, minimum=1, integer=True, check=_odd)  # every body conv
    norm: bool = True  # the DIV2K mean off the input and back on (MeanShift; Y: its Y)
    rgb_range: float = bounded(255.0, minimum=0, above=True)  # the body sees x * rgb_range


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why RCAN cannot be built with these keys, or None."""
    if scale & (scale - 1) and scale != 3:
        return f"RCAN's upsampler takes scales 2^n and 3, got data.scale={scale}"
    return None


SPEC = register(
    ModelSpec(
        "rcan",
        RCANConfig,
        build="sr.models.rcan.net:build",
        layout="sr.models.rcan.layout",
        rules=rules,
        local=False,  # channel attention pools the whole image
    )
)
