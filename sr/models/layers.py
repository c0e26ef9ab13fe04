"""Layers shared by the SR builders."""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="sr")
class PixelShuffle(keras.layers.Layer):
    """Sub-pixel convolution's rearrangement (Shi et al., CVPR 2016): ``[B, h, w, r^2 C]`` to
    ``[B, r h, r w, C]`` (``depth_to_space`` with block size r)."""

    def __init__(self, factor: int, **kwargs):
        super().__init__(**kwargs)
        self.factor = int(factor)

    def call(self, x):
        return keras.ops.depth_to_space(x, self.factor, data_format="channels_last")

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


def float32_output(x):
    """Cast the last activations to float32, so that a mixed-precision model returns float32."""
    return keras.layers.Activation("linear", dtype="float32", name="sr")(x)
