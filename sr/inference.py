"""Upscaling whole images with a trained model, Y-channel or RGB: the logic shared by
``scripts/upscale.py`` and ``scripts/export.py``.

An image is upscaled as in SRCNN and its successors: Y of BT.601 (``sr.core.color``, the one
colour conversion of the project) goes through the model; Cb and Cr (the same module) and an
alpha channel are upscaled by the project's one bicubic operator (``sr.core.degrade``,
MATLAB-equivalent); the result is converted back to RGB and rounded to 8 bits. A grayscale image
is its own Y. One TensorFlow graph (:meth:`Upscaler.graph`) does all of it, so that upscale.py and
the exported SavedModel compute the same thing.

An RGB model (``sr.evaluation.input_channels`` 3: ``[B, h, w, 3]`` to ``[B, s h, s w, 3]``) takes
R, G and B directly, with no Y/CbCr split and no bicubic chroma; alpha is still upscaled by
bicubic. A gray image (with or without alpha) is replicated to R, G and B for the model and the
output is turned back into gray by ``sr.core.color.gray_of``: the gray whose replication has the
output's Y (``0.299 R + 0.587 G + 0.114 B``, exact on a gray output), so a gray image stays gray
and ``sr.evaluation`` scores the very image written here.

Large images are processed in tiles of ``tile`` x ``tile`` input pixels, each read with
``overlap`` extra input pixels on every side that are cut away after upscaling. With an overlap at
least the model's receptive-field radius (at LR resolution) plus the bicubic kernel's radius of 2,
each output pixel sees exactly the input it sees in the untiled image, so tiling changes nothing
beyond float rounding; :func:`default_overlap` computes that bound from the model's layers (the
same for Y and RGB models).

Sequences (:class:`SequenceUpscaler`, runs of ``data=sequence``): frame t is upscaled from its
window of k frames (``sr.core.frames.window_frames``, border frames repeated at the ends of a
sequence): Y of the k frames goes through the model, Cb, Cr and alpha of frame t by bicubic,
exactly as above; the same tile grid is cut from all k frames. Multi-frame models are Y models.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from PIL import Image

from sr.core.color import gray_of, rgb_to_ycbcr, ycbcr_to_rgb
from sr.core.degrade import KERNEL_RADIUS, MIN_LR_SIZE, bicubic_upscale, quantize
from sr.core.frames import TARGETS, check_same_size, target_index
from sr.core.images import load_image
from sr.evaluation import input_channels
from sr.models.layers import PixelShuffle

log = logging.getLogger(__name__)

FALLBACK_OVERLAP = 32  # for models whose receptive field cannot be read from their layers
MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}  # output mode by channel count

# Layers that act on each pixel alone (no spatial extent).
_POINTWISE = (
    keras.layers.InputLayer,
    keras.layers.Activation,
    keras.layers.ReLU,
    keras.layers.LeakyReLU,
    keras.layers.PReLU,
    keras.layers.Add,
    keras.layers.Subtract,
    keras.layers.Multiply,
    keras.layers.Concatenate,
    keras.layers.Rescaling,
    keras.layers.Dropout,
    keras.layers.BatchNormalization,
)

_CONVOLUTIONS = (keras.layers.Conv2D, keras.layers.DepthwiseConv2D, keras.layers.SeparableConv2D)

# keras.layers.UpSampling2D's reach in input pixels, by interpolation. Output pixels sample the
# input at half-pixel centres, (i + 0.5) / s - 0.5, less than 1/2 pixel from the input pixel they
# lie in, so a kernel of support k reads at most k pixels beside it: nearest (``ops.repeat``) 0,
# bilinear 1, bicubic 2 (Keys' cubic, a = -0.5, of ``tf.image.resize``), Lanczos 3 and 5.
_UPSAMPLING_REACH = {"nearest": 0, "bilinear": 1, "bicubic": 2, "lanczos3": 3, "lanczos5": 5}


def _layer_reach(layer, factor: int) -> tuple[float, int] | None:
    """``(radius added in LR pixels, factor after)`` of a layer whose input is at ``factor``
    times the LR resolution; None for a layer of unknown spatial extent."""
    if isinstance(layer, keras.Model):
        inner = _model_reach(layer)
        return None if inner is None else (inner[0] / factor, factor * inner[1])
    if isinstance(layer, PixelShuffle):
        return 0.0, factor * layer.factor
    if callable(getattr(layer, "reach", None)):  # a layer of its own says its reach (Conv3XC)
        return layer.reach() / factor, factor
    if isinstance(layer, _CONVOLUTIONS):
        if tuple(layer.strides) != (1, 1):
            return None
        reach = [
            math.ceil((k - 1) * d / 2)
            for k, d in zip(layer.kernel_size, layer.dilation_rate, strict=True)
        ]
        return max(reach) / factor, factor
    if isinstance(layer, keras.layers.UpSampling2D):
        size, reach = tuple(layer.size), _UPSAMPLING_REACH.get(layer.interpolation)
        if reach is None or size[0] != size[1]:
            return None
        return reach / factor, factor * size[0]
    if isinstance(layer, _POINTWISE):
        return 0.0, factor
    return None


def _tensor_keys(structure) -> list[tuple[str, int]]:
    """``(layer name, node index)`` of every tensor in a node's serialized arguments (the
    ``keras_history`` of each ``__keras_tensor__`` of ``Model.get_config()``)."""
    if isinstance(structure, dict):
        if structure.get("class_name") == "__keras_tensor__":
            name, node, _ = structure["config"]["keras_history"]
            return [(name, node)]
        return [key for value in structure.values() for key in _tensor_keys(value)]
    if isinstance(structure, list | tuple):
        return [key for value in structure for key in _tensor_keys(value)]
    return []


def _functional_layers(model) -> tuple[list[dict], list] | None:
    """``(layers, outputs)`` of a functional model's config (``layers`` in graph order, each with
    its ``inbound_nodes``; ``outputs`` as ``[name, node, tensor]``); None for a Sequential or
    subclassed model."""
    if isinstance(model, keras.Sequential):
        return None
    try:
        config = model.get_config()
    except (NotImplementedError, TypeError, ValueError):
        return None
    if not isinstance(config, dict) or "output_layers" not in config:
        return None
    outputs = config["output_layers"]
    return config["layers"], [outputs] if isinstance(outputs[0], str) else outputs


def _model_reach(model) -> tuple[float, int] | None:
    """``(radius in input pixels, upscaling factor)`` of a model's outputs, or None."""
    graph = _functional_layers(model)
    if graph is None:  # Sequential or subclassed: a chain of layers
        radius, factor = 0.0, 1
        for layer in model.layers:
            step = _layer_reach(layer, factor)
            if step is None:
                return None
            radius, factor = radius + step[0], step[1]
        return radius, factor
    layers, outputs = graph
    reach: dict[tuple[str, int], tuple[float, int]] = {}  # (layer, node) -> (radius, factor)
    for config in layers:  # inputs first: the config lists the layers in graph order
        name, nodes = config["name"], config["inbound_nodes"]
        if not nodes:  # an input
            reach[(name, 0)] = (0.0, 1)
        # a nested functional model's node 0 is its own graph: its calls are numbered from 1
        first = int("output_layers" in config.get("config", {}))
        for index, node in enumerate(nodes, first):
            inputs = [reach.get(key) for key in _tensor_keys(node)]
            if not inputs or None in inputs or len({f for _, f in inputs}) != 1:
                return None
            step = _layer_reach(model.get_layer(name), inputs[0][1])
            if step is None:
                return None
            reach[(name, index)] = (max(r for r, _ in inputs) + step[0], step[1])
    ends = [reach.get((name, node)) for name, node, _ in outputs]
    if None in ends or len({f for _, f in ends}) != 1:
        return None
    return max(r for r, _ in ends), ends[0][1]


