"""The U-Net discriminator with spectral normalisation of Real-ESRGAN: X. Wang, L. Xie, C. Dong and
Y. Shan, "Real-ESRGAN: Training Real-World Blind Super-Resolution with Pure Synthetic Data", ICCV
Workshops 2021, Sec. 3.3. Reference code: github.com/xinntao/Real-ESRGAN
(``realesrgan/archs/discriminator_arch.py``, ``UNetDiscriminatorSN``).

A 3x3 conv (F features), three 4x4 stride-2 convs down (2F, 4F, 8F), three steps up (bilinear x2,
3x3 conv: 4F, 2F, F), each added to the encoder's features of its size (the skip connections),
two 3x3 convs and a 3x3 conv to one channel: a real/fake logit for every pixel. Leaky ReLU 0.2
after every conv but the last. Every conv but the first and the last is spectrally normalised
(Miyato et al., "Spectral Normalization for Generative Adversarial Networks", ICLR 2018) and has
no bias, as the reference.

Spectral normalisation is ``keras.layers.SpectralNormalization`` (one power iteration per
training call, as PyTorch's ``spectral_norm``). It differs from PyTorch's in one way: Keras
overwrites the wrapped conv's kernel with ``W / sigma`` at each training call, and the gradient
then treats that kernel as the weight (PyTorch keeps ``W`` and differentiates through
``W / sigma``). Inference calls use the kernel as last normalised. The power iteration's vector
``u`` is a non-trainable weight (a buffer in PyTorch, not counted as a parameter there either).
Where PyTorch starts ``u`` at random, so that the first steps' sigma is underestimated (by 20 to
30 % for these kernels at initialisation: their kernels are then 1.2 to 1.3 times too large),
:func:`build_unet_discriminator` starts it at each kernel's top right-singular vector (found at
build): the first training call's sigma is then the kernel's spectral norm, and each later call
refines ``u`` by one power iteration from the last, as PyTorch.

Parameters with F = 64 on RGB: 4,376,897, as the reference (``tests/test_discriminator.py``).
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.layers import LeakyReLU, UpSampling2D, float32_output

SLOPE = 0.2  # leaky ReLU's negative slope (reference)
DOWNSAMPLING = 8  # the three stride-2 convs: H and W must be multiples of this


def _sn_conv(filters: int, kernel: int, strides: int = 1):
    """A spectrally normalised conv without bias, 'same' padding (for a 4x4 stride-2 conv on an
    even size: one pixel each side, as the reference's ``padding=1``)."""
    conv = keras.layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False)
    return keras.layers.SpectralNormalization(conv, power_iterations=1)


def top_singular_vector(matrix: np.ndarray, squarings: int = 10) -> np.ndarray:
    """Unit top right-singular vector ``[n]`` of ``matrix`` ``[m, n]`` (float64): the power
    method on ``M = A^T A`` by repeated squaring (``M^(2^squarings)``, renormalised each time,
    whose columns all lie along that vector: a thousand power iterations for ten ``n x n``
    products, much cheaper than an SVD of the largest kernels here)."""
    m = matrix.T.astype(np.float64) @ matrix.astype(np.float64)
    for _ in range(squarings):
        m = m @ m
        m /= np.abs(m).max()
    column = m[:, np.argmax(np.linalg.norm(m, axis=0))]
    return column / np.linalg.norm(column)


def start_power_iteration(layer: keras.layers.SpectralNormalization) -> None:
    """Set the power iteration's vector ``u`` (``[1, C_out]``) of a built spectral-norm layer to
    the top right-singular vector of its kernel reshaped to ``[k k C_in, C_out]``, so that its
    next training call divides the kernel by its spectral norm."""
    kernel = keras.ops.convert_to_numpy(layer.layer.kernel)
    top = top_singular_vector(kernel.reshape(-1, kernel.shape[-1]))
    (u,) = layer.non_trainable_weights
    u.assign(top.reshape(u.shape).astype(u.dtype))


def _act(x):
    return LeakyReLU(SLOPE)(x)


def build_unet_discriminator(
    channels: int = 3, features: int = 64, skip_connection: bool = True
) -> keras.Model:
    """Build Real-ESRGAN's ``UNetDiscriminatorSN``.

    Args:
        channels: image channels C (3 for RGB, 1 for Y).
        features: F, the channels of the first conv (reference: 64); the encoder has 2F, 4F, 8F.
        skip_connection: add the encoder's features to the decoder's at each size (reference:
            True).

    Returns:
        Keras model: input float ``[B, H, W, C]``, an image in [0, 1] (SR or HR), H and W
        multiples of 8; output float32 ``[B, H, W, 1]``, a logit per pixel (real > 0 > fake
        for a sigmoid cross-entropy GAN loss). Call it with ``training=True`` in the
        discriminator's and the generator's steps to run the power iteration.

    Raises:
        ValueError: for fewer than one channel or feature.
    """
    if channels < 1 or features < 1:
        raise ValueError(f"channels and features must be >= 1, got {channels} and {features}")
    f = features
    image = keras.Input(shape=(None, None, channels), name="image")
    x0 = _act(keras.layers.Conv2D(f, 3, padding="same")(image))
    x1 = _act(_sn_conv(2 * f, 4, strides=2)(x0))
    x2 = _act(_sn_conv(4 * f, 4, strides=2)(x1))
    x3 = _act(_sn_conv(8 * f, 4, strides=2)(x2))
    x = x3
    for skip, filters in ((x2, 4 * f), (x1, 2 * f), (x0, f)):
        x = UpSampling2D(2, interpolation="bilinear")(x)
        x = _act(_sn_conv(filters, 3)(x))
        if skip_connection:
            x = keras.layers.Add()([x, skip])
    x = _act(_sn_conv(f, 3)(x))
    x = _act(_sn_conv(f, 3)(x))
    logits = keras.layers.Conv2D(1, 3, padding="same")(x)
    model = keras.Model(image, float32_output(logits), name="unet_discriminator_sn")
    for layer in model.layers:
        if isinstance(layer, keras.layers.SpectralNormalization):
            start_power_iteration(layer)
    return model
