"""Layers shared by the SR builders. The bicubic kernel is the LR operator's
(``sr.core.degrade.keys_cubic``)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from sr.core.degrade import keys_cubic
from sr.models.norms import NORMS  # noqa: F401  (the choices of input_mean)


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
class LeakyReLU(keras.layers.LeakyReLU):
    """``max(x, a x)``: ``keras.layers.LeakyReLU`` (same config, values and gradients) for
    0 < a < 1, per pixel (the tiler reads it as such).

    TensorFlow 2.21's graph optimizer (grappler's remapper) fails on the gradient of
    ``LeakyRelu`` after a convolution with a bias ("remapper failed: ... Mutation::Apply error"
    logged at every trace) and then drops its other fusions of the graph; ``maximum`` is fused
    normally and gives the same values and gradients (``tests/test_efficient_models.py``).
    """

    def call(self, x):
        return keras.ops.maximum(x, self.negative_slope * x)


def upscale_taps(factor: int) -> np.ndarray:
    """The taps of an integer bicubic upscaling along one axis with half-pixel centres: float64
    ``[5, factor]``, column r the weights of input pixels k - 2 .. k + 2 for output pixel
    ``factor k + r`` (which sits at input coordinate ``k + (2 r + 1 - factor) / (2 factor)``)."""
    taps = np.zeros((5, factor))
    for r in range(factor):
        d = (2 * r + 1 - factor) / (2 * factor)
        taps[:, r] = keys_cubic(np.arange(-2, 3) - d)
    return taps


def bicubic_upscale_graph(x: tf.Tensor, factor: int) -> tf.Tensor:
    """``tf.image.resize(x, factor * size, "bicubic")`` from ops that XLA compiles.

    ``ResizeBicubic`` has no XLA kernel, so a model that contains it cannot be trained with
    ``train.xla=true`` on any device. This computes the same separable resampling (half-pixel
    centres, Keys' a = -0.5; the kernel's taps outside the image are dropped and the rest
    renormalised, as ``ResizeBicubic`` does) as two 5-tap convolutions, one output channel per
    phase, whose phases are then interleaved; the renormalisation divides by the same
    convolutions of an all-ones image. Equal to ``tf.image.resize`` within float32 rounding
    (``tests/test_models.py``).

    Args:
        x: float ``[B, h, w, C]``, any h, w >= 1 (dynamic sizes allowed).
        factor: integer scale s >= 1.

    Returns:
        ``[B, s h, s w, C]``, of ``x``'s dtype.
    """
    s = int(factor)
    taps = tf.constant(upscale_taps(s), x.dtype)  # [5, s]
    shape = tf.shape(x)
    b, h, w, c = shape[0], shape[1], shape[2], shape[3]
    planes = tf.reshape(tf.transpose(x, [0, 3, 1, 2]), [-1, h, w, 1])  # [B C, h, w, 1]

    def along_rows(t, n):  # [N, n, m, 1] -> [N, s n, m, 1], renormalised at the borders
        kernel = tf.reshape(taps, [5, 1, 1, s])
        out = tf.nn.conv2d(t, kernel, 1, padding=[[0, 0], [2, 2], [0, 0], [0, 0]])
        ones = tf.ones([1, n, 1, 1], x.dtype)
        norm = tf.nn.conv2d(ones, kernel, 1, padding=[[0, 0], [2, 2], [0, 0], [0, 0]])
        out = out / norm  # [N, n, m, s]
        m = tf.shape(t)[2]
        return tf.reshape(tf.transpose(out, [0, 1, 3, 2]), [-1, s * n, m, 1])

    def transpose(t):
        return tf.transpose(t, [0, 2, 1, 3])

    up = transpose(along_rows(transpose(along_rows(planes, h)), w))  # [B C, s h, s w, 1]
    return tf.transpose(tf.reshape(up, [b, c, s * h, s * w]), [0, 2, 3, 1])


@keras.saving.register_keras_serializable(package="sr")
class UpSampling2D(keras.layers.UpSampling2D):
    """``keras.layers.UpSampling2D`` (channels last) that also runs in a ``tf.function`` on
    inputs of unknown height and width, as :class:`sr.inference.Upscaler` traces the model, and
    compiles under XLA.

    Keras 3.15's ``ops.image.resize`` compares the output size with 0 in Python, which fails on
    a symbolic size (keras-team/keras PR #22079); this layer calls the same ``tf.image.resize``
    directly (half-pixel centres, no antialiasing; bicubic is Keys' cubic with a = -0.5), so its
    output is the Keras layer's: ``[B, h, w, C]`` to ``[B, s h, s w, C]``, float32 for every
    interpolation but nearest. Bicubic with equal integer factors is computed by
    :func:`bicubic_upscale_graph` (``ResizeBicubic`` has no XLA kernel). Nearest with equal
    integer factors s is ``depth_to_space`` of s^2 copies of the channels (the same values):
    Keras's ``repeat`` loses the static shape, and a TFLite converter then fails on the next
    convolution ("'tf.Conv2D' op is neither a custom op nor a flex op": a nearest x2 upsampler).
    """

    def call(self, x):
        fy, fx = self.size
        if self.interpolation == "nearest" and self.data_format == "channels_last":
            if fy == fx and int(fy) == fy:
                s = int(fy)
                return tf.nn.depth_to_space(tf.tile(x, [1, 1, 1, s * s]), s)
        if self.interpolation == "nearest" or self.data_format != "channels_last":
            return super().call(x)
        if self.interpolation == "bicubic" and fy == fx and int(fy) == fy:
            return bicubic_upscale_graph(tf.cast(x, tf.float32), int(fy))
        size = tf.shape(x)[1:3] * tf.constant(self.size, dtype=tf.int32)
        return tf.image.resize(x, size, method=self.interpolation)


DIV2K_RGB_MEAN = (0.4488, 0.4371, 0.4040)
"""The mean of DIV2K's training images per RGB channel, on [0, 1]: what BasicSR's EDSR
(``basicsr/archs/edsr_arch.py``, ``rgb_mean``) and SPAN's official code
(hongyuanyu/SPAN, ``basicsr/archs/span_arch.py``) subtract from the input."""


def input_mean(norm: str, channels: int) -> tuple[float, ...]:
    """The per-channel mean that ``norm`` (one of :data:`NORMS`) subtracts from a
    ``channels``-channel input in [0, 1].

    The config's check refuses an unknown ``norm`` and ``div2k_mean`` on other than 3 channels
    (``sr.models.norms.norm_rule``) before any model is built.
    """
    value = {"centre": (0.5,), "div2k_mean": DIV2K_RGB_MEAN, "none": (0.0,)}[norm]
    return value if len(value) == channels else value * channels


def normalized(lr, mean: tuple[float, ...], img_range: float):
    """``(lr - mean) * img_range``, one ``Rescaling`` layer (``mean`` per channel, as
    :func:`input_mean` gives it); the input unchanged for a zero mean and a range of 1."""
    if not any(mean) and img_range == 1.0:
        return lr
    offset = -mean[0] * img_range if len(set(mean)) == 1 else [-m * img_range for m in mean]
    return keras.layers.Rescaling(img_range, offset=offset)(lr)


def denormalized(y, mean: tuple[float, ...], img_range: float):
    """``y / img_range + mean``, the inverse of :func:`normalized` on a network's output, one
    ``Rescaling`` layer; ``y`` unchanged for a zero mean and a range of 1."""
    if not any(mean) and img_range == 1.0:
        return y
    offset = mean[0] if len(set(mean)) == 1 else list(mean)
    return keras.layers.Rescaling(1.0 / img_range, offset=offset)(y)


def float32_output(x):
    """Cast the last activations to float32, so that a mixed-precision model returns float32."""
    return keras.layers.Activation("linear", dtype="float32", name="sr")(x)


def deployed(model: keras.Model) -> keras.Model:
    """The model as deployed: a copy of ``model`` in which every layer with a ``deployed()``
    method (a layer trained in one form and run in another: SPAN's ``Conv3XC``, an
    over-parameterised conv run as one 3x3 conv, the paper's re-parameterisation) is the layer it
    returns, with its weights; other layers keep theirs. The copy computes the same function
    (within float32 rounding) with the parameters of ``sr.models.complexity.parameters``, and
    converters (TFLite, ONNX) see plain layers. A model without such layers is returned as is.

    Args:
        model: a functional Keras model.

    Returns:
        A functional Keras model of the same inputs and outputs.
    """
    forms = {
        id(la): la.deployed() for la in model.layers if callable(getattr(la, "deployed", None))
    }
    if not forms:
        return model

    def clone(layer):
        if id(layer) in forms:
            return forms[id(layer)][0]
        return layer.__class__.from_config(layer.get_config())

    copy = keras.models.clone_model(model, clone_function=clone)
    for old, new in zip(model.layers, copy.layers):
        new.set_weights(forms[id(old)][1] if id(old) in forms else old.get_weights())
    return copy


@keras.saving.register_keras_serializable(package="sr")
class ResizeLike(keras.layers.Layer):
    """Bilinear resize (half-pixel centres, PyTorch's ``align_corners=False``) of ``x`` to the
    height and width of ``like``: ``([B, h, w, C], [B, H, W, D]) -> [B, H, W, C]``."""

    def call(self, x, like):
        return tf.image.resize(x, tf.shape(like)[1:3], method="bilinear")
