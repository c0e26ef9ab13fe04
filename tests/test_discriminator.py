"""Real-ESRGAN's U-Net discriminator: its output map, its size counted from the reference's layers,
and spectral normalisation (each kernel's largest singular value 1 after a training call, and the
power-iteration step Keras documents)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from sr.models.discriminator import build_unet_discriminator, top_singular_vector


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
    return [la for la in model.layers if isinstance(la, keras.layers.SpectralNormalization)]


def largest_singular_value(layer) -> float:
    """Of the layer's kernel reshaped to ``[k k C_in, C_out]``: the square root of the largest
    eigenvalue of ``W^T W`` (``C_out x C_out``, cheaper than the SVD of W)."""
    kernel = layer.layer.kernel.numpy().astype(np.float64)
    w = kernel.reshape(-1, kernel.shape[-1])
    return float(np.sqrt(np.linalg.eigvalsh(w.T @ w)[-1]))


@pytest.fixture(scope="module")
def discriminator():
    keras.utils.set_random_seed(0)
    return build_unet_discriminator(channels=3, features=64)


def test_parameters_are_the_references(discriminator):
    trainable = sum(int(np.prod(w.shape)) for w in discriminator.trainable_weights)
    assert trainable == unet_sn_params(3, 64) == 4_376_897
    # the non-trainable rest: one u of C_out per spectrally normalised conv
    u = sum(int(w.shape[-1]) for w in discriminator.non_trainable_weights)
    assert u == 64 * (2 + 4 + 8 + 4 + 2 + 1 + 1 + 1)
    assert len(spectral_layers(discriminator)) == 8


@pytest.mark.parametrize("channels, skip", [(3, True), (1, False)])
def test_a_logit_per_pixel(channels, skip):
    keras.utils.set_random_seed(0)
    model = build_unet_discriminator(channels=channels, features=8, skip_connection=skip)
    x = np.random.default_rng(0).random((2, 32, 40, channels), dtype=np.float32)
    out = model(x, training=False)
    assert tuple(out.shape) == (2, 32, 40, 1) and out.dtype == "float32"
    assert np.isfinite(out.numpy()).all() and out.numpy().std() > 0
    adds = sum(isinstance(la, keras.layers.Add) for la in model.layers)
    assert adds == (3 if skip else 0)


def test_spectral_norm_after_one_training_call(discriminator):
    """After one training call (one power-iteration step), every normalised kernel, reshaped to
    [k k C_in, C_out], has largest singular value 1 (within float32 rounding): the vector u starts
    at the top singular vector, so the step's sigma is the kernel's spectral norm. The
    unnormalised kernels (Glorot init) are above 1, and inference calls leave them unchanged."""
    layers = spectral_layers(discriminator)
    before = [largest_singular_value(la) for la in layers]
    x = np.random.default_rng(0).random((1, 16, 16, 3), dtype=np.float32)
    discriminator(x, training=False)
    assert [largest_singular_value(la) for la in layers] == before
    assert min(before) > 1.05
    discriminator(x, training=True)
    for layer, sigma in zip(layers, before):
        assert largest_singular_value(layer) == pytest.approx(1.0, abs=1e-4), (layer.name, sigma)


def test_spectral_norm_step_is_one_power_iteration():
    """A training call divides the kernel W by sigma = v W u^T, where v = normalise(u W^T) and
    u' = normalise(v W) is stored for the next call (Miyato et al. 2018, Algorithm 1): numpy on
    the layer's public weights before the call. After an update moves W, one step keeps the
    largest singular value within 1 % of 1."""
    keras.utils.set_random_seed(1)
    model = build_unet_discriminator(channels=3, features=8)
    layers = spectral_layers(model)
    rng = np.random.default_rng(0)
    for layer in layers:  # an optimizer's update: W moves away from its normalised value
        w = layer.layer.kernel
        w.assign(w.numpy() * (1 + 0.1 * rng.normal(size=w.shape)).astype(np.float32))
    state = [(la.layer.kernel.numpy(), la.non_trainable_weights[0].numpy()) for la in layers]
    model(rng.random((1, 16, 16, 3), dtype=np.float32), training=True)
    for layer, (kernel, u) in zip(layers, state):
        w = kernel.reshape(-1, kernel.shape[-1]).astype(np.float64)
        v = u @ w.T
        v /= np.linalg.norm(v)
        u_next = v @ w
        u_next /= np.linalg.norm(u_next)
        sigma = (v @ w @ u_next.T).item()
        np.testing.assert_allclose(layer.layer.kernel.numpy(), kernel / sigma, rtol=1e-4)
        np.testing.assert_allclose(layer.non_trainable_weights[0].numpy(), u_next, atol=1e-5)
        assert 1 - 1e-4 < largest_singular_value(layer) < 1.01


def test_top_singular_vector_is_the_svds():
    a = np.random.default_rng(0).normal(size=(300, 40))
    expected = np.linalg.svd(a)[2][0]
    got = top_singular_vector(a)
    assert abs(got @ expected) == pytest.approx(1.0, abs=1e-9)
