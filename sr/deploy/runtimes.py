"""The runtimes of the exports: a LiteRT interpreter of a ``.tflite`` file, an ONNX Runtime
session and the ``onnx.ModelProto`` of a ``.onnx`` file, each refusing a missing or damaged file
with ``sr.core.runfiles.RunFileError`` (the file, what is wrong, the fix)."""

from __future__ import annotations

from pathlib import Path

from sr.core.quiet import filtered_stderr, log_level
from sr.core.runfiles import RunFileError, describe


def open_tflite(path, threads: int, fix: str):
    """A LiteRT interpreter of ``path``, its tensors allocated (``ai_edge_litert``); its INFO
    line on stderr hidden as ``sr.core.quiet`` hides TensorFlow's.

    Raises:
        RunFileError: if the file is missing, truncated or not a TFLite flatbuffer.
    """
    from ai_edge_litert.interpreter import Interpreter

    path = Path(path)
    if not path.is_file():
        raise RunFileError(path, "missing", fix)
    try:
        interpreter = Interpreter(model_path=str(path), num_threads=threads)
        with filtered_stderr(log_level()):  # LiteRT's "INFO: Created ... XNNPACK delegate"
            interpreter.allocate_tensors()
    except (ValueError, RuntimeError) as e:  # "not a valid Flatbuffer buffer", a bad model
        raise RunFileError(path, describe(e), fix) from e
    return interpreter


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
