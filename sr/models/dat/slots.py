"""The slots (``sr.models.state_dicts.pairs.Slot``) of a model whose weight-bearing layers are
named by their PyTorch prefix (``layers.0.blocks.1.attn.qkv``), as the DAT and OmniSR builders
name them: each Keras layer's variables are paired with the reference keys by the layer's type,
so that a layout lists no layer by hand.

A layer holding sublayers (:class:`sr.models.dat.net.DATBlock`, OmniSR's blocks) exposes them
as ``parts`` (reference suffix -> layer, under its own name as prefix) and its own variables by
``torch_tensors()`` (suffix -> variable, the same in both layouts).
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import StateDictError

Slot = pairs.Slot


def _same(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a), dtype=np.float32)


def _slot(key: str, variable, shape, to_keras, to_torch) -> Slot:
    return Slot(key, variable, tuple(int(d) for d in shape), to_keras, to_torch)


def plain(key: str, variable) -> Slot:
    """A tensor of the same shape in both (norms, biases, temperatures, embeddings)."""
    return _slot(key, variable, variable.shape, _same, _same)


def dense(key: str, variable) -> Slot:
    """A Keras ``Dense`` kernel ``[in, out]`` as PyTorch's ``Linear.weight`` ``[out, in]``."""
    c_in, c_out = (int(d) for d in variable.shape)
    return _slot(key, variable, (c_out, c_in), lambda w: _same(np.asarray(w).T),
                 lambda k: _same(np.asarray(k).T))  # fmt: skip


def depthwise(key: str, variable) -> Slot:
    """A Keras depthwise kernel ``[kh, kw, C, 1]`` as PyTorch's grouped ``Conv2d.weight``
    ``[C, 1, kh, kw]``."""
    kh, kw, c, m = (int(d) for d in variable.shape)
    return _slot(key, variable, (c * m, 1, kh, kw),
                 lambda w: _same(np.transpose(np.asarray(w), (2, 3, 0, 1))),
                 lambda k: _same(np.transpose(np.asarray(k), (2, 3, 0, 1))))  # fmt: skip


def layer_slots(prefix: str, layer) -> list[Slot]:
    """The slots of one Keras layer as the PyTorch module at ``prefix``.

    Raises:
        StateDictError: for a layer type without a PyTorch counterpart here.
    """
    if isinstance(layer, keras.layers.DepthwiseConv2D):
        slots = [depthwise(f"{prefix}.weight", layer.kernel)]
    elif isinstance(layer, keras.layers.Conv2D):
        slots = [pairs.kernel(f"{prefix}.weight", layer.kernel)]
    elif isinstance(layer, keras.layers.Dense):
        slots = [dense(f"{prefix}.weight", layer.kernel)]
    elif isinstance(layer, keras.layers.LayerNormalization):
        return [plain(f"{prefix}.weight", layer.gamma), plain(f"{prefix}.bias", layer.beta)]
    elif isinstance(layer, keras.layers.BatchNormalization):
        names = ("weight", "bias", "running_mean", "running_var")
        tensors = (layer.gamma, layer.beta, layer.moving_mean, layer.moving_variance)
        return [plain(f"{prefix}.{n}", t) for n, t in zip(names, tensors)]
    elif isinstance(layer, keras.layers.Embedding):
        return [plain(f"{prefix}.weight", layer.embeddings)]
    else:
        raise StateDictError(f"no PyTorch layout for the Keras layer {prefix} ({type(layer)})")
    if layer.use_bias:
        slots.append(pairs.bias(f"{prefix}.bias", layer.bias))
    return slots


def model_slots(model: keras.Model, shuffles: dict[str, tuple[int, int]]) -> list[Slot]:
    """Every slot of ``model``, in the builder's order: layers with ``parts`` by their parts
    and ``torch_tensors()``, other layers with weights by their name. A conv named in
    ``shuffles`` (prefix -> ``(channels, factor)``) feeds a pixel shuffle: its output channels
    are reordered between the layouts (``pairs.shuffled``)."""
    slots = []
    for layer in model.layers:
        if hasattr(layer, "parts"):
            for suffix, part in layer.parts.items():
                slots += layer_slots(f"{layer.name}.{suffix}", part)
            for suffix, variable in layer.torch_tensors().items():
                slots.append(plain(f"{layer.name}.{suffix}", variable))
        elif layer.weights:
            own = layer_slots(layer.name, layer)
            if layer.name in shuffles:
                own = pairs.shuffled(own, *shuffles[layer.name])
            slots += own
    return slots


def parameters(slots: list[Slot], buffers=("running_mean", "running_var")) -> int:
    """Trainable parameters among ``slots`` (PyTorch's count: BatchNorm statistics are
    buffers)."""
    return sum(int(np.prod(s.shape)) for s in slots if not s.key.endswith(buffers))
