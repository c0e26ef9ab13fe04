"""Scoring runs a model as one graph (``sr.core.forward``), never layer by layer eagerly:
Keras 3's eager call of a functional model holds every layer's output until it returns, which
for RealESRGAN_x4plus on one 256 x 256 LR image is over 24 GB."""

import keras
import numpy as np
import tensorflow as tf

from sr.core.forward import forward
from sr.deploy.export import check
from sr.evaluation import super_resolve_rgb, super_resolve_window, super_resolve_y
from sr.models.registry import make_model


class Recorder(keras.layers.Layer):
    """Identity that records whether each call ran eagerly (True) or in a graph (False)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.eager = []

    def call(self, x):
        self.eager.append(tf.executing_eagerly())
        return x


def recorded(channels: int, frames: int = 0):
    shape = (frames, None, None, channels) if frames else (None, None, channels)
    inp = keras.Input(shape)
    x = inp[:, -1] if frames else inp
    rec = Recorder()
    out = rec(keras.layers.UpSampling2D(2)(x))
    return keras.Model(inp, out), rec


def test_super_resolve_runs_the_model_in_a_graph_with_the_eager_pixels():
    model, rec = recorded(1)
    lr = np.random.default_rng(0).uniform(0, 255, (9, 7))
    sr = super_resolve_y(model, lr)
    assert rec.eager and not any(rec.eager)
    expected = np.round(np.repeat(np.repeat(lr, 2, 0), 2, 1))  # nearest x2, on the 8-bit grid
    np.testing.assert_allclose(sr, expected, atol=1e-4)

    rgb, rec3 = recorded(3)
    super_resolve_rgb(rgb, np.zeros((5, 6, 3), np.uint8))
    window, recw = recorded(1, frames=3)
    super_resolve_window(window, [lr, lr, lr])
    assert rec3.eager and recw.eager and not any(rec3.eager + recw.eager)


def test_forward_is_made_once_per_model_and_matches_the_eager_call():
    model = make_model("espcn", scale=4, channels=1)
    fn = forward(model)
    assert forward(model) is fn
    for size in (8, 11, 13):  # sizes change: one generalised trace, the same values
        x = tf.random.stateless_uniform([1, size, size + 2, 1], seed=[size, 1])
        np.testing.assert_allclose(fn(x).numpy(), model(x, training=False).numpy(), atol=1e-6)
    assert fn.experimental_get_tracing_count() <= 2


def test_a_runner_that_is_no_keras_model_is_called_as_it_is():
    def runner(x, training=False):
        return x

    assert forward(runner) is runner


def test_the_export_check_runs_the_keras_model_in_a_graph():
    model, rec = recorded(1)
    image = np.full((1, 6, 6, 1), 0.5, np.float32)

    def exported(x, training=False):
        return tf.image.resize(x, (12, 12), "nearest")

    assert check(model, exported, image) == float("inf")
    assert rec.eager and not any(rec.eager)
