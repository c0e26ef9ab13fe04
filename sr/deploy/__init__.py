"""Exports of a trained model for serving (``export``: SavedModel, TFLite float and int8, ONNX,
each written atomically with an ``export.json`` record and checked against Keras before it is
published; ``Exported`` runs one back) and the runtimes that open them (``runtimes``: LiteRT and
ONNX Runtime, refusing a missing or damaged file). The ``[export]`` extra provides the
converters and runtimes."""

from sr.deploy.export import (
    DEFAULT_SIZE,
    FORMATS,
    QUANTIZE,
    ExportCheckError,
    Exported,
    MissingExtraError,
    check_out,
    check_request,
    export_model,
    psnr_float,
    require,
    to_onnx,
    windows,
)

__all__ = [
    "DEFAULT_SIZE",
    "FORMATS",
    "QUANTIZE",
    "ExportCheckError",
    "Exported",
    "MissingExtraError",
    "check_out",
    "check_request",
    "export_model",
    "psnr_float",
    "require",
    "to_onnx",
    "windows",
]
