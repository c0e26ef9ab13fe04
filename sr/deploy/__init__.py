"""Exports of a trained model for serving (``export``: SavedModel, TFLite float and int8, ONNX,
each checked against Keras before it is published; ``Exported`` runs one back; ``pytorch``: the
reference state dict as ``.safetensors``), the one writer of an export folder (``publish``:
staged beside it with its ``export.json`` record and renamed when complete, so that a failed
export leaves nothing) and the runtimes that open them (``runtimes``: LiteRT and ONNX Runtime,
refusing a missing or damaged file). The ``[export]`` extra provides the converters and
runtimes."""

from sr.deploy.export import (
    DEFAULT_SIZE,
    FORMATS,
    QUANTIZE,
    ExportCheckError,
    Exported,
    MissingExtraError,
    export_model,
    psnr_float,
    require,
    to_onnx,
    windows,
)
from sr.deploy.publish import check_out, write_export

__all__ = [
    "DEFAULT_SIZE",
    "FORMATS",
    "QUANTIZE",
    "ExportCheckError",
    "Exported",
    "MissingExtraError",
    "check_out",
    "export_model",
    "psnr_float",
    "require",
    "to_onnx",
    "windows",
    "write_export",
]