def receptive_radius(model) -> float | None:
    """Receptive-field radius of a model, in input (LR) pixels.

    A functional model's graph is walked from its input: each 2-D convolution adds its radius at
    its resolution (after pixel shuffles or upsamplings of total factor f it reaches
    ``radius / f`` LR pixels), ``UpSampling2D`` adds its kernel's reach (nearest 0, bilinear 1,
    bicubic 2 input pixels), and a merge (``Add``, ``Concatenate``) takes the largest radius of
    its inputs. The result is the longest path: exact for ESPCN (4) and EDSR, whose global skip
    and bicubic skip are shorter than the body. A Sequential or subclassed model is taken as the
    chain of its layers.

    Args:
        model: a Keras model (nested models are walked), or any other callable.

    Returns:
        The radius in LR pixels, or None when a layer of unknown spatial extent (pooling,
        strided convolution, ``Resizing``, ``Lambda``, a ``keras.ops`` call, ...) or a non-Keras
        callable is met.
    """
    if not isinstance(model, keras.Model):
        return None
    reach = _model_reach(model)
    return None if reach is None else reach[0]


def _check_size(h: int, w: int, tile: int) -> None:
    """Raise ValueError for an LR image below ``MIN_LR_SIZE`` on a side, or a negative tile."""
    if min(h, w) < MIN_LR_SIZE:
        raise ValueError(
            f"image {w}x{h} is too small: upscaling needs at least "
            f"{MIN_LR_SIZE}x{MIN_LR_SIZE} pixels"
        )
    if tile < 0:
        raise ValueError(f"tile must be a positive number of pixels or 0 (off), got {tile}")


