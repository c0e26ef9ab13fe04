"""Spectral normalisation with PyTorch's semantics: T. Miyato, T. Kataoka, M. Koyama and
Y. Yoshida, "Spectral Normalization for Generative Adversarial Networks", ICLR 2018, as
``torch.nn.utils.spectral_norm`` computes it (``torch/nn/utils/spectral_norm.py``,
``SpectralNorm.compute_weight``), which Real-ESRGAN's discriminator uses.

The wrapped convolution's kernel is PyTorch's ``weight_orig``: the trained variable, never
overwritten. Every call computes the kernel it convolves with, ``W = W_orig / sigma``, from it:

- W_orig reshaped to a matrix ``[n, C_out]`` (``n = kh kw C_in``): the transpose of PyTorch's
  ``weight_orig.reshape(C_out, -1)`` with its columns in Keras's ``(kh, kw, C_in)`` order instead
  of PyTorch's ``(C_in, kh, kw)``, so ``v`` is permuted alike (``sr.models.state_dicts.unet_sn``
  converts it);
- in training mode, one power iteration first, without gradient:
  ``v = normalize(W^T u)``, ``u = normalize(W v)`` (``normalize(x) = x / max(||x||, 1e-12)``),
  stored in the non-trainable ``weight_u`` ``[C_out]`` and ``weight_v`` ``[n]`` (PyTorch's
  buffers); in inference mode, none;
- ``sigma = u^T W v``, with ``u`` and ``v`` constants: the gradient flows to ``W_orig`` through
  ``W_orig / sigma`` and through ``sigma`` (``d sigma / d W_orig = u v^T``), so
  ``dL/dW_orig = G / sigma - <G, W_orig> / sigma^2 u v^T`` for ``G = dL/dW``.

``u`` and ``v`` start as PyTorch's: normalised draws of N(0, 1). Unlike
``keras.layers.SpectralNormalization``, which overwrites the kernel with ``W / sigma`` at each
training call and passes no gradient through sigma.
"""

from __future__ import annotations

import keras
from keras import ops

EPS = 1e-12  # PyTorch's spectral_norm eps: the smallest norm a vector is divided by


def normalize(x, eps: float = EPS):
    """``x / max(||x||_2, eps)`` of a vector (PyTorch's ``F.normalize(x, dim=0, eps=eps)``)."""
    return x / ops.maximum(ops.sqrt(ops.sum(ops.square(x))), eps)


def unit_normal(shape, dtype=None):
    """A draw of N(0, 1) of ``shape`` (a vector), normalised to length 1: PyTorch's start of
    ``weight_u`` and ``weight_v``."""
    return normalize(keras.random.normal(shape, dtype=dtype or "float32"))


@keras.saving.register_keras_serializable(package="sr")
class SpectralNorm(keras.layers.Wrapper):
    """A convolution whose kernel is divided by its largest singular value, estimated by one
    power iteration per training call (PyTorch's ``spectral_norm(conv)``; see the module).

    Args:
        layer: a ``keras.layers.Conv2D`` (any padding, strides, bias and activation): its
            ``kernel`` is PyTorch's ``weight_orig``.
        eps: the smallest norm the power iteration divides by (PyTorch's 1e-12).

    Call: input float ``[B, H, W, C_in]``, ``training`` True to run the power iteration (and
    update ``weight_u``, ``weight_v``); output the convolution's, with ``W_orig / sigma``.

    Raises:
        ValueError: ``layer`` is not a ``Conv2D``.
    """

    def __init__(self, layer, eps: float = EPS, **kwargs):
        if not isinstance(layer, keras.layers.Conv2D):
            raise ValueError(f"SpectralNorm wraps a keras.layers.Conv2D, got {layer!r}")
        super().__init__(layer, **kwargs)
        self.eps = float(eps)

    def build(self, input_shape):
        super().build(input_shape)
        kernel = self.layer.kernel
        n = 1
        for d in kernel.shape[:-1]:
            n *= int(d)
        # autocast=False: under a mixed policy (train.precision) u and v are read in float32
        self.weight_u = self.add_weight(
            shape=(int(kernel.shape[-1]),), initializer=unit_normal, trainable=False,
            name="weight_u", autocast=False,
        )  # fmt: skip
        self.weight_v = self.add_weight(
            shape=(n,), initializer=unit_normal, trainable=False, name="weight_v", autocast=False
        )

    def call(self, inputs, training=None):
        # W_orig [kh, kw, C_in, C_out], as the policy reads it (rounded to bfloat16 or float16
        # under a mixed policy), then the power iteration and sigma in float32
        w = ops.cast(self.layer.kernel, "float32")
        matrix = ops.reshape(w, (-1, ops.shape(w)[-1]))  # [n, C_out]: W^T
        u, v = ops.convert_to_tensor(self.weight_u), ops.convert_to_tensor(self.weight_v)
        if training:
            frozen = ops.stop_gradient(matrix)
            v = normalize(ops.matmul(frozen, u), self.eps)  # W^T u
            u = normalize(ops.matmul(v, frozen), self.eps)  # W v
            self.weight_v.assign(v)
            self.weight_u.assign(u)
        sigma = ops.sum(u * ops.matmul(v, matrix))  # u^T W v, gradient through W only
        kernel = ops.cast(w / sigma, inputs.dtype)
        outputs = self.layer.convolution_op(inputs, kernel)
        if self.layer.use_bias:
            outputs = ops.add(outputs, ops.cast(self.layer.bias, outputs.dtype))
        if self.layer.activation is not None:
            outputs = self.layer.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape):
        return self.layer.compute_output_shape(input_shape)

    def get_config(self):
        return {**super().get_config(), "eps": self.eps}
