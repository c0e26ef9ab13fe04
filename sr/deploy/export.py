"""Exports of a trained model, checked against Keras when written, and the runtimes that run them.

Formats (``scripts/export.py --format``):

- ``savedmodel``: TensorFlow SavedModel of the whole upscaling (uint8 RGB in and out,
  :func:`sr.inference.serving_module`), any input size;
- ``tflite``: LiteRT flatbuffer of the network alone, float32 ``[1, S, S, C]`` in [0, 1] to
  ``[1, s S, s S, C]``, S fixed at export (``--size``, 256 by default: a LiteRT model with a
  dynamic input size read back NaN through the interpreter in our trials, so the size is fixed
  and :class:`Exported` tiles any image into S x S windows); ``--quantize int8`` quantises weights
  and activations to int8 (float32 input and output), calibrated on LR tiles of a folder of
  images (:func:`calibration_inputs`);
- ``onnx``: ONNX of the network alone, float32 ``[1, H, W, C]`` in [0, 1] to ``[1, s H, s W, C]``,
  any H, W >= ``sr.core.degrade.MIN_LR_SIZE`` (15), run by ONNX Runtime.

Converters are the maintained ones: Keras 3's ``Model.export(format="onnx")`` (tf2onnx inside)
and ``tf.lite.TFLiteConverter``; SPAN's re-parameterisable convs are fused first
(``sr.models.layers.deployed``). Every export is run once when written, on a calibration
image, and compared with the Keras model (:func:`check`): float exports must agree to
:data:`FLOAT_CHECK_DB` dB PSNR or nothing is written. The export dependencies are the ``export``
extra (:data:`EXTRA`); a missing one is :class:`MissingExtraError`, raised before any work.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
from pathlib import Path

import keras
import numpy as np
import skimage.data
import tensorflow as tf

from sr.cli import (  # noqa: F401  (FORMATS, QUANTIZE: sr.deploy's, owned by sr.cli)
    DEFAULT_SIZE,
    FORMATS,
    QUANTIZE,
    check_export_request,
    export_record_path,
)
from sr.core.forward import forward
from sr.core.images import list_images
from sr.core.runfiles import RunFileError, read_json
from sr.deploy.publish import write_export
from sr.deploy.runtimes import load_onnx, open_onnx, tflite_runner
from sr.evaluation import input_channels, prepare
from sr.inference import Upscaler, default_overlap, read_image, serving_module
from sr.models.layers import deployed

EXTRA = 'pip install -e ".[export]"'
FLOAT_CHECK_DB = 45.0  # minimum PSNR of a float export against Keras on the calibration image
CALIBRATION_TILES = 16  # LR tiles drawn for int8 calibration
# int8 calibration without --calibration: scikit-image's bundled photos (no download), HR
DEFAULT_CALIBRATION = ("astronaut", "chelsea", "coffee", "rocket")
# overlaps tried when a TFLite export's windows miss the check: the smallest reaching it is named
OVERLAPS = (4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384)
# the Python package each format needs at export and at run time (the ``export`` extra)
NEEDS = {
    "tflite": [("ai_edge_litert", "ai-edge-litert")],
    "onnx": [("tf2onnx", "tf2onnx"), ("onnx", "onnx"), ("onnxruntime", "onnxruntime")],
    "savedmodel": [],
}


class MissingExtraError(ImportError):
    """An export dependency is not installed; the message names the install command."""


class ExportCheckError(RuntimeError):
    """An export's output disagrees with the Keras model's (names the PSNR and the threshold)."""


def require(fmt: str) -> None:
    """Import the packages that ``fmt`` needs, or raise :class:`MissingExtraError` naming them
    and :data:`EXTRA`."""
    for module, package in NEEDS[fmt]:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise MissingExtraError(
                f"{fmt} exports need the {package} package, which is not installed: {EXTRA} "
                "(the export extra)"
            ) from e


def psnr_float(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two float arrays of one shape on [0, 1] (peak 1); inf when equal.

    Raises:
        ExportCheckError: if the shapes differ (never broadcast: an export's wrong shape fails).
    """
    if np.shape(a) != np.shape(b):
        raise ExportCheckError(f"outputs of shapes {np.shape(a)} and {np.shape(b)} differ")
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def fit(x: np.ndarray, size: int) -> np.ndarray:
    """``[h, w, C]`` cropped at the centre, or mirrored at the bottom and right, to
    ``[size, size, C]``."""
    h, w = x.shape[:2]
    top, left = max(0, (h - size) // 2), max(0, (w - size) // 2)
    x = x[top : top + size, left : left + size]
    pad = ((0, size - x.shape[0]), (0, size - x.shape[1]), (0, 0))
    return np.pad(x, pad, mode="symmetric")


def calibration_inputs(folder, scale: int, channels: int, size: int, count: int) -> list:
    """LR tiles for checking and calibrating an export: float32 ``[1, size, size, C]`` in [0, 1].

    Each image of ``folder`` (name order, the first ``count``) is taken as HR and brought to LR
    by the evaluation protocol (``sr.evaluation.prepare``: MATLAB bicubic from RGB; C = 1: its
    Y, BT.601; C = 3: RGB), then cropped at the centre (or mirrored) to ``size``. Without a
    folder, scikit-image's bundled photos (:data:`DEFAULT_CALIBRATION`, the first ``count``:
    astronaut first) are used, so the product needs no other data.

    Raises:
        ImageFolderError: if the folder is missing or has no PNG/JPEG image.
    """
    images = (
        [read_image(p) for p in list_images(folder)[:count]]
        if folder
        else [
            np.asarray(getattr(skimage.data, n)(), np.uint8) for n in DEFAULT_CALIBRATION[:count]
        ]
    )
    tiles = []
    for image in images:
        image = image[..., :3] if image.shape[-1] in (3, 4) else image[..., :1]
        item = prepare(image, scale)
        if channels == 1:
            lr = item.lr_y[..., np.newaxis]
        else:
            lr = item.lr if item.lr.shape[-1] == 3 else np.repeat(item.lr[..., :1], 3, -1)
        tiles.append((fit(lr, size) / 255.0).astype(np.float32)[np.newaxis])
    return tiles


def fixed_input(model: keras.Model, size: int | None) -> keras.Model:
    """``model`` on an input ``[1, size, size, C]`` (``size`` None: any height and width; the
    same weights)."""
    inputs = keras.Input((size, size, input_channels(model)), batch_size=1, name="lr")
    return keras.Model(inputs, model(inputs), name=f"{model.name}_{size or 'any'}")


def to_tflite(model: keras.Model, path: Path, calibration=None) -> None:
    """Convert to a LiteRT flatbuffer of input ``[1, -1, -1, C]`` (any height and width: the
    runtime's ``resize_tensor_input`` sets them, ``sr.deploy.runtimes.tflite_runner``);
    ``calibration`` (a list of float32 ``[1, S, S, C]`` tiles) makes it int8 (weights and
    activations; float32 input and output), else float32.

    Height and width are left to the runtime so that an image side shorter than the export's
    window runs at its own size, padded with zeros at its edge by every convolution as in Keras
    (a graph converted at a fixed size folds sizes in: a resize to the input's size).

    The SavedModel the converter reads is exported with a batch of 1, so that no batch is left
    to compute at run time: with the dynamic batch ``Model.export`` writes
    otherwise, a reshape to a size computed at run time (Keras's nearest ``UpSampling2D``, a
    ``tf.repeat``, as a nearest x2 upsampler was before ``sr.models.layers.UpSampling2D`` made it
    ``depth_to_space``) left the converter a tensor of unknown batch and height, whose 3x3 conv
    could not become LiteRT's ``CONV_2D`` (``ConverterError: 'tf.Conv2D' op is neither a custom
    op nor a flex op``)."""
    saved = path.parent / "saved_model_for_tflite"  # variables frozen by the SavedModel path
    spec = tf.TensorSpec([1, None, None, input_channels(model)], tf.float32, name="lr")
    fixed_input(model, None).export(
        str(saved), format="tf_saved_model", verbose=False, input_signature=[spec]
    )
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved))
    if calibration is not None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([x] for x in calibration)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.float32
        converter.inference_output_type = tf.float32
    path.write_bytes(converter.convert())
    shutil.rmtree(saved)


