"""VGG19 features before the ReLU, for the perceptual loss of ESRGAN and Real-ESRGAN: K. Simonyan
and A. Zisserman, "Very Deep Convolutional Networks for Large-Scale Image Recognition", ICLR 2015;
ESRGAN (Wang et al., ECCV Workshops 2018, Sec. 3.3) takes the features before the activation.
Reference code: github.com/XPixelGroup/BasicSR (``basicsr/archs/vgg_arch.py``,
``VGGFeatureExtractor``); Real-ESRGAN's layers are conv1_2, conv2_2, conv3_4, conv4_4 and conv5_4.

Keras's ``keras.applications.VGG19`` fuses each ReLU into its convolution, so its layers give the
features after the ReLU only. :func:`vgg_features_from` rebuilds its layers with linear
convolutions and separate ReLUs and copies its weights in: the same network, whose pre-activation
tensors are outputs (``tests/test_vgg.py`` checks the post-ReLU tensors against Keras's).

Two sets of weights, each with the input normalisation it was trained with:

- **torchvision's** ``vgg19-dcbb9e9d.pth`` (:data:`TORCHVISION_URL`), the VGG behind BasicSR's
  and Real-ESRGAN's perceptual loss: :func:`build_torch_vgg_features` with BasicSR's
  normalisation (``VGGFeatureExtractor(use_input_norm=True, range_norm=False)``): RGB in [0, 1]
  minus the ImageNet mean (0.485, 0.456, 0.406), divided by its standard deviation (0.229, 0.224,
  0.225). ``sr.models.state_dicts.vgg19`` reads the file (``features.N.weight`` / ``.bias``)
  into it. The paper's choice.
- **Keras's** ``imagenet`` (:func:`build_vgg_features`), another training, the original Caffe
  model, which expects ``keras.applications.vgg19.preprocess_input`` ("caffe" mode): BGR in
  [0, 255] minus the ImageNet mean in BGR (103.939, 116.779, 123.68), no division by a standard
  deviation. The model here takes RGB in [0, 1], multiplies by 255 and subtracts the mean of
  each channel (123.68, 116.779, 103.939 in RGB order), and the first convolution's kernel has
  its input channels reversed, so that it reads R, G, B where Keras's reads B, G, R: exactly
  Keras's network on the preprocessed image. Its features differ from torchvision's and have
  another scale (inputs 58 times larger): with the paper's weight 1.0 the perceptual term is not
  the paper's. Fetched by Keras (``vgg19_weights_tf_dim_ordering_tf_kernels_notop.h5``, 80 MB,
  from :data:`WEIGHTS_URL`, cached in ``~/.keras/models/``), or a local path to that file, or
  ``random`` (smoke tests only; logs a warning). A missing or unfetchable file is a
  ``ConfigError`` at build time naming the file and where to get it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import keras

from sr.core.errors import ConfigError
from sr.models.gan_schemas import (  # noqa: F401  (re-exported)
    LAYERS,
    TORCHVISION_FILE,
    TORCHVISION_URL,
    WEIGHTS_FILE,
)

log = logging.getLogger(__name__)

WEIGHTS_URL = f"https://storage.googleapis.com/tensorflow/keras-applications/vgg19/{WEIGHTS_FILE}"
CAFFE_MEAN_RGB = (123.68, 116.779, 103.939)  # the ImageNet mean of the Caffe VGG, 0..255
IMAGENET_MEAN = (0.485, 0.456, 0.406)  # torchvision's (and BasicSR's) normalisation, RGB [0, 1]
IMAGENET_STD = (0.229, 0.224, 0.225)
BLOCKS = (2, 2, 4, 4, 4)  # VGG19's convs per block, a 2x2 max pool after each
CONVS = tuple(f"conv{b}_{c}" for b, n in enumerate(BLOCKS, start=1) for c in range(1, n + 1))
"""VGG19's 16 convolutions in order (BasicSR's names)."""
VGG19_CHANNELS = (64, 64, 128, 128, *[256] * 4, *[512] * 8)  # each conv's output channels


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


def vgg_network(
    channels, normalisation: str, layers: tuple[str, ...] = LAYERS, name: str = "vgg19_features"
) -> keras.Model:
    """VGG19's convolutions up to the deepest of ``layers``, each linear and followed by a ReLU
    (3x3, 'same', with bias; a 2x2 max pool after each block but the last built), behind the
    input normalisation of its weights; the convs are named ``conv1_1`` ... ``conv5_4``.

    Args:
        channels: the output channels of the 16 convs in order (:data:`VGG19_CHANNELS`; a
            VGG19-shaped net of other widths for tests).
        normalisation: ``imagenet`` (torchvision's and BasicSR's: minus :data:`IMAGENET_MEAN`,
            divided by :data:`IMAGENET_STD`) or ``caffe`` (Keras's weights: x255 minus
            :data:`CAFFE_MEAN_RGB`).
        layers: the convs whose outputs to return (BasicSR's names).

    Returns:
        Non-trainable Keras model: input float ``[B, H, W, 3]``, RGB in [0, 1]; output a dict
        ``{name: [B, H / 2^(i-1), W / 2^(i-1), C]}`` float, for ``conv{i}_{j}`` the conv's
        output before its ReLU. The weights are Glorot's until set.

    Raises:
        ValueError: a name of ``layers`` that is not a conv of VGG19, or an unknown
            normalisation, or not 16 channel counts.
    """
    if not layers or not set(layers) <= set(CONVS):
        raise ValueError(f"not VGG19 convs: {sorted(set(layers) - set(CONVS)) or layers}")
    if len(channels) != len(CONVS):
        raise ValueError(f"VGG19 has {len(CONVS)} convs, got {len(channels)} channel counts")
    image = keras.Input(shape=(None, None, 3), name="rgb")
    if normalisation == "imagenet":
        std = [s**2 for s in IMAGENET_STD]
        x = keras.layers.Normalization(mean=IMAGENET_MEAN, variance=std)(image)
    elif normalisation == "caffe":
        x = keras.layers.Rescaling(255.0)(image)
        x = keras.layers.Normalization(mean=CAFFE_MEAN_RGB, variance=(1.0, 1.0, 1.0))(x)
    else:
        raise ValueError(f"normalisation must be imagenet or caffe, got {normalisation!r}")
    last = max(CONVS.index(n) for n in layers)
    outputs = {}
    for i, (conv, width) in enumerate(zip(CONVS[: last + 1], channels)):
        if i and conv.endswith("_1"):
            x = keras.layers.MaxPooling2D(2, name=f"pool{conv[4]}")(x)
        x = keras.layers.Conv2D(int(width), 3, padding="same", name=conv)(x)
        if conv in layers:
            outputs[conv] = x
        x = keras.layers.ReLU(name=f"{conv}_relu")(x)
    model = keras.Model(image, outputs, name=name)
    model.trainable = False
    return model


def vgg_features_from(vgg: keras.Model, layers: tuple[str, ...] = LAYERS) -> keras.Model:
    """The pre-activation VGG of a Keras VGG19 (:func:`vgg_network` with Caffe's
    normalisation), its weights copied in, the first kernel's input channels reversed (BGR to
    RGB).

    Args:
        vgg: ``keras.applications.VGG19(include_top=False, ...)`` (:func:`keras_vgg19`).
        layers: the convs whose outputs to return, BasicSR's names (``conv1_2`` ...).

    Returns:
        See :func:`vgg_network`: RGB in [0, 1] in, a dict of pre-activation features out.

    Raises:
        ValueError: a name of ``layers`` that is not a conv of VGG19.
    """
    if not layers or not set(layers) <= set(CONVS):
        known = {keras_name(n) for n in CONVS}
        raise ValueError(f"not VGG19 convs: {sorted({keras_name(n) for n in layers} - known)}")
    theirs = [vgg.get_layer(keras_name(n)) for n in CONVS]
    model = vgg_network([la.filters for la in theirs], "caffe", tuple(layers))
    for conv, layer in zip(CONVS, theirs):
        if conv in {la.name for la in model.layers}:
            kernel, bias = layer.get_weights()
            first = conv == "conv1_1"
            model.get_layer(conv).set_weights([kernel[:, :, ::-1] if first else kernel, bias])
    return model


def build_torch_vgg_features(
    channels=VGG19_CHANNELS, layers: tuple[str, ...] = LAYERS
) -> keras.Model:
    """torchvision's VGG19 features before the ReLU, with BasicSR's normalisation (the paper's
    perceptual loss): :func:`vgg_network` with ``imagenet`` normalisation. Its weights are set
    by ``sr.models.state_dicts.vgg19`` from ``vgg19-dcbb9e9d.pth`` (:data:`TORCHVISION_URL`)."""
    return vgg_network(tuple(channels), "imagenet", tuple(layers), name="vgg19_torch_features")


def build_vgg_features(
    weights: str | os.PathLike = "imagenet", layers: tuple[str, ...] = LAYERS
) -> keras.Model:
    """VGG19 features before the ReLU at ``layers`` (default: Real-ESRGAN's five), for
    ``weights`` = ``imagenet``, a local path of :data:`WEIGHTS_FILE`, or ``random``.

    See :func:`keras_vgg19` (the weights and the errors raised) and :func:`vgg_features_from`
    (the model returned: RGB in [0, 1] in, a dict of pre-activation features out).
    """
    return vgg_features_from(keras_vgg19(weights), tuple(layers))
