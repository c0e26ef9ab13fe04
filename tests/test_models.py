"""sr.models: the builders' sizes, any-size inputs, the pixel-shuffle arrangement, the
upsampling layer of the bicubic skip, errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from sr.core.degrade import keys_cubic
from sr.inference import receptive_radius
from sr.models.layers import PixelShuffle, UpSampling2D, bicubic_upscale_graph
from sr.models.registry import make_model


@pytest.mark.parametrize("arch", ["espcn", "edsr"])
@pytest.mark.parametrize("h, w", [(24, 24), (17, 23)])
def test_any_size_in_4x_out(arch, h, w):
    model = make_model(arch, scale=4)
    out = model(np.random.default_rng(0).random((2, h, w, 1), dtype=np.float32))
    assert out.shape == (2, 4 * h, 4 * w, 1) and out.dtype == "float32"


def test_sizes_match_the_papers():
    # ESPCN (Shi 2016): 5x5x64, 3x3x32, 3x3x16 on one channel
    convs = (25 * 64 + 64) + (9 * 64 * 32 + 32) + (9 * 32 * 16 + 16)
    assert make_model("espcn").count_params() == convs
    # EDSR baseline (Lim 2017, build_edsr's defaults): the paper's RGB model has 1.5 M parameters
    # (the exact count of the architecture is in tests/test_recipes.py)
    assert 1.51e6 < make_model("edsr", channels=3).count_params() < 1.52e6


@pytest.mark.parametrize("scale", [2, 3])
def test_espcn_output_is_a_pixel_shuffle_of_the_last_convolution(scale):
    model = make_model("espcn", scale=scale, features=(4, 4))
    x = np.random.default_rng(1).random((1, 5, 6, 1), dtype=np.float32)
    conv = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)][-1]
    (shuffle,) = [layer for layer in model.layers if isinstance(layer, PixelShuffle)]
    assert shuffle.input is conv.output  # the shuffle rearranges the last convolution's output

    feats = keras.Model(model.input, conv.output)(x).numpy()  # [1, 5, 6, r^2]
    out = model(x).numpy()  # [1, 5 r, 6 r, 1]
    assert feats.shape == (1, 5, 6, scale**2) and out.shape == (1, 5 * scale, 6 * scale, 1)
    # depth_to_space: out[r i + a, r j + b] = feats[i, j, r a + b]
    for a in range(scale):
        for b in range(scale):
            np.testing.assert_allclose(
                out[0, a::scale, b::scale, 0], feats[0, :, :, scale * a + b], rtol=1e-6, atol=1e-7
            )


@pytest.mark.parametrize(
    "interpolation, reach",
    [("nearest", 0), ("bilinear", 1), ("bicubic", 2), ("lanczos3", 3), ("lanczos5", 5)],
)
def test_upsampling_is_keras_on_any_size_and_reaches_what_the_tiler_assumes(interpolation, reach):
    model = keras.Sequential(
        [keras.Input((None, None, 1)), UpSampling2D(3, interpolation=interpolation)]
    )
    x = np.random.default_rng(2).random((1, 15, 15, 1), dtype=np.float32)
    out = model(x).numpy()
    keras_out = keras.layers.UpSampling2D(3, interpolation=interpolation)(x).numpy()
    # bicubic is computed exactly (bicubic_upscale_graph); ResizeBicubic looks Keys' weights up
    # in a 1024-entry table, which holds the x3 phases (1/3, 2/3) only approximately
    atol = 1e-3 if interpolation == "bicubic" else 0
    np.testing.assert_allclose(out, keras_out, rtol=0, atol=atol)
    # traced for any size, as sr.inference.Upscaler does (Keras 3.15's own layer fails there
    # for every interpolation but nearest)
    spec = tf.TensorSpec([1, None, None, 1], tf.float32)
    traced = tf.function(lambda t: model(t), input_signature=[spec], autograph=False)
    np.testing.assert_array_equal(traced(x).numpy(), out)

    assert receptive_radius(model) == reach
    x = tf.Variable(x)
    with tf.GradientTape() as tape:
        centre = tf.reduce_sum(model(x)[0, 21:24, 21:24])  # the outputs of LR pixel (7, 7)
    grad = tape.gradient(centre, x).numpy()[0, :, :, 0]
    assert np.abs(np.argwhere(grad != 0) - 7).max() == reach


def test_edsr_rejects_unsupported_scale():
    with pytest.raises(ValueError, match="scales 2, 3, 4 and 8"):
        make_model("edsr", scale=5)


def _bicubic_reference(x: np.ndarray, s: int) -> np.ndarray:
    """Bicubic x s of ``[h, w]`` by its definition, in float64: each output pixel at input
    coordinate ``(o + 0.5) / s - 0.5`` weighs the input pixels by Keys' kernel (a = -0.5), taps
    outside the image dropped and the rest renormalised (``ResizeBicubic``'s borders)."""

    def matrix(n):
        o = (np.arange(s * n) + 0.5) / s - 0.5
        weights = keys_cubic(o[:, None] - np.arange(n)[None, :])
        return weights / weights.sum(axis=1, keepdims=True)

    return matrix(x.shape[0]) @ x @ matrix(x.shape[1]).T


@pytest.mark.slow
@pytest.mark.parametrize("scale", [2, 3, 4])
def test_graph_bicubic_is_the_definition_and_resize_bicubic_and_compiles_under_xla(scale):
    rng = np.random.default_rng(scale)
    for h, w in [(1, 1), (2, 3), (5, 7), (24, 24), (17, 40)]:
        x = rng.random((2, h, w, 3)).astype(np.float32)
        out = bicubic_upscale_graph(tf.constant(x), scale).numpy()
        assert out.shape == (2, scale * h, scale * w, 3)
        for b in range(2):
            for c in range(3):
                want = _bicubic_reference(x[b, :, :, c].astype(np.float64), scale)
                np.testing.assert_allclose(out[b, :, :, c], want, rtol=0, atol=2e-6)
        resized = tf.image.resize(x, [scale * h, scale * w], "bicubic").numpy()
        np.testing.assert_allclose(out, resized, rtol=0, atol=1e-6 if scale != 3 else 1e-3)
    compiled = tf.function(lambda t: bicubic_upscale_graph(t, scale), jit_compile=True)
    np.testing.assert_allclose(compiled(tf.constant(x)).numpy(), out, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_edsr_with_a_bicubic_skip_trains_under_xla():
    """``ResizeBicubic`` has no XLA kernel: the bicubic skip of edsr_lite once failed to compile
    with ``train.xla=true`` on every device."""
    keys = {"features": 8, "blocks": 1, "direct_upsample": True, "bicubic_skip": True}
    model = make_model("edsr", scale=4, **keys)
    x = tf.constant(np.random.default_rng(0).random((2, 12, 12, 1)), tf.float32)

    def loss_and_grads(t):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.abs(model(t, training=True) - 0.5))
        return loss, tape.gradient(loss, model.trainable_variables)

    eager_loss, eager_grads = loss_and_grads(x)
    xla_loss, xla_grads = tf.function(loss_and_grads, jit_compile=True)(x)
    np.testing.assert_allclose(xla_loss.numpy(), eager_loss.numpy(), rtol=1e-5)
    for a, b in zip(xla_grads, eager_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-6)
