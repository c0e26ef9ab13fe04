"""Real-ESRGAN's U-Net discriminator: its output map, its size counted from the reference's layers,
PyTorch's init, and spectral normalisation converging to each kernel's largest singular value
(the layer itself: tests/test_spectral_norm.py)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from sr.models.discriminator import build_unet_discriminator
from sr.models.spectral_norm import SpectralNorm


def conv(k: int, c_in: int, c_out: int, bias: bool = True) -> int:
    return k * k * c_in * c_out + (c_out if bias else 0)


def unet_sn_params(c: int, f: int) -> int:
    """UNetDiscriminatorSN's parameters as PyTorch counts them (realesrgan/archs/
    discriminator_arch.py; spectral norm's u and v are buffers): conv0 and conv9 with bias, the
    three 4x4 downsampling convs, the three upsampling convs and two extra convs without."""
    down = conv(4, f, 2 * f, False) + conv(4, 2 * f, 4 * f, False) + conv(4, 4 * f, 8 * f, False)
    up = conv(3, 8 * f, 4 * f, False) + conv(3, 4 * f, 2 * f, False) + conv(3, 2 * f, f, False)
    return conv(3, c, f) + down + up + 2 * conv(3, f, f, False) + conv(3, f, 1)


def spectral_layers(model):
    return [la for la in model.layers if isinstance(la, SpectralNorm)]


@pytest.fixture(scope="module")
def discriminator():
    keras.utils.set_random_seed(0)
    return build_unet_discriminator(channels=3, features=64)


def test_parameters_are_the_references(discriminator):
    trainable = sum(int(np.prod(w.shape)) for w in discriminator.trainable_weights)
    assert trainable == unet_sn_params(3, 64) == 4_376_897
    # the non-trainable rest: PyTorch's buffers weight_u (C_out) and weight_v (k k C_in) of
    # each spectrally normalised conv
    layers = spectral_layers(discriminator)
    assert [la.name for la in layers] == [f"conv{i}" for i in range(1, 9)]
    for layer in layers:
        kernel = layer.layer.kernel
        assert tuple(layer.weight_u.shape) == (kernel.shape[-1],)
        assert tuple(layer.weight_v.shape) == (int(np.prod(kernel.shape[:-1])),)
    assert len(discriminator.non_trainable_weights) == 16


@pytest.mark.parametrize("channels, skip", [(3, True), (1, False)])
def test_a_logit_per_pixel(channels, skip):
    keras.utils.set_random_seed(0)
    model = build_unet_discriminator(channels=channels, features=8, skip_connection=skip)
    x = np.random.default_rng(0).random((2, 32, 40, channels), dtype=np.float32)
    out = model(x, training=True)
    assert tuple(out.shape) == (2, 32, 40, 1) and out.dtype == "float32"
    assert np.isfinite(out.numpy()).all() and out.numpy().std() > 0
    adds = sum(isinstance(la, keras.layers.Add) for la in model.layers)
    assert adds == (3 if skip else 0)


def test_pytorchs_init():
    """Kernels and biases uniform in +-1/sqrt(fan_in), as PyTorch's nn.Conv2d (the reference
    applies no init of its own)."""
    keras.utils.set_random_seed(0)
    model = build_unet_discriminator(channels=3, features=16)
    conv0 = model.get_layer("conv0")
    bound = (3 * 9) ** -0.5
    kernel, bias = conv0.get_weights()
    assert bound * 0.95 < np.abs(kernel).max() <= bound and np.abs(bias).max() <= bound
    kernel = model.get_layer("conv3").layer.kernel.numpy()  # 4x4, 4F = 64 -> 128
    assert np.abs(kernel).max() <= (64 * 16) ** -0.5
    assert kernel.std() == pytest.approx((64 * 16) ** -0.5 / np.sqrt(3), rel=0.05)


@pytest.mark.slow
def test_training_calls_converge_to_the_spectral_norm():
    """Each training call is one power iteration from the last: sigma = u^T W v rises towards
    the largest singular value of the kernel reshaped to [k k C_in, C_out] (never above it),
    within 5 % after 30 calls; the trained kernels W_orig are never overwritten."""
    keras.utils.set_random_seed(1)
    model = build_unet_discriminator(channels=3, features=8)
    layers = spectral_layers(model)
    before = [la.layer.kernel.numpy() for la in layers]
    x = np.random.default_rng(0).random((1, 16, 16, 3), dtype=np.float32)

    def sigmas():
        out = []
        for layer, kernel in zip(layers, before):
            w = kernel.reshape(-1, kernel.shape[-1]).astype(np.float64)
            out.append(float(layer.weight_u.numpy() @ (layer.weight_v.numpy() @ w)))
        return np.array(out)

    model(x, training=True)
    first = sigmas()
    for _ in range(29):
        model(x, training=True)
    last = sigmas()
    for layer, kernel, a, b in zip(layers, before, first, last):
        np.testing.assert_array_equal(layer.layer.kernel.numpy(), kernel)
        w = kernel.reshape(-1, kernel.shape[-1]).astype(np.float64)
        top = float(np.sqrt(np.linalg.eigvalsh(w.T @ w)[-1]))
        assert a < b <= top * (1 + 1e-5) and b > 0.95 * top, (layer.name, a, b, top)
