"""A model's inference pass as one graph, for every caller that runs a whole image through a
Keras model outside ``sr.inference.Upscaler`` (whose pass is a graph already): scoring
(``sr.evaluation``) and the check of an export (``sr.deploy``)."""

from __future__ import annotations

import weakref

import keras
import tensorflow as tf

_FORWARDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def forward(model):
    """``model``'s inference pass as one graph: a callable ``x -> model(x, training=False)``,
    a ``tf.function`` made once per model (shapes generalised after a second input size:
    ``reduce_retracing``) and kept while the model lives.

    Why not call the model: Keras 3 runs a functional model eagerly layer by layer and holds every
    layer's output until the call returns, so an eager call keeps all activations at once.
    A residual-in-residual network of 4 blocks of 64 features on one 256 x 256 LR image peaks at
    6.1 GB eagerly and 1.8 GB as a graph, where TensorFlow frees each tensor after its last
    consumer; RealESRGAN_x4plus (23 blocks) eagerly needs over 24 GB
    (``tests/test_evaluation_forward.py``
    pins that the graph is used). A model that is no Keras model (an export's runner) is
    returned as it is.

    Args:
        model: a Keras model, float32 ``[B, h, w, C]`` (or ``[B, k, h, w, C]``) in [0, 1].

    Returns:
        A callable of one tensor giving the model's output tensor (its compute dtype).
    """
    if not isinstance(model, keras.Model):
        return model
    fn = _FORWARDS.get(model)
    if fn is None:
        ref = weakref.ref(model)  # no strong reference from the cache's value to its key
        fn = tf.function(lambda x: ref()(x, training=False), reduce_retracing=True)
        _FORWARDS[model] = fn
    return fn
