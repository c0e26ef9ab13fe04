"""The keys of each model builder (the ``model`` group's schemas), with their allowed values.

``conf/model/<name>.yaml`` extends one of them through its defaults list (``- base_edsr``), so a
typo (``model.featurs=8``) or a wrong type (``model.features=7`` for ESPCN's list) is refused when
the config composes, and a value out of range (``model.blocks=-1``) by
:func:`sr.core.schema.check_node` at start-up, before any data or model work. ``scale`` and
``channels`` come from ``data.scale`` and ``data.channels``. :data:`SCHEMAS` maps each builder
(a ``_target_``) to its schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from sr.core.schema import bounded

KERAS_ACTIVATIONS = tuple(
    "celu elu exponential gelu glu hard_shrink hard_sigmoid hard_silu hard_swish hard_tanh "
    "leaky_relu linear log_sigmoid log_softmax mish relu relu6 selu sigmoid silu soft_shrink "
    "softmax softplus softsign sparse_plus sparse_sigmoid sparsemax squareplus swish tanh "
    "tanh_shrink threshold".split()
)
"""The names ``keras.activations.get`` takes (Keras 3.15: the functions of ``keras.activations``),
written out so that the config is checked without importing Keras (tests/test_train_refusals.py
compares them with the installed Keras's)."""

COMPACT_ACTIVATIONS = ("prelu", "relu", "leakyrelu")
"""``model.activation`` of ``model=compact``: the reference's ``act_type`` options
(``sr.models.compact``)."""

FUSION_INITS = ("target", "glorot")
"""``model.fusion_init`` of ``model=espcn_mf``: how its fusion convolution starts."""

ALIGNS = ("global", "none")
"""``model.align`` of ``model=espcn_mf``: register the frames to the target first, or not."""

NORMS = ("centre", "div2k_mean", "none")
"""What a builder subtracts from its input in [0, 1] (``model.norm``): ``centre`` 0.5 on every
channel (the project's own convention), ``div2k_mean`` ``sr.models.layers.DIV2K_RGB_MEAN`` (the
reference code's, RGB only), ``none`` nothing."""


def _activation(name) -> str | None:
    """Why ``name`` is not a Keras activation (:data:`KERAS_ACTIVATIONS`), or None."""
    if isinstance(name, str) and name in KERAS_ACTIVATIONS:
        return None
    return "must name a Keras activation (tanh, relu, ...)"


def _features(default):
    return bounded(default, minimum=1, integer=True, length=2)


@dataclass
class ModelConfig:
    """Keys of every option of the ``model`` group."""

    _target_: str = MISSING


@dataclass
class ESPCNConfig(ModelConfig):
    """Keys of ``sr.models.build_espcn`` (``model=espcn``)."""

    features: list[int] = _features([64, 32])  # filters of the first two convolutions
    activation: str = bounded("tanh", check=_activation)  # between convolutions (Keras)


@dataclass
class ESPCNMFConfig(ESPCNConfig):
    """Keys of ``sr.models.build_espcn_mf`` (``model=espcn_mf``)."""

    frames: int = bounded(3, minimum=1, integer=True)  # LR frames per sample (data.frames)
    target_frame: Any = "last"  # the frame the output is the SR of (data.target_frame)
    fusion_init: str = bounded("target", choices=FUSION_INITS)  # how the fusion conv starts
    align: str = bounded("global", choices=ALIGNS)  # register the frames to the target first


@dataclass
class EDSRConfig(ModelConfig):
    """Keys of ``sr.models.build_edsr`` (``model=edsr_baseline``, ``model=edsr_lite``)."""

    features: int = bounded(64, minimum=1, integer=True)  # filters of every body convolution
    blocks: int = bounded(16, minimum=1, integer=True)  # residual blocks
    res_scale: float = bounded(1.0, minimum=0, above=True)  # factor on each block's residual
    direct_upsample: bool = False  # one conv and one pixel shuffle of scale at the end
    bicubic_skip: bool = False  # add the bicubic upscaling of the input to the output
    norm: str = bounded("centre", choices=NORMS)  # mean off the input, back on the output
    img_range: float = bounded(1.0, minimum=0, above=True)  # factor inside (BasicSR: 255)


@dataclass
class RLFNConfig(ModelConfig):
    """Keys of ``sr.models.build_rlfn`` (``model=rlfn``)."""

    features: int = bounded(52, minimum=1, integer=True)  # channels between blocks
    # channels in a block's first two convolutions (null: features)
    mid_features: int | None = bounded(None, minimum=1, integer=True)
    blocks: int = bounded(6, minimum=1, integer=True)  # residual local feature blocks
    esa_channels: int = bounded(16, minimum=1, integer=True)  # channels of the attention (ESA)
    bicubic_skip: bool = False  # add the bicubic upscaling of the input to the output
    norm: str = bounded("centre", choices=NORMS)  # mean off the input, back on the output
    img_range: float = bounded(1.0, minimum=0, above=True)  # factor inside (official: 255)


@dataclass
class SPANConfig(ModelConfig):
    """Keys of ``sr.models.build_span`` (``model=span``)."""

    features: int = bounded(48, minimum=1, integer=True)  # channels of every block
    blocks: int = bounded(6, minimum=1, integer=True)  # parameter-free attention blocks
    bicubic_skip: bool = False  # add the bicubic upscaling of the input to the output
    img_range: float = bounded(255.0, minimum=0, above=True)  # factor on the centred input
    norm: str = bounded("centre", choices=NORMS)  # mean off the input (centre: back on output)
    fuse_silu: bool = False  # the fusion reads the last block's first conv after its SiLU


@dataclass
class RRDBNetConfig(ModelConfig):
    """Keys of ``sr.models.build_rrdbnet`` (``model=rrdbnet``)."""

    features: int = bounded(64, minimum=1, integer=True)  # channels of the trunk
    blocks: int = bounded(23, minimum=1, integer=True)  # residual-in-residual dense blocks
    growth: int = bounded(32, minimum=1, integer=True)  # channels each dense conv adds


@dataclass
class CompactConfig(ModelConfig):
    """Keys of ``sr.models.build_compact`` (``model=compact``)."""

    features: int = bounded(64, minimum=1, integer=True)  # channels of every body convolution
    convs: int = bounded(16, minimum=0, integer=True)  # 3x3 convolutions between first and last
    # after every convolution but the last (the released models: prelu)
    activation: str = bounded("prelu", choices=COMPACT_ACTIVATIONS)


# Each builder's schema, by its ``_target_``; registered as ``base_<name>`` in the model group.
SCHEMAS = {
    "sr.models.build_espcn": ESPCNConfig,
    "sr.models.build_espcn_mf": ESPCNMFConfig,
    "sr.models.build_edsr": EDSRConfig,
    "sr.models.build_rlfn": RLFNConfig,
    "sr.models.build_span": SPANConfig,
    "sr.models.build_rrdbnet": RRDBNetConfig,
    "sr.models.build_compact": CompactConfig,
}
