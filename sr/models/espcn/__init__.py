"""ESPCN (Shi et al., "Real-Time Single Image and Video Super-Resolution Using an Efficient
Sub-Pixel Convolutional Neural Network", CVPR 2016): the architecture's schema and registration;
the network is :mod:`sr.models.espcn.net`. ``conf/model/espcn.yaml`` is the default model."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register

KERAS_ACTIVATIONS = tuple(
    "celu elu exponential gelu glu hard_shrink hard_sigmoid hard_silu hard_swish hard_tanh "
    "leaky_relu linear log_sigmoid log_softmax mish relu relu6 selu sigmoid silu soft_shrink "
    "softmax softplus softsign sparse_plus sparse_sigmoid sparsemax squareplus swish tanh "
    "tanh_shrink threshold".split()
)
"""The names ``keras.activations.get`` takes (Keras 3.15: the functions of ``keras.activations``),
written out so that the config is checked without importing Keras (tests/test_train_refusals.py
compares them with the installed Keras's)."""


def keras_activation(name) -> str | None:
    """Why ``name`` is not a Keras activation (:data:`KERAS_ACTIVATIONS`), or None."""
    if isinstance(name, str) and name in KERAS_ACTIVATIONS:
        return None
    return "must name a Keras activation (tanh, relu, ...)"


def two_widths(default):
    """The field of the filters of ESPCN's first two convolutions."""
    return bounded(default, minimum=1, integer=True, length=2)


@dataclass
class ESPCNConfig(ModelConfig):
    """Keys of ``model=espcn``."""

    features: list[int] = two_widths([64, 32])  # filters of the first two convolutions
    activation: str = bounded("tanh", check=keras_activation)  # between convolutions (Keras)


SPEC = register(
    ModelSpec(
        "espcn",
        ESPCNConfig,
        build="sr.models.espcn.net:build_espcn",
        legacy_targets=("sr.models.build_espcn",),
    )
)
