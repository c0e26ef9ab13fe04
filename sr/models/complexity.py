"""Model size and cost as the efficient-SR papers report them: parameters of the network as it is
deployed, and multiply-adds of its convolutions."""

from __future__ import annotations

import keras
import numpy as np


def parameters(model: keras.Model) -> int:
    """Parameters of ``model`` as deployed: every weight, except that a layer with a
    ``deployed_parameters()`` method (a conv trained over-parameterised and run as one 3x3 conv)
    counts what it deploys: the count the efficient-SR papers give."""
    total = 0
    for layer in _leaves(model):
        deployed = getattr(layer, "deployed_parameters", None)
        total += deployed() if callable(deployed) else layer.count_params()
    return int(total)


def _leaves(model):
    """The layers of a functional model, nested models expanded, without the input layers."""
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            yield from _leaves(layer)
        elif not isinstance(layer, keras.layers.InputLayer):
            yield layer


def _kernel_macs(layer) -> int | None:
    """Multiply-adds per output pixel of a convolution layer, None for any other layer."""
    deployed = getattr(layer, "deployed_parameters", None)
    if callable(deployed):  # a fused 3x3 conv: (parameters - bias) per output pixel
        return deployed() - int(layer.filters)
    if isinstance(layer, keras.layers.Conv2D):
        kh, kw, c_in, c_out = layer.kernel.shape
        groups = int(getattr(layer, "groups", 1) or 1)
        return int(kh * kw * c_in * c_out) // groups
    return None


def macs_per_output_megapixel(model: keras.Model, scale: int, size: int = 64) -> float:
    """Multiply-adds of the convolutions per megapixel of SR output, in G (10^9).

    Measured on an LR input of ``size`` x ``size`` pixels (the output is ``scale * size`` on each
    side): each convolution costs its kernel's multiply-adds (kh kw C_in C_out / groups) at each
    of its output pixels, so convolutions at reduced resolution (an attention's strided convs)
    cost less.
    Element-wise operations, pooling, resizing and the pixel shuffle are not counted, as in the
    papers' FLOP tables (which count a multiply-add as one, often called FLOPs there).

    Args:
        model: a single-image model ``[B, h, w, C] -> [B, s h, s w, C]``.
        scale: its factor s.
        size: the LR side used for the count (large enough for the model's pooling: 64).

    Returns:
        G multiply-adds per output megapixel (a 1024 x 1024 output from 256 x 256 LR costs
        about 1.05 times this).
    """
    convs = [layer for layer in _leaves(model) if _kernel_macs(layer) is not None]
    probe = keras.Model(model.inputs, [layer.output for layer in convs])
    channels = int(model.inputs[0].shape[-1])
    outputs = probe([np.zeros((1, size, size, channels), np.float32)], training=False)
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    macs = sum(
        _kernel_macs(layer) * int(out.shape[1]) * int(out.shape[2])
        for layer, out in zip(convs, outputs)
    )
    return macs / (scale * size) ** 2 / 1e3  # per output pixel / 1e3 = G per 10^6 pixels
