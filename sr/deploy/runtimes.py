"""The runtimes of the exports: a LiteRT interpreter of a ``.tflite`` file, an ONNX Runtime
session and the ``onnx.ModelProto`` of a ``.onnx`` file, each refusing a missing or damaged file
with ``sr.core.runfiles.RunFileError`` (the file, what is wrong, the fix)."""

from __future__ import annotations

from pathlib import Path

from sr.core.quiet import filtered_stderr, log_level
from sr.core.runfiles import RunFileError, describe


def open_tflite(path, threads: int, fix: str, shape: tuple[int, ...] | None = None):
    """A LiteRT interpreter of ``path``, its input resized to ``shape`` (None: the file's) and
    its tensors allocated (``ai_edge_litert``); its INFO line on stderr hidden as
    ``sr.core.quiet`` hides TensorFlow's.

    Raises:
        RunFileError: if the file is missing, truncated, not a TFLite flatbuffer, or does not
            run at ``shape``.
    """
    from ai_edge_litert.interpreter import Interpreter

    path = Path(path)
    if not path.is_file():
        raise RunFileError(path, "missing", fix)
    try:
        interpreter = Interpreter(model_path=str(path), num_threads=threads)
    except (ValueError, RuntimeError) as e:  # "not a valid Flatbuffer buffer", a bad model
        raise RunFileError(path, describe(e), fix) from e
    try:
        if shape is not None:  # before allocating: a dynamic input's default is [1, 1, 1, C]
            index = interpreter.get_input_details()[0]["index"]
            interpreter.resize_tensor_input(index, list(shape), strict=False)
        with filtered_stderr(log_level()):  # LiteRT's "INFO: Created ... XNNPACK delegate"
            interpreter.allocate_tensors()
    except (ValueError, RuntimeError) as e:
        reason = (
            describe(e) if shape is None else f"it does not run at {list(shape)}: {describe(e)}"
        )
        raise RunFileError(path, reason, fix) from e
    return interpreter


def tflite_runner(path, threads: int, fix: str, window: tuple[int, ...]):
    """``run(x)``: the output of the TFLite model of ``path`` on float32 ``x`` (NumPy,
    ``[1, h, w, C]``), its interpreter resized to ``x``'s shape (LiteRT's
    ``resize_tensor_input``). ``window`` (the export's ``[1, S, S, C]``) keeps its interpreter;
    one more is kept for the last other shape, so that the tiles of one image allocate once.

    A TFLite export of ``sr.deploy.export`` takes any height and width (its signature is
    ``[1, -1, -1, C]``; older exports were converted at ``[1, S, S, C]`` and are resized too,
    which works where no size was folded into the graph). A side shorter than S runs at its own
    size, so the convolutions pad with zeros at the image's edge as Keras does; mirroring it to S,
    as before, changed the rows near that edge (up to 195 levels for a trained model, issue 46).

    Raises:
        RunFileError: if the file is missing, damaged, or cannot run at the shape asked.
    """
    kept: dict[tuple[int, ...], object] = {}

    def interpreter(shape: tuple[int, ...]):
        if shape in kept:
            return kept[shape]
        opened = open_tflite(path, threads, fix, shape)
        for other in [k for k in kept if k != tuple(window)]:
            del kept[other]
        kept[shape] = opened
        return opened

    def run(x):
        it = interpreter(tuple(x.shape))
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        return it.get_tensor(it.get_output_details()[0]["index"]).copy()

    interpreter(tuple(window))  # a damaged file is refused when opened
    return run


def open_onnx(path, options, fix: str):
    """An ONNX Runtime session of ``path`` on the CPU with ``options``
    (``onnxruntime.SessionOptions``).

    Raises:
        RunFileError: if the file is missing, truncated or not a valid ONNX model.
    """
    import onnxruntime as ort

    path = Path(path)
    if not path.is_file():
        raise RunFileError(path, "missing", fix)
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # InvalidProtobuf, Fail, InvalidGraph: pybind classes, no common base
        raise RunFileError(path, describe(e), fix) from e


def load_onnx(path, fix: str):
    """The ``onnx.ModelProto`` of ``path``, without external data.

    Raises:
        RunFileError: if the file is missing or does not parse.
    """
    import onnx

    path = Path(path)
    if not path.is_file():
        raise RunFileError(path, "missing", fix)
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as e:  # google.protobuf's DecodeError and onnx's own
        raise RunFileError(path, describe(e), fix) from e
