"""SAFMN (L. Sun, J. Dong, J. Tang and J. Pan, "Spatially-Adaptive Feature Modulation for
Efficient Image Super-Resolution", ICCV 2023; github.com/sunny2109/SAFMN
``basicsr/archs/safmn_arch.py``, as spandrel copies it in
``spandrel/architectures/SAFMN/__arch/safmn.py``): the architecture's schema and registration;
the network is :mod:`sr.models.safmn.net`, the state-dict layout :mod:`sr.models.safmn.layout`.
Presets: ``conf/model/safmn.yaml`` (the paper's x4 SAFMN, 239,520 parameters RGB),
``safmn_tiny.yaml`` (CPU tests)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register


def _quad(value) -> str | None:
    return None if int(value) % 4 == 0 else f"{value}: a multiple of 4 (four SAFM levels)"


@dataclass
class SAFMNConfig(ModelConfig):
    """Keys of ``model=safmn`` (its presets: conf/model/safmn*.yaml)."""

    dim: int = bounded(36, minimum=4, integer=True, check=_quad)  # channels everywhere
    blocks: int = bounded(8, minimum=1, integer=True)  # attention blocks (n_blocks)
    ffn_scale: float = bounded(2.0, minimum=0, above=True)  # CCM's hidden channels / dim


SPEC = register(
    ModelSpec(
        "safmn",
        SAFMNConfig,
        build="sr.models.safmn.net:build",
        layout="sr.models.safmn.layout",
        local=False,  # the coarsest SAFM level pools an eighth of the image
    )
)