ONNX_ATTEMPTS = 3


def to_onnx(model: keras.Model, path: Path) -> None:
    """Convert to ONNX with a dynamic batch, height and width (Keras 3's ``Model.export``).

    tf2onnx 1.17's graph optimisers now and then drop the final ``Squeeze`` of a one-channel
    model's output (the NCHW -> NHWC transpose it writes as Reshape + Squeeze), leaving a 5-D
    ``[1, B, sH, sW, 1]`` output; which conversions do so varies from run to run (5 of about 120
    here). The file's declared output rank shows it: a conversion whose rank is not
    the model's is done again, up to :data:`ONNX_ATTEMPTS` times.

    Raises:
        ExportCheckError: if every attempt declares another output rank.
    """
    want = len(model.outputs[0].shape)
    for _ in range(ONNX_ATTEMPTS):
        model.export(str(path), format="onnx", verbose=False)
        got = onnx_output_rank(path)
        if got == want:
            return
    raise ExportCheckError(
        f"tf2onnx wrote an ONNX output of rank {got} for a model of rank {want}, "
        f"{ONNX_ATTEMPTS} times; nothing was written (report the tf2onnx version)"
    )


def onnx_output_rank(path: Path) -> int:
    """The rank that an ONNX file declares for its first output."""
    fix = "export the run again (tf2onnx wrote a file that does not parse)"
    graph = load_onnx(path, fix).graph
    return len(graph.output[0].type.tensor_type.shape.dim)


