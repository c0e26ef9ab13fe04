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

Spectral normalisation is :class:`sr.models.spectral_norm.SpectralNorm`, PyTorch's
``spectral_norm``: the conv's kernel is ``weight_orig``, the trained variable; each call
convolves with ``weight_orig / sigma``, the gradient flowing through sigma; each training call
first runs one power iteration (``weight_u``, ``weight_v``: non-trainable, PyTorch's buffers,
not counted as parameters there either), and inference calls none. The layers are named as the
reference's attributes (``conv0`` .. ``conv9``), and initialised as PyTorch's ``nn.Conv2d``
(kernel and bias uniform in +-1/sqrt(fan_in); u and v normalised normal draws), since the
reference applies no init of its own. ``sr.models.state_dicts.unet_sn`` reads and writes the
reference's state dict.

Parameters with F = 64 on RGB: 4,376,897, as the reference (``tests/test_discriminator.py``).
"""

from __future__ import annotations

import keras

from sr.models.gan_schemas import DOWNSAMPLING  # noqa: F401  (re-exported)
from sr.models.layers import LeakyReLU, UpSampling2D, float32_output
from sr.models.spectral_norm import SpectralNorm

SLOPE = 0.2  # leaky ReLU's negative slope (reference)


def torch_conv(filters: int, kernel: int, fan_in: int, strides: int = 1, bias: bool = True,
               name: str | None = None) -> keras.layers.Conv2D:  # fmt: skip
    """A 'same'-padded conv initialised as PyTorch's ``nn.Conv2d`` (``kaiming_uniform_(a=
    sqrt(5))``: kernel and bias uniform in +-1/sqrt(fan_in), ``fan_in = C_in k^2``). For a 4x4
    stride-2 conv on an even size, 'same' pads one pixel each side, as the reference's
    ``padding=1``."""
    bound = fan_in**-0.5
    return keras.layers.Conv2D(
        filters, kernel, strides=strides, padding="same", use_bias=bias, name=name,
        kernel_initializer=keras.initializers.VarianceScaling(1 / 3, "fan_in", "uniform"),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
    )  # fmt: skip


def _sn_conv(filters: int, kernel: int, c_in: int, name: str, strides: int = 1) -> SpectralNorm:
    """A spectrally normalised conv without bias, named as the reference's attribute."""
    conv = torch_conv(filters, kernel, c_in * kernel * kernel, strides, bias=False)
    return SpectralNorm(conv, name=name)


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
    x0 = _act(torch_conv(f, 3, channels * 9, name="conv0")(image))
    x1 = _act(_sn_conv(2 * f, 4, f, "conv1", strides=2)(x0))
    x2 = _act(_sn_conv(4 * f, 4, 2 * f, "conv2", strides=2)(x1))
    x3 = _act(_sn_conv(8 * f, 4, 4 * f, "conv3", strides=2)(x2))
    x, c_in = x3, 8 * f
    for i, (skip, filters) in enumerate(((x2, 4 * f), (x1, 2 * f), (x0, f)), start=4):
        x = UpSampling2D(2, interpolation="bilinear")(x)
        x = _act(_sn_conv(filters, 3, c_in, f"conv{i}")(x))
        c_in = filters
        if skip_connection:
            x = keras.layers.Add()([x, skip])
    x = _act(_sn_conv(f, 3, f, "conv7")(x))
    x = _act(_sn_conv(f, 3, f, "conv8")(x))
    logits = torch_conv(1, 3, f * 9, name="conv9")(x)
    return keras.Model(image, float32_output(logits), name="unet_discriminator_sn")
