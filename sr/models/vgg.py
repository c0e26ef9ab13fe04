"""VGG19 features before the ReLU, for the perceptual loss of ESRGAN and Real-ESRGAN: K. Simonyan
and A. Zisserman, "Very Deep Convolutional Networks for Large-Scale Image Recognition", ICLR 2015;
ESRGAN (Wang et al., ECCV Workshops 2018, Sec. 3.3) takes the features before the activation.
Reference code: github.com/XPixelGroup/BasicSR (``basicsr/archs/vgg_arch.py``,
``VGGFeatureExtractor``); Real-ESRGAN's layers are conv1_2, conv2_2, conv3_4, conv4_4 and conv5_4.

Keras's ``keras.applications.VGG19`` fuses each ReLU into its convolution, so its layers give the
features after the ReLU only. :func:`vgg_features_from` rebuilds its layers with linear
convolutions and separate ReLUs and copies its weights in: the same network, whose pre-activation
tensors are outputs (``tests/test_vgg.py`` checks the post-ReLU tensors against Keras's).

Input normalisation. BasicSR normalises RGB in [0, 1] by the ImageNet mean (0.485, 0.456, 0.406)
and standard deviation (0.229, 0.224, 0.225), the preprocessing of torchvision's VGG19 weights.
Keras's ``imagenet`` weights are another training, the original Caffe model of the paper, which
expects ``keras.applications.vgg19.preprocess_input`` ("caffe" mode): BGR in [0, 255] minus the
ImageNet mean in BGR (103.939, 116.779, 123.68), no division by a standard deviation. Feeding these
weights torchvision's normalisation would give them inputs 58 times too small in the wrong
channel order, so the model here applies Caffe's: it takes RGB in [0, 1], multiplies by 255 and
subtracts the mean of each channel (123.68, 116.779, 103.939 in RGB order, the same ImageNet mean
BasicSR uses, times 255), and the first convolution's kernel has its input channels reversed, so
that it reads R, G, B where Keras's reads B, G, R: exactly Keras's network on the preprocessed
image. The features therefore have the scale of the Caffe weights, not of torchvision's: the
perceptual loss's magnitude differs from BasicSR's for the same images.

Weights (``weights``): ``imagenet`` (Keras fetches ``vgg19_weights_tf_dim_ordering_tf_kernels_
notop.h5``, 80 MB, from :data:`WEIGHTS_URL` on first use and caches it in ``~/.keras/models/``), a
local path to that file (for machines without internet), or ``random`` (smoke tests only; logs a
warning). A missing or unfetchable file is a ``ConfigError`` at build time naming the file and
where to get it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import keras

from sr.core.errors import ConfigError

log = logging.getLogger(__name__)

WEIGHTS_FILE = "vgg19_weights_tf_dim_ordering_tf_kernels_notop.h5"
WEIGHTS_URL = f"https://storage.googleapis.com/tensorflow/keras-applications/vgg19/{WEIGHTS_FILE}"
# Real-ESRGAN's perceptual layers (BasicSR's names; Keras's are block{i}_conv{j})
LAYERS = ("conv1_2", "conv2_2", "conv3_4", "conv4_4", "conv5_4")
CAFFE_MEAN_RGB = (123.68, 116.779, 103.939)  # the ImageNet mean of the Caffe VGG, 0..255


def keras_name(layer: str) -> str:
    """BasicSR's name of a VGG conv (``conv3_4``) as Keras's (``block3_conv4``)."""
    block, conv = layer.removeprefix("conv").split("_")
    return f"block{block}_conv{conv}"


def _where_to_get() -> str:
    return f"download {WEIGHTS_FILE} from {WEIGHTS_URL} and give its path"


def keras_vgg19(weights: str | os.PathLike = "imagenet") -> keras.Model:
    """``keras.applications.VGG19(include_top=False)`` with the weights asked for.

    Args:
        weights: ``imagenet`` (fetched by Keras, then cached), the path of a local copy of
            :data:`WEIGHTS_FILE`, or ``random`` (Glorot-uniform; a warning is logged).

    Returns:
        The Keras model: BGR input with Caffe's preprocessing, ``[B, H, W, 3]``, any H and W.

    Raises:
        ConfigError: the path does not exist or is not that weights file, or the ``imagenet``
            weights cannot be fetched; the message names the file and where to get it.
    """
    if str(weights) == "random":
        log.warning("VGG19 with random weights: for smoke tests only, its features mean nothing")
        return keras.applications.VGG19(include_top=False, weights=None)
    if str(weights) == "imagenet":
        try:
            return keras.applications.VGG19(include_top=False, weights="imagenet")
        except Exception as err:  # Keras's get_file raises a plain Exception when offline
            raise ConfigError(
                f"VGG19 weights: cannot fetch {WEIGHTS_FILE} ({err}); on a machine without "
                f"internet, {_where_to_get()} (weights=PATH)"
            ) from err
    path = Path(weights).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"VGG19 weights: no file {path}; {_where_to_get()}, or use weights=imagenet to let "
            f"Keras fetch it"
        )
    try:
        return keras.applications.VGG19(include_top=False, weights=str(path))
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"VGG19 weights: {path} is not Keras's {WEIGHTS_FILE} ({err}); {_where_to_get()}"
        ) from err


def vgg_features_from(vgg: keras.Model, layers: tuple[str, ...] = LAYERS) -> keras.Model:
    """The pre-activation VGG of a Keras VGG19: its layers up to the deepest of ``layers``, each
    conv linear and followed by a ReLU, its weights copied in, Caffe's preprocessing in front.

    Args:
        vgg: ``keras.applications.VGG19(include_top=False, ...)`` (:func:`keras_vgg19`).
        layers: the convs whose outputs to return, BasicSR's names (``conv1_2`` ...).

    Returns:
        Non-trainable Keras model: input float ``[B, H, W, 3]``, RGB in [0, 1]; output a dict
        ``{name: [B, H / 2^(i-1), W / 2^(i-1), C_i]}`` float, for ``conv{i}_{j}`` the conv's
        output before its ReLU (C = 64, 128, 256, 512, 512 for i = 1 .. 5).

    Raises:
        ValueError: a name of ``layers`` that is not a conv of VGG19.
    """
    wanted = {keras_name(name): name for name in layers}
    known = {layer.name for layer in vgg.layers}
    if not wanted or not set(wanted) <= known:
        raise ValueError(f"not VGG19 convs: {sorted(set(wanted) - known) or layers}")
    image = keras.Input(shape=(None, None, 3), name="rgb")
    x = keras.layers.Rescaling(255.0)(image)
    x = keras.layers.Normalization(mean=CAFFE_MEAN_RGB, variance=(1.0, 1.0, 1.0))(x)
    outputs, first = {}, True
    for layer in vgg.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        if isinstance(layer, keras.layers.Conv2D):
            conv = keras.layers.Conv2D.from_config({**layer.get_config(), "activation": None})
            x = conv(x)
            kernel, bias = layer.get_weights()
            conv.set_weights([kernel[:, :, ::-1] if first else kernel, bias])  # BGR -> RGB
            first = False
            if layer.name in wanted:
                outputs[wanted[layer.name]] = x
                if len(outputs) == len(wanted):
                    break
            x = keras.layers.ReLU(name=f"{layer.name}_relu")(x)
        else:  # the max pools
            x = layer.__class__.from_config(layer.get_config())(x)
    model = keras.Model(image, outputs, name="vgg19_features")
    model.trainable = False
    return model


def build_vgg_features(
    weights: str | os.PathLike = "imagenet", layers: tuple[str, ...] = LAYERS
) -> keras.Model:
    """VGG19 features before the ReLU at ``layers`` (default: Real-ESRGAN's five), for
    ``weights`` = ``imagenet``, a local path of :data:`WEIGHTS_FILE`, or ``random``.

    See :func:`keras_vgg19` (the weights and the errors raised) and :func:`vgg_features_from`
    (the model returned: RGB in [0, 1] in, a dict of pre-activation features out).
    """
    return vgg_features_from(keras_vgg19(weights), tuple(layers))
