"""Layers shared by the SR builders."""

from __future__ import annotations

import keras
import tensorflow as tf


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


@keras.saving.register_keras_serializable(package="sr")
class UpSampling2D(keras.layers.UpSampling2D):
    """``keras.layers.UpSampling2D`` (channels last) that also runs in a ``tf.function`` on
    inputs of unknown height and width, as :class:`sr.inference.Upscaler` traces the model.

    Keras 3.15's ``ops.image.resize`` compares the output size with 0 in Python, which fails on
    a symbolic size (keras-team/keras PR #22079); this layer calls the same ``tf.image.resize``
    directly (half-pixel centres, no antialiasing; bicubic is Keys' cubic with a = -0.5), so its
    output is the Keras layer's: ``[B, h, w, C]`` to ``[B, s h, s w, C]``, float32 for every
    interpolation but nearest.
    """

    def call(self, x):
        if self.interpolation == "nearest" or self.data_format != "channels_last":
            return super().call(x)
        size = tf.shape(x)[1:3] * tf.constant(self.size, dtype=tf.int32)
        return tf.image.resize(x, size, method=self.interpolation)


def float32_output(x):
    """Cast the last activations to float32, so that a mixed-precision model returns float32."""
    return keras.layers.Activation("linear", dtype="float32", name="sr")(x)