def default_overlap(model) -> int:
    """Tile overlap (input pixels) that makes tiled upscaling equal to untiled: the receptive
    radius of :func:`receptive_radius`, rounded up, plus the bicubic radius 2; 32 when the model's
    receptive field is unknown (then tiling may differ slightly at tile seams)."""
    radius = receptive_radius(model)
    if radius is None:
        log.warning("receptive field of the model unknown: tile overlap %d", FALLBACK_OVERLAP)
        return FALLBACK_OVERLAP
    return math.ceil(radius) + KERNEL_RADIUS


class Upscaler:
    """Upscale uint8 images (gray, gray + alpha, RGB, RGBA) by a Y-channel or an RGB SR model.

    Args:
        model: Keras model (or callable ``model(x, training=False)``) from float32
            ``[B, h, w, C]`` in [0, 1] to ``[B, s h, s w, C]``: C = 1, a Y model, or C = 3, an
            RGB model (``sr.evaluation.input_channels``; a callable without Keras inputs is a Y
            model). A model with an int attribute ``input_size`` S (``sr.deploy.Exported`` of a
            TFLite export, which mirrors a smaller input to S) gets tiles of at least S x S
            input pixels wherever the image has them (:func:`widened`), so that it always runs
            full windows; only an image smaller than S is mirrored.
        scale: s, the model's factor.
        overlap: tile overlap in input pixels; None for :func:`default_overlap`.

    Raises:
        ValueError: for an overlap below the bicubic radius (2), or a model reading neither 1
            nor 3 channels.
    """

    def __init__(self, model, scale: int, overlap: int | None = None):
        self.model, self.scale = model, int(scale)
        self.channels = input_channels(model)  # 1: Y model, 3: RGB model
        self.overlap = default_overlap(model) if overlap is None else int(overlap)
        if self.overlap < KERNEL_RADIUS:
            raise ValueError(
                f"tile overlap {self.overlap} is too small: use at least {KERNEL_RADIUS} pixels "
                f"(the bicubic kernel's reach), or leave it unset for the model's receptive field"
            )
        self._functions: dict[int, tf.types.experimental.GenericFunction] = {}
        # a model of a fixed input side (sr.deploy.Exported of a TFLite export: input_size) is
        # never handed a tile smaller than it where the image is not: it would mirror the tile
        self.least = int(getattr(model, "input_size", None) or 0)

    def graph(self, image: tf.Tensor) -> tf.Tensor:
        """The upscaling graph (TensorFlow ops only, traced by :meth:`function` and export).

        Args:
            image: uint8 ``[B, h, w, C]``, C = 1 (gray), 2 (gray + alpha), 3 (RGB), 4 (RGBA);
                h, w >= 3.

        Returns:
            uint8 ``[B, s h, s w, C]``, rounded half up and clipped to 0..255. A Y model: Y (or
            gray) by the model, Cb, Cr and alpha by bicubic, back to RGB. An RGB model: R, G, B
            by the model (gray: replicated, and the output's :func:`sr.core.color.gray_of`),
            alpha by bicubic.
        """
        return tf.cast(quantize(self.float_graph(image)), tf.uint8)

    def float_graph(self, image: tf.Tensor) -> tf.Tensor:
        """:meth:`graph` before rounding: float32 ``[B, s h, s w, C]`` on [0, 255], unclipped."""
        if self.channels == 3:
            return self._rgb_graph(image)
        y, others = split_y(image)
        return self._assemble(self.model(y / 255.0, training=False), others, image.shape[-1])

    def _rgb_graph(self, image: tf.Tensor) -> tf.Tensor:
        """:meth:`float_graph` for an RGB model."""
        x = tf.cast(image, tf.float32)
        colour = 3 if image.shape[-1] >= 3 else 1
        rgb = x[..., :3] if colour == 3 else tf.concat([x[..., :1]] * 3, axis=-1)
        sr = tf.cast(self.model(rgb / 255.0, training=False), tf.float32) * 255.0
        parts = [sr if colour == 3 else gray_of(sr)]
        if image.shape[-1] > colour:  # alpha
            parts.append(bicubic_upscale(x[..., colour:], self.scale))
        return tf.concat(parts, axis=-1)

    def _assemble(self, sr_y: tf.Tensor, others: tf.Tensor, channels: int) -> tf.Tensor:
        """float32 ``[B, s H, s W, C]`` on [0, 255] from the model's Y ``[B, s H, s W, 1]`` in
        [0, 1] and the other channels (Cb, Cr, alpha) at LR, upscaled here by bicubic."""
        parts = [tf.cast(sr_y, tf.float32) * 255.0]
        if others.shape[-1]:
            parts.append(bicubic_upscale(others, self.scale))
        out = tf.concat(parts, axis=-1)
        if channels >= 3:
            out = tf.concat([ycbcr_to_rgb(out[..., :3]), out[..., 3:]], axis=-1)
        return out

    def checked_graph(self, image: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """``(graph(image), count of NaN or inf before rounding)`` (:func:`finite_or_raise`)."""
        return rounded_and_counted(self.float_graph(image))

    def function(self, channels: int):
        """:meth:`checked_graph` as a ``tf.function`` for uint8 ``[1, None, None, channels]``
        (one trace for every size)."""
        if channels not in MODES:
            raise ValueError(f"images must have 1, 2, 3 or 4 channels, got {channels}")
        if channels not in self._functions:
            spec = tf.TensorSpec([1, None, None, channels], tf.uint8, name="lr")
            self._functions[channels] = tf.function(self.checked_graph, input_signature=[spec])
        return self._functions[channels]

    def __call__(self, image: np.ndarray, tile: int = 0) -> np.ndarray:
        """Upscale one image, in overlapping tiles when it is larger than ``tile``.

        Args:
            image: uint8 ``[h, w, C]`` (C = 1, 2, 3 or 4), h, w >= 3.
            tile: tile side in input pixels (each tile is read with ``self.overlap`` more pixels
                on every side); 0 for no tiling. Memory then grows with ``(tile + 2 overlap)^2``,
                not with the image.

        Returns:
            uint8 ``[s h, s w, C]``.

        Raises:
            ValueError: for an image that is not ``[h, w, 1|2|3|4]`` uint8, is smaller than 3x3,
                or a negative tile.
            NonFiniteOutputError: if the model's output holds NaN or inf (nothing is returned).
        """
        image = np.asarray(image)
        if image.ndim != 3 or image.dtype != np.uint8 or image.shape[-1] not in MODES:
            raise ValueError(
                f"expected a uint8 image [h, w, 1|2|3|4], got {image.dtype} {image.shape}"
            )
        h, w, channels = image.shape
        _check_size(h, w, tile)
        fn = self.function(channels)
        return self._tiled(lambda sy, sx: finite_or_raise(*fn(image[np.newaxis, sy, sx])), h, w,
                           tile)  # fmt: skip

    def _tiled(self, run, h: int, w: int, tile: int) -> np.ndarray:
        """Assemble ``run(rows, cols)`` (uint8 ``[s h', s w', C]`` of the input slices) over the
        tile grid of an ``h`` x ``w`` input (the whole input when ``tile`` is 0 or larger). Each
        tile is read with ``overlap`` more pixels on every side, and widened inward to at least
        :attr:`least` pixels where the image has them (a fixed-size model's full windows)."""
        s = self.scale
        if not tile or (h <= tile and w <= tile):
            return run(slice(None), slice(None))
        out = None
        for y0 in range(0, h, tile):
            for x0 in range(0, w, tile):
                y1, x1 = min(y0 + tile, h), min(x0 + tile, w)
                iy0, iy1 = widened(y0 - self.overlap, y1 + self.overlap, h, self.least)
                ix0, ix1 = widened(x0 - self.overlap, x1 + self.overlap, w, self.least)
                part = run(slice(iy0, iy1), slice(ix0, ix1))
                if out is None:
                    out = np.empty((s * h, s * w, part.shape[-1]), np.uint8)
                oy, ox = s * (y0 - iy0), s * (x0 - ix0)
                out[s * y0 : s * y1, s * x0 : s * x1] = part[
                    oy : oy + s * (y1 - y0), ox : ox + s * (x1 - x0)
                ]
        return out


class NonFiniteOutputError(ValueError):
    """The model's output holds NaN or inf, which rounding would write as black or white: no
    image is written (``scripts/upscale.py`` lists it as failed and exits 1)."""


def rounded_and_counted(out: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """uint8 of float ``out`` on [0, 255] (``quantize``), and the int32 count of its NaN or inf."""
    bad = tf.math.count_nonzero(~tf.math.is_finite(out), dtype=tf.int32)
    return tf.cast(quantize(out), tf.uint8), bad


def finite_or_raise(image: tf.Tensor, bad: tf.Tensor) -> np.ndarray:
    """uint8 ``[s h, s w, C]`` of ``image`` (``[1, s h, s w, C]``) when ``bad`` (the count of
    its NaN or infinite values before rounding, :meth:`Upscaler.checked_graph`) is 0.

    Raises:
        NonFiniteOutputError: naming the count, otherwise.
    """
    count = int(bad)
    if count:
        raise NonFiniteOutputError(
            f"the model's output holds {count} NaN or infinite value(s) of {int(tf.size(image))}; "
            "no image written (its weights overflow on this image: use a float32 copy of a "
            "PyTorch file, or score a run's checkpoint with scripts/evaluate.py)"
        )
    return image[0].numpy()


def widened(lo: int, hi: int, length: int, least: int) -> tuple[int, int]:
    """The input span ``[lo, hi)`` clipped to ``[0, length)`` and, if shorter than ``least``,
    widened inward (away from the image's edge) to ``least`` pixels, or to ``length`` when the
    image is shorter. A wider tile only adds context: the output kept is the same."""
    lo, hi = max(0, lo), min(length, hi)
    if hi - lo < least:
        lo = max(0, min(lo, hi - least))
        hi = min(length, lo + least)
    return lo, hi


def split_y(image) -> tuple[tf.Tensor, tf.Tensor]:
    """``(Y, others)`` of uint8 ``[..., C]``: float32 ``[..., 1]`` Y on [0, 255] (a gray image is
    its own Y; RGB: BT.601 of ``sr.core.color``) and float32 ``[..., C - 1]`` Cb, Cr (RGB) and
    alpha (if any)."""
    x = tf.cast(image, tf.float32)
    if x.shape[-1] in (1, 2):
        return x[..., :1], x[..., 1:]
    ycbcr = rgb_to_ycbcr(x[..., :3])
    return ycbcr[..., :1], tf.concat([ycbcr[..., 1:], x[..., 3:]], axis=-1)


def run_window(cfg) -> tuple[int, int, int] | None:
    """``(frames, frame_stride, target index)`` of a ``data=sequence`` run's config
    (``data.frames``, ``data.frame_stride``, ``data.target_frame``); None for a run of single
    images (no ``data.frames``).

    Raises:
        ValueError: for a ``data.target_frame`` outside the window.
    """
    if "frames" not in cfg.data:
        return None
    frames = int(cfg.data.frames)
    target = target_index(frames, cfg.data.get("target_frame", TARGETS[0]))
    return frames, int(cfg.data.get("frame_stride", 1)), target


class SequenceUpscaler(Upscaler):
    """Upscale a frame of a sequence from its window of k frames by a multi-frame Y model.

    Args:
        model: Keras model (or callable ``model(x, training=False)``) from float32
            ``[B, k, h, w, 1]`` in [0, 1] (``[B, h, w, 1]`` when k = 1) to ``[B, s h, s w, 1]``,
            the SR of the window's target frame.
        scale: s, the model's factor.
        frames: k >= 1.
        overlap: tile overlap in input pixels; None for :func:`default_overlap` (of the fusion,
            for a model with global alignment).

    A model that registers its frames globally (a :class:`sr.models.align.GlobalAlign` layer,
    ``model=espcn_mf`` with ``align=global``) is split: the alignment runs on the whole frames
    first, as in evaluation, and only the rest of the model (local, of known receptive field)
    runs in tiles; otherwise every tile would estimate its own shifts.

    Raises:
        ValueError: for an overlap below the bicubic radius (2), ``frames`` < 1, or an RGB model.
    """

    def __init__(self, model, scale: int, frames: int, overlap: int | None = None):
        from sr.models.align import GlobalAlign

        aligns = [
            layer for layer in getattr(model, "layers", []) if isinstance(layer, GlobalAlign)
        ]
        self.align = aligns[0] if aligns else None
        if self.align is not None:  # the layers after the alignment, fed its output
            model = keras.Model(self.align.output, model.output, name=f"{model.name}_fusion")
        super().__init__(model, scale, overlap)
        if self.channels != 1:
            raise ValueError(
                f"model {getattr(model, 'name', model)} is an RGB model: sequences are upscaled "
                "by Y-channel (multi-frame) models; upscale the frames as images instead"
            )
        if int(frames) < 1:
            raise ValueError(f"frames must be >= 1, got {frames}")
        self.frames = int(frames)
        self._window_functions: dict[int, tf.types.experimental.GenericFunction] = {}

    @staticmethod
    def luma(image: np.ndarray) -> np.ndarray:
        """float32 ``[h, w]`` Y on [0, 255] of uint8 ``[h, w, C]``, as :meth:`window_graph`'s
        target frame gets it (``split_y``)."""
        return split_y(np.asarray(image)[np.newaxis])[0][0, :, :, 0].numpy()

    def window_graph(self, y: tf.Tensor, image: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The upscaling graph of one window.

        Args:
            y: float32 ``[B, k, h, w, 1]``, Y of the window's frames on [0, 255] (:meth:`luma`).
            image: uint8 ``[B, h, w, C]``, the target frame (C = 1, 2, 3 or 4).

        Returns:
            ``(uint8 [B, s h, s w, C], count)``: Y by the model from the k frames, Cb, Cr and
            alpha of the target frame by bicubic, back to RGB, rounded and clipped as
            :meth:`graph`; the int32 count of NaN or infinite values before rounding.
        """
        x = y / 255.0
        if self.frames == 1:
            x = x[:, 0]
        _, others = split_y(image)
        sr = self._assemble(self.model(x, training=False), others, image.shape[-1])
        return rounded_and_counted(sr)

    def window_function(self, channels: int):
        """:meth:`window_graph` as a ``tf.function`` (one trace per channel count)."""
        if channels not in MODES:
            raise ValueError(f"images must have 1, 2, 3 or 4 channels, got {channels}")
        if channels not in self._window_functions:
            specs = [
                tf.TensorSpec([1, self.frames, None, None, 1], tf.float32, name="y"),
                tf.TensorSpec([1, None, None, channels], tf.uint8, name="lr"),
            ]
            fn = tf.function(self.window_graph, input_signature=specs)
            self._window_functions[channels] = fn
        return self._window_functions[channels]

    def window(self, lumas, image: np.ndarray, tile: int = 0) -> np.ndarray:
        """Upscale the target frame of a window, in overlapping tiles (the same grid in every
        frame) when it is larger than ``tile``.

        Args:
            lumas: k float32 ``[h, w]`` (:meth:`luma` of the window's frames, in window order;
                the target frame's among them).
            image: uint8 ``[h, w, C]``, the target frame.
            tile: tile side in input pixels; 0 for no tiling.

        Returns:
            uint8 ``[s h, s w, C]``.

        Raises:
            ValueError: for a wrong number of frames, frames of another size than the target
                (``sr.core.frames.check_same_size``'s ``ImageFolderError``), a target that is
                not ``[h, w, 1|2|3|4]`` uint8 or smaller than 3x3, a negative tile, or an output
                holding NaN or inf (:class:`NonFiniteOutputError`).
        """
        image = np.asarray(image)
        if image.ndim != 3 or image.dtype != np.uint8 or image.shape[-1] not in MODES:
            raise ValueError(
                f"expected a uint8 image [h, w, 1|2|3|4], got {image.dtype} {image.shape}"
            )
        h, w, channels = image.shape
        if len(lumas) != self.frames:
            raise ValueError(f"expected a window of {self.frames} frames, got {len(lumas)}")
        for j, y in enumerate(lumas):
            check_same_size("a window", "its target", image.shape, f"frame {j}", y.shape)
        _check_size(h, w, tile)
        fn = self.window_function(channels)
        y = np.stack([np.asarray(v, np.float32) for v in lumas])[np.newaxis, ..., np.newaxis]
        if self.align is not None:  # whole frames registered once, then tiles of the fusion
            y = self.align(tf.constant(y / 255.0)).numpy() * 255.0
        return self._tiled(
            lambda sy, sx: finite_or_raise(*fn(y[:, :, sy, sx], image[np.newaxis, sy, sx])),
            h, w, tile,
        )  # fmt: skip


def serving_module(model, scale: int) -> tf.Module:
    """A ``tf.Module`` for ``tf.saved_model.save``: ``serve(lr)`` maps uint8 RGB ``[1, H, W, 3]``
    to ``{"sr": uint8 RGB [1, s H, s W, 3]}`` through :meth:`Upscaler.graph` (a Y model: Y by
    the model, chroma by bicubic; an RGB model: R, G, B by the model); ``scale`` is kept as an
    int32 variable."""
    upscaler = Upscaler(model, scale)
    module = tf.Module(name="sr_upscaler")
    module.model = model
    module.scale = tf.Variable(int(scale), trainable=False, dtype=tf.int32, name="scale")

    @tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.uint8, name="lr")])
    def serve(lr):
        return {"sr": upscaler.graph(lr)}

    module.serve = serve
    return module


def read_image(path: str | os.PathLike) -> np.ndarray:
    """Decode an image for upscaling, keeping its alpha channel.

    Returns uint8 ``[H, W, C]``: C = 1 for gray (L, 1-bit, 16-bit gray scaled to 8 bits), 2 for
    gray + alpha (LA), 3 for RGB (also CMYK and palette images), 4 for RGBA (also palette images
    with transparency). The upscaled image is written in the mode of its channel count
    (:data:`MODES`), so L, LA, RGB and RGBA keep their mode and a palette image comes out RGB (or
    RGBA). The EXIF orientation is applied, as in training (``sr.core.images.load_image``).

    Raises:
        ImageFolderError: if the file cannot be decoded, or declares more pixels than
            ``sr.core.images.MAX_PIXELS`` (names the file and the fix).
    """
    return load_image(path, keep_alpha=True)


def write_image(image: np.ndarray, path: str | os.PathLike) -> Path:
    """Write uint8 ``[H, W, C]`` in the mode of :data:`MODES` (format from the suffix; JPEG at
    quality 95, PNG at compression level 1).

    Raises:
        ValueError: for an image with alpha and a JPEG path (JPEG holds no alpha: use .png).
    """
    path = Path(path)
    mode = MODES[image.shape[-1]]
    pixels = image[..., 0] if mode == "L" else image
    is_jpeg = path.suffix.lower() in (".jpg", ".jpeg")
    if is_jpeg and mode in ("LA", "RGBA"):
        raise ValueError(f"cannot write {path}: the image has an alpha channel; use a .png output")
    path.parent.mkdir(parents=True, exist_ok=True)
    # PNG at zlib level 1: faster to write than the default 6, for slightly larger files
    options = {"quality": 95} if is_jpeg else {"compress_level": 1}
    fmt = Image.registered_extensions().get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"cannot write {path}: unknown image suffix; use .png or .jpg")
    tmp = path.with_name(f".{path.name}.tmp")
    Image.fromarray(pixels).save(tmp, format=fmt, **options)  # the mode follows C
    tmp.replace(path)  # never a half-written image under the final name
    return path