def check(keras_model, exported, image: np.ndarray) -> float:
    """PSNR (dB, peak 1) of the exported model's output against the Keras model's on ``image``,
    float32 ``[1, h, w, C]`` in [0, 1]."""
    expected = forward(keras_model)(tf.constant(image)).numpy()
    return psnr_float(exported(image, training=False).numpy(), expected)


def export_model(
    model: keras.Model,
    out,
    fmt: str,
    scale: int,
    size: int = DEFAULT_SIZE,
    quantize: str | None = None,
    calibration=None,
    source: dict | None = None,
    overlap: int | None = None,
) -> dict:
    """Write one export of ``model`` into the new folder ``out``, check it, describe it.

    The folder holds the model (``saved_model.pb`` and ``variables/``, ``model.tflite`` or
    ``model.onnx``) and ``export.json`` (the returned record: format, file, scale, channels,
    input and output, quantisation, tile overlap, the check, and ``source``). It is written
    beside ``out`` and renamed when complete: a failed export leaves nothing.

    Args:
        model: the Keras model, float32 ``[B, h, w, C]`` in [0, 1] to ``[B, s h, s w, C]``.
        out: the folder to create (absent or empty).
        fmt: one of :data:`FORMATS`.
        scale: s.
        size: the LR side S of a TFLite export's windows (ignored by the others).
        quantize: None or ``int8`` (TFLite only).
        calibration: a folder of images (HR) for the check and for int8 calibration
            (:func:`calibration_inputs`); None: scikit-image's photos
            (:data:`DEFAULT_CALIBRATION`; the check on its astronaut).
        source: what the model is (run, checkpoint, step, weights), stored as given.
        overlap: LR pixels by which a TFLite export's windows (and upscale.py's tiles) overlap;
            None: :func:`window_overlap`.

    Returns:
        The ``export.json`` record; ``check.psnr_db`` is the PSNR of the export against Keras
        (a TFLite export: its windows on an image larger than one, :func:`check_windows`).

    Raises:
        MissingExtraError: if the format's packages are absent (before any work).
        ValueError: for an unknown format, a quantisation the format does not take, an overlap
            that leaves a TFLite window nothing, or an ``out`` that is not empty.
        ExportCheckError: if a float export is below :data:`FLOAT_CHECK_DB` dB against Keras,
            or a TFLite export's windows below it against its own whole-image output (int8):
            naming the overlap that reaches it.
    """
    check_export_request(fmt, quantize, calibration, size, overlap)
    require(fmt)

    def write(folder: Path) -> dict:
        record = _write(deployed(model), folder, fmt, scale, size, quantize, calibration, overlap)
        return record | {"source": source or {}}

    return write_export(out, write)


