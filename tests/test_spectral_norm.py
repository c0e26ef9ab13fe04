"""Spectral normalisation with PyTorch's semantics (``sr.models.spectral_norm.SpectralNorm``):
one power iteration per training call in ``torch.nn.utils.spectral_norm``'s order, none in
inference, ``W_orig`` never overwritten, and the gradient on ``W_orig`` through sigma, checked
against the analytic formula written in NumPy; the GAN step runs three iterations, as
Real-ESRGAN's three discriminator calls."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from sr.core.batch import Batch
from sr.losses import Loss
from sr.models.discriminator import build_unet_discriminator
from sr.models.spectral_norm import SpectralNorm
from sr.train.gan import GANStep


def normalize(x):
    return x / max(np.linalg.norm(x), 1e-12)


def power_iteration(kernel, u):
    """PyTorch's order on the ``[n, C_out]`` matrix of a Keras kernel (float64):
    ``v = normalize(W^T u)``, ``u = normalize(W v)``, ``sigma = u^T W v``."""
    m = kernel.reshape(-1, kernel.shape[-1]).astype(np.float64)  # W^T
    v = normalize(m @ u)
    u = normalize(v @ m)
    return u, v, float(u @ (v @ m))


def sn_layer(seed=0, bias=True):
    keras.utils.set_random_seed(seed)
    layer = SpectralNorm(keras.layers.Conv2D(6, 3, padding="same", use_bias=bias))
    layer.build((None, 8, 8, 4))
    return layer


def test_one_training_call_is_one_power_iteration_inference_none():
    layer = sn_layer()
    x = np.random.default_rng(0).random((2, 8, 8, 4), np.float32)
    kernel = layer.layer.kernel.numpy()
    u0, v0 = layer.weight_u.numpy(), layer.weight_v.numpy()
    assert np.linalg.norm(u0) == pytest.approx(1, abs=1e-6)  # PyTorch's start: unit vectors
    assert u0.shape == (6,) and v0.shape == (3 * 3 * 4,)
    y = layer(x, training=False).numpy()
    np.testing.assert_array_equal(layer.weight_u.numpy(), u0)  # inference: no iteration
    sigma0 = float(u0 @ (v0 @ kernel.reshape(-1, 6)))
    plain = keras.layers.Conv2D(6, 3, padding="same")
    plain.build((None, 8, 8, 4))
    plain.set_weights([kernel / sigma0, layer.layer.bias.numpy()])
    np.testing.assert_allclose(y, plain(x).numpy(), rtol=1e-5, atol=1e-5)

    y = layer(x, training=True).numpy()
    u1, v1, sigma1 = power_iteration(kernel, u0)
    np.testing.assert_allclose(layer.weight_u.numpy(), u1, atol=1e-6)
    np.testing.assert_allclose(layer.weight_v.numpy(), v1, atol=1e-6)
    np.testing.assert_array_equal(layer.layer.kernel.numpy(), kernel)  # W_orig kept
    plain.set_weights([kernel / sigma1, layer.layer.bias.numpy()])
    np.testing.assert_allclose(y, plain(x).numpy(), rtol=1e-5, atol=1e-5)


def test_the_gradient_on_weight_orig_flows_through_sigma():
    """``dL/dW_orig = G / sigma - <G, W_orig> / sigma^2 u v^T`` with G = dL/dW at
    W = W_orig / sigma (u, v after the call's iteration, held constant): PyTorch's gradient.
    Keras's SpectralNormalization would give G (no term through sigma)."""
    layer = sn_layer(1, bias=False)
    rng = np.random.default_rng(1)
    x = rng.random((2, 8, 8, 4), np.float32)
    r = rng.normal(size=(2, 8, 8, 6)).astype(np.float32)
    kernel, u0 = layer.layer.kernel.numpy(), layer.weight_u.numpy()
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(x, training=True) * r) + tf.reduce_sum(
            tf.square(layer(x, training=False))
        )  # two calls: the second uses the first's u, v, with no iteration
    got = tape.gradient(loss, layer.layer.kernel).numpy()

    u, v, sigma = power_iteration(kernel, u0)
    w = tf.Variable(kernel / sigma)
    with tf.GradientTape() as tape:
        y = tf.nn.conv2d(x, w, 1, "SAME")
        plain = tf.reduce_sum(y * r) + tf.reduce_sum(tf.square(y))
    g = tape.gradient(plain, w).numpy().astype(np.float64)
    outer = np.outer(v, u).reshape(kernel.shape)  # u v^T in the kernel's layout
    want = g / sigma - (g * kernel).sum() / sigma**2 * outer
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * np.abs(want).max())
    assert np.abs(g / sigma - want).max() > 1e-3 * np.abs(want).max()  # the sigma term counts


@pytest.mark.slow  # a GANStep traced: about 5 to 9 s
def test_a_gan_step_runs_three_power_iterations():
    """Real-ESRGAN's update calls the discriminator three times (D(SR) for the generator, then
    D(HR) and D(SR) for itself), each in training mode: after one step, each u is three
    iterations from its start on the weights before the update."""
    keras.utils.set_random_seed(2)
    lr_in = keras.Input((None, None, 3))
    g = keras.Model(
        lr_in, keras.layers.UpSampling2D(2)(keras.layers.Conv2D(3, 3, padding="same")(lr_in))
    )
    d = build_unet_discriminator(3, features=4)
    layers = [la for la in d.layers if isinstance(la, SpectralNorm)]
    start = [(la.layer.kernel.numpy(), la.weight_u.numpy()) for la in layers]
    g_opt, d_opt = keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3)
    g_opt.build(g.trainable_variables), d_opt.build(d.trainable_variables)
    counters = tuple(tf.Variable(v, dtype=tf.int64) for v in (0, -1, 0))
    step = GANStep(g, g_opt, Loss({"l1": {}, "gan": {}}), tf.distribute.get_strategy(),
                   2, counters, discriminator=d, d_optimizer=d_opt)  # fmt: skip
    rng = np.random.default_rng(2)
    step.train_step(
        Batch(lq=rng.random((2, 8, 8, 3), np.float32), gt=rng.random((2, 16, 16, 3), np.float32))
    )
    for layer, (kernel, u) in zip(layers, start):
        for _ in range(3):
            u, v, _ = power_iteration(kernel, u)
        np.testing.assert_allclose(layer.weight_u.numpy(), u, atol=1e-5, err_msg=layer.name)
        assert not np.array_equal(layer.layer.kernel.numpy(), kernel)  # then W_orig is updated


def test_only_a_conv_is_wrapped():
    with pytest.raises(ValueError, match="wraps a keras.layers.Conv2D"):
        SpectralNorm(keras.layers.Dense(3))
