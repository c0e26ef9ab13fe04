"""OmniSR (H. Wang, X. Chen, B. Ni, Y. Liu and J. Liu, "Omni Aggregation Networks for
Lightweight Image Super-Resolution", CVPR 2023; github.com/Francis0625/Omni-SR
``components/OmniSR.py`` and ``ops/``, as spandrel copies them in
``spandrel/architectures/OmniSR/__arch/``): the architecture's schema and registration; the
network is :mod:`sr.models.omnisr.net`, the official state-dict layout
:mod:`sr.models.omnisr.layout`. Presets: ``conf/model/omnisr.yaml`` (the paper's x4 OmniSR,
805,376 parameters RGB), ``omnisr_tiny.yaml`` (CPU tests)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register


def _quad(value) -> str | None:
    return None if int(value) % 4 == 0 else f"{value}: a multiple of 4 (four attention heads)"


@dataclass
class OmniSRConfig(ModelConfig):
    """Keys of ``model=omnisr`` (its presets: conf/model/omnisr*.yaml)."""

    features: int = bounded(64, minimum=4, integer=True, check=_quad)  # channels everywhere
    groups: int = bounded(5, minimum=1, integer=True)  # OSAGs (the reference's res_num)
    blocks: int = bounded(1, minimum=1, integer=True)  # OSA blocks per group (block_num)
    window_size: int = bounded(8, minimum=2, integer=True)  # attention window side
    pe: bool = True  # relative position bias in the window and grid attentions
    bias: bool = True  # the head, body, group and upsampler convs have biases


SPEC = register(
    ModelSpec(
        "omnisr",
        OmniSRConfig,
        build="sr.models.omnisr.net:build",
        layout="sr.models.omnisr.layout",
        local=False,  # grid attention and ESA read the whole image
        min_size=15,  # ESA: a stride-2 3x3 conv, then a 7x7 max pool of stride 3
    )
)