def _write(model, tmp: Path, fmt: str, scale, size, quantize, calibration, overlap) -> dict:
    """Convert into ``tmp``, run the check, return the record (without ``source``)."""
    channels = input_channels(model)
    model(np.zeros((1, 16, 16, channels), np.float32), training=False)  # Keras exports need a call
    count = CALIBRATION_TILES if quantize else 1
    side = size if fmt == "tflite" else DEFAULT_SIZE
    tiles = calibration_inputs(calibration, scale, channels, side, count)
    record = {"format": fmt, "scale": int(scale), "channels": channels, "quantize": quantize}
    if fmt == "savedmodel":
        module = serving_module(model, scale)
        tf.saved_model.save(module, str(tmp), signatures={"serving_default": module.serve})
        record.update(file=".", input="uint8 RGB [1, H, W, 3]", output="uint8 RGB [1, sH, sW, 3]")
        psnr = check_saved(tmp, Upscaler(model, scale), tiles[0])
    else:
        psnr = _write_network(model, tmp, record, tiles, overlap, calibration)
    if fmt == "tflite":
        return record
    record["check"] = {"psnr_db": round(psnr, 2), "threshold_db": FLOAT_CHECK_DB}
    if not psnr >= FLOAT_CHECK_DB:
        raise ExportCheckError(
            f"the {fmt} export differs from the Keras model: {psnr:.1f} dB PSNR on the "
            f"calibration image, below {FLOAT_CHECK_DB:.0f} dB; nothing was written"
        )
    return record


def check_saved(folder: Path, upscaler, tile: np.ndarray) -> float:
    """PSNR (dB) of a written SavedModel's ``serving_default`` against ``upscaler.graph`` on the
    calibration tile as an 8-bit RGB image (a Y tile as gray, replicated)."""
    rgb = np.round(tile[0] * 255.0).astype(np.uint8)
    rgb = tf.constant(np.repeat(rgb, 3, axis=-1) if rgb.shape[-1] == 1 else rgb)[tf.newaxis]
    served = tf.saved_model.load(str(folder)).signatures["serving_default"](lr=rgb)["sr"]
    expected = upscaler.graph(rgb)
    return psnr_float(served.numpy() / 255.0, expected.numpy() / 255.0)


def window_overlap(fmt: str, size: int, bound: int, overlap: int | None) -> int:
    """The overlap of an export's windows and tiles: ``overlap`` when given; else ``bound``
    (:func:`sr.inference.default_overlap`, the receptive field: exact) where it leaves a TFLite
    window of ``size`` pixels something to keep, else ``size // 4`` (the middle half of each
    side kept), which :func:`check_windows` then measures. RealESRGAN_x4plus's bound is 351
    pixels, more than a 256-pixel window holds; a trained model's output depends on far less
    (Real-ESRGAN's own tiles overlap by 10 pixels)."""
    if overlap is not None:
        return int(overlap)
    return bound if fmt != "tflite" or size > 2 * bound else size // 4


def _write_network(model, tmp: Path, record: dict, tiles, overlap, calibration) -> float:
    """Write the TFLite or ONNX network into ``tmp`` and complete ``record``; the ONNX check's
    PSNR (a TFLite export is checked, its ``check`` recorded, by :func:`check_windows`)."""
    fmt, scale, channels = record["format"], record["scale"], record["channels"]
    size, quantize = tiles[0].shape[1], record["quantize"]
    bound = default_overlap(model)
    overlap = window_overlap(fmt, size, bound, overlap)
    name = "model.tflite" if fmt == "tflite" else "model.onnx"
    if fmt == "tflite":
        to_tflite(model, tmp / name, tiles if quantize else None)
        shapes = [f"[1, {n}, {n}, {channels}]" for n in (size, scale * size)]
    else:
        to_onnx(model, tmp / name)
        shapes = [f"[1, H, W, {channels}]", f"[1, {scale}H, {scale}W, {channels}]"]
    record.update(
        file=name,
        input=f"float32 {shapes[0]} in [0, 1]",
        output=f"float32 {shapes[1]}",
        size=size if fmt == "tflite" else None,
        overlap=overlap,
        receptive_overlap=bound,
        bytes=(tmp / name).stat().st_size,
    )
    if fmt == "onnx":
        return check(model, Exported(tmp, record), tiles[0])
    side = size + (size - 2 * overlap) // 2 + 3  # two windows a side, not a multiple of one
    image = calibration_inputs(calibration, scale, channels, side, 1)[0]
    record["check"] = check_windows(model, Exported(tmp, record), image)
    return record["check"]["psnr_db"]


def check_windows(model, exported, image: np.ndarray) -> dict:
    """Check a TFLite export's windows on ``image`` (float32 ``[1, h, w, C]``, larger than a
    window: the windows overlap and meet at seams) against the whole image: float, against the
    Keras model's output; int8, against the export's own output on the whole image (its
    quantisation error is reported against Keras, not judged).

    Returns:
        ``export.json``'s ``check``: ``psnr_db`` (against Keras), ``threshold_db``, the
        ``image`` shape; int8 also ``windows_psnr_db`` (against the whole image, judged).

    Raises:
        ExportCheckError: below :data:`FLOAT_CHECK_DB`, naming the PSNR, and the smallest
            overlap of :data:`OVERLAPS` that reaches it, or a larger ``--size``.
    """
    expected = forward(model)(tf.constant(image)).numpy()
    quantized = exported.record["quantize"] is not None
    reference = exported.whole(image) if quantized else expected
    tiled = exported.run(image)
    psnr = psnr_float(tiled, reference)
    result = {"psnr_db": round(psnr_float(tiled, expected), 2),
              "threshold_db": None if quantized else FLOAT_CHECK_DB,
              "image": f"[1, {image.shape[1]}, {image.shape[2]}, {image.shape[3]}]"}  # fmt: skip
    if quantized:
        result |= {"windows_psnr_db": round(psnr, 2), "windows_threshold_db": FLOAT_CHECK_DB}
    if not psnr >= FLOAT_CHECK_DB:
        raise ExportCheckError(_overlap_advice(exported, image, reference, psnr))
    return result


def _overlap_advice(exported, image: np.ndarray, reference: np.ndarray, psnr: float) -> str:
    """The refusal of :func:`check_windows`: the PSNR, and the smallest overlap of
    :data:`OVERLAPS` (below half the window) whose windows reach :data:`FLOAT_CHECK_DB`."""
    size, tried = exported.input_size, exported.overlap
    bound = exported.record["receptive_overlap"]
    found = None
    for overlap in (o for o in OVERLAPS if tried < o and 2 * o < size):
        exported.overlap = overlap
        found = (overlap, psnr_float(exported.run(image), reference))
        if found[1] >= FLOAT_CHECK_DB:
            break
        found = None
    exported.overlap = tried
    what = "its whole-image output" if exported.record["quantize"] else "the Keras model"
    fix = (
        f"--overlap {found[0]} reaches {found[1]:.1f} dB"
        if found
        else f"no overlap that fits --size {size} reaches it: use a larger --size (the "
        f"receptive field's overlap, {bound}, fits --size {2 * bound + 32})"
    )
    return (
        f"the tflite export's {size}-pixel windows, overlapping by {tried} pixels, differ from "
        f"{what}: {psnr:.1f} dB PSNR on the check's image {list(image.shape)}, below "
        f"{FLOAT_CHECK_DB:.0f} dB; {fix}; nothing was written"
    )


def windows(length: int, size: int, margin: int) -> list[tuple[int, int, int]]:
    """Windows of exactly ``size`` pixels over ``length`` (``length`` >= ``size``):
    ``(start, keep_from, keep_to)``, each window's output kept over input pixels
    ``[keep_from, keep_to)``, which tile ``[0, length)``; a kept pixel is at least ``margin``
    from its window's edge unless that edge is the image's. The last window is shifted inward
    so that it ends at the image's edge.

    Raises:
        ValueError: if ``size <= 2 margin`` (no pixel kept).
    """
    if length <= size:
        return [(0, 0, length)]
    step = size - 2 * margin
    if step <= 0:
        raise ValueError(f"a window of {size} pixels keeps nothing with a margin of {margin}")
    starts = list(range(0, length - size, step)) + [length - size]
    out, lo = [], 0
    for k, a in enumerate(starts):
        hi = length if k == len(starts) - 1 else a + size - margin
        out.append((a, lo, hi))  # lo, the previous hi, is >= a + margin: steps <= size - 2 margin
        lo = hi
    return out


RECORD_KEYS = ("format", "file", "scale", "channels")  # export.json, as read back (+ overlap)


def read_record(folder) -> dict:
    """The ``export.json`` of an export folder (``sr.core.runfiles.read_json``).

    Raises:
        ValueError: for a folder without ``export.json`` (not an export).
        RunFileError: for an ``export.json`` that is truncated, malformed or lacks a key of
            :data:`RECORD_KEYS` (and ``overlap``, for a TFLite or ONNX export).
    """
    meta = export_record_path(folder)
    fix = "export the run again into a new folder, python scripts/export.py <run> <folder>"
    record = read_json(meta, fix, keys=RECORD_KEYS)
    if record["format"] in ("tflite", "onnx") and "overlap" not in record:
        raise RunFileError(meta, "it lacks overlap", fix)
    return record


class Exported:
    """An export folder's network as a callable like the Keras model: ``model(x)`` maps float32
    ``[1, h, w, C]`` in [0, 1] to ``[1, s h, s w, C]``, through LiteRT's interpreter or ONNX
    Runtime on all CPU cores. It works eagerly and inside a ``tf.function``
    (``tf.numpy_function``), so ``sr.inference.Upscaler`` and ``sr.evaluation`` take it as a
    model.

    A TFLite export runs in windows of S x S (``size``, recorded at export) that overlap by
    ``overlap`` pixels (recorded at export: the receptive field, or ``--overlap``; the last
    windows shifted inward). A side shorter than S is run at its own length (the interpreter
    resized, ``sr.deploy.runtimes.tflite_runner``), never mirrored to S: so the convolutions pad
    with zeros at every edge of the image, as in Keras.

    Args:
        folder: an export folder of ``scripts/export.py`` (``export.json``).
        record: its record, if already read.
        threads: CPU threads of the runtime (default: all cores).

    Raises:
        ValueError: for a folder without ``export.json``, or a SavedModel export (run it with
            ``tf.saved_model.load``: its signature takes uint8 RGB).
        RunFileError: for a missing, truncated or corrupt ``export.json``, ``model.tflite`` or
            ``model.onnx`` (names the file; the fix: export again), ``sr.core.runfiles``.
        MissingExtraError: if the runtime is not installed.
    """

    def __init__(self, folder, record: dict | None = None, threads: int | None = None):
        folder = Path(folder)
        record = record or read_record(folder)
        if record["format"] not in ("tflite", "onnx"):
            raise ValueError(f"{folder} is a {record['format']} export: no runtime backend for it")
        require(record["format"])
        self.record, self.folder = record, folder
        self.scale, self.channels = int(record["scale"]), int(record["channels"])
        self.overlap = int(record["overlap"])
        # the fixed input side of a TFLite export: sr.inference.Upscaler's tiles are never
        # smaller (None: any size)
        self.input_size = int(record["size"]) if record.get("size") else None
        self.name = f"{record['format']}:{folder.name}"
        threads = threads or os.cpu_count() or 1
        self._run = self._open(folder / record["file"], threads)

    def _open(self, path: Path, threads: int):
        fmt, run = self.record["format"], self.record.get("source", {}).get("run", "<run>")
        fix = (
            f"the export in {self.folder} is damaged: export the run again into a new folder, "
            f"python scripts/export.py {run} <new folder> --format {fmt}"
        )
        if self.record["format"] == "onnx":
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            # the graph rewrites that do not depend on the CPU (ORT_ENABLE_ALL adds a layout
            # for its vector width); as fast here (docs/performance.md)
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
            session = open_onnx(path, options, fix)
            name = session.get_inputs()[0].name
            return lambda x: session.run(None, {name: x})[0]
        size = int(self.record["size"])
        return tflite_runner(path, threads, fix, (1, size, size, self.channels))

    def run(self, x: np.ndarray) -> np.ndarray:
        """float32 ``[1, h, w, C]`` -> ``[1, s h, s w, C]`` (numpy).

        Raises:
            RuntimeError: if the runtime returns another shape (a converter or runtime fault).
        """
        x = np.ascontiguousarray(x, np.float32)
        size = self.record.get("size")
        if not size:
            return self._checked(self._run(x), x.shape)
        h, w, s = x.shape[1], x.shape[2], self.scale
        wh, ww = min(h, size), min(w, size)  # a shorter side: windows of its own length
        out = np.empty((1, s * h, s * w, x.shape[-1]), np.float32)
        for y0, ylo, yhi in windows(h, wh, self.overlap):
            for x0, xlo, xhi in windows(w, ww, self.overlap):
                window = np.ascontiguousarray(x[:, y0 : y0 + wh, x0 : x0 + ww])
                part = self._checked(self._run(window), window.shape)
                out[:, s * ylo : s * yhi, s * xlo : s * xhi] = part[
                    :, s * (ylo - y0) : s * (yhi - y0), s * (xlo - x0) : s * (xhi - x0)
                ]
        return out

    def whole(self, x: np.ndarray) -> np.ndarray:
        """float32 ``[1, h, w, C]`` -> ``[1, s h, s w, C]`` in one run of the whole input (a
        TFLite export's interpreter resized to it), no windows: the reference of
        :func:`check_windows` for an int8 export."""
        x = np.ascontiguousarray(x, np.float32)
        return self._checked(self._run(x), x.shape)

    def _checked(self, y: np.ndarray, shape) -> np.ndarray:
        expected = (shape[0], self.scale * shape[1], self.scale * shape[2], self.channels)
        if y.shape != expected:
            raise RuntimeError(
                f"{self.name}: the runtime returned shape {y.shape} for an input of "
                f"{tuple(shape)}, not {expected}; re-export with scripts/export.py, and report "
                "the onnxruntime / ai-edge-litert versions and CPU"
            )
        return y

    def __call__(self, x, training: bool = False):
        y = tf.numpy_function(self.run, [x], tf.float32, stateful=False)
        if isinstance(x, tf.Tensor) and x.shape.rank == 4:
            h, w = x.shape[1], x.shape[2]
            s = self.scale
            y.set_shape(
                [
                    x.shape[0],
                    None if h is None else s * h,
                    None if w is None else s * w,
                    self.channels,
                ]
            )
        return y
