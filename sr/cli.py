"""Command-line arguments shared by the scripts, and the checks of a command line that need no
TensorFlow; imports no TensorFlow.

Each command of ``scripts/`` builds its parser from this module and checks its arguments with
it (flag values, the run folder or weight file, the input) before it imports TensorFlow, so a
refusal (exit code 2, the message naming the value or path at fault and the fix) costs no
TensorFlow start-up, as ``train.py``'s does (``sr.config``). The modules that use these values
import them from here: ``sr.loading``,
``sr.upscaling`` (:data:`DEFAULT_TILE`, :func:`check_input`), ``sr.deploy`` (:data:`FORMATS`,
:data:`QUANTIZE`, :data:`DEFAULT_SIZE`, :data:`STATE_DICT`, :data:`EXPORT_RECORD`,
:func:`check_export_request`, :func:`export_record_path`) and
``sr.results`` (:data:`BICUBIC`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from sr.core.errors import ImageFolderError
from sr.core.runfiles import (  # noqa: F401  (WEIGHTS, check_file_choices: for the scripts)
    WEIGHTS,
    check_file_choices,
    load_run_config,
)
from sr.core.weightfiles import existing_weight_file, is_weight_file

CHECKPOINT_HELP = (
    "best (default where the run has one: the best validation PSNR), last (the newest "
    "checkpoint, where resume= continues), or ckpt-N"
)
BICUBIC = "bicubic"  # evaluate.py's method without a model
DEFAULT_TILE = 256  # upscale.py --tile: the tile side in LR pixels
FORMATS = ("savedmodel", "tflite", "onnx")  # export.py --format of sr.deploy.export
STATE_DICT = "safetensors"  # the --format of export.py that writes PyTorch weights
QUANTIZE = ("int8",)  # export.py --quantize (TFLite)
DEFAULT_SIZE = 256  # export.py --size: the LR side of a TFLite export
MIN_TFLITE_SIZE = 16  # the smallest LR side of a TFLite export
MIN_OVERLAP = 2  # export.py --overlap: sr.core.degrade.KERNEL_RADIUS, the bicubic chroma's reach
EXPORT_RECORD = "export.json"  # the record of an export, beside its model file(s)


EXIT_REFUSED = 2  # a script's exit code for a command line it refuses (argparse's own, too)


def refused(prog: str, check, args) -> bool:
    """Run ``check(args)``; for a ``ValueError`` (every refusal of this module is one) print
    ``<prog>: error: <message>`` to stderr, as argparse does, and return True: the script then
    exits with :data:`EXIT_REFUSED` before it imports TensorFlow."""
    try:
        check(args)
    except ValueError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return True
    return False


def add_weights_argument(parser) -> None:
    """Add ``--weights {auto,ema,live}``, for ``sr.loading.models.load_model_from_run``, to a
    script's ``argparse`` parser."""
    parser.add_argument(
        "--weights",
        choices=WEIGHTS,
        default="auto",
        help="ema: the run's averaged weights (train.ema); live: its trained weights; auto "
        "(default): the averaged ones when the checkpoint has them",
    )


def add_checkpoint_argument(parser) -> None:
    """Add ``--checkpoint best|last|ckpt-N`` (``sr.loading.checkpoints.find_checkpoint``)."""
    parser.add_argument("--checkpoint", help=CHECKPOINT_HELP)


def check_source(source, checkpoint: str | None = None, weights: str = "auto") -> int:
    """Check, without TensorFlow, a run folder or weight file a script will load
    (``sr.loading.models.load_model``), in the order that loading it checks.

    Args:
        source: a run directory of ``train.py``, or a ``.pth`` / ``.safetensors`` file.
        checkpoint, weights: the script's ``--checkpoint`` and ``--weights``.

    Returns:
        The run's ``data.frames`` (1 for a run of single images and for a weight file).

    Raises:
        ValueError: ``--checkpoint`` or ``--weights`` with a weight file.
        WeightFileError: a weight file that does not exist.
        RunDirError: a folder without a readable ``.hydra/config.yaml`` (naming it).
    """
    if is_weight_file(source):
        check_file_choices(source, checkpoint, weights)
        existing_weight_file(source)
        return 1
    return int(load_run_config(source).data.get("frames", 1))


def check_input(source: Path, sequences: bool) -> None:
    """Refuse an input of ``upscale.py`` that does not exist (or, for sequences, is no folder).

    Args:
        source: the input image or folder.
        sequences: whether a multi-frame run reads it (a folder of frames or of sequences).

    Raises:
        ImageFolderError: naming the input and what to give.
    """
    if sequences and not source.is_dir():
        what = "is a file" if source.exists() else "does not exist"
        raise ImageFolderError(
            f"input {source} {what}: a multi-frame run upscales sequences; give a folder of "
            "frames (one sequence) or a folder with one subfolder of frames per sequence"
        )
    if not sequences and not (source.is_dir() or source.is_file()):
        raise ImageFolderError(f"input {source} does not exist: give an image or a folder")


def export_record_path(folder) -> Path:
    """The ``export.json`` of an export folder of ``scripts/export.py`` (``upscale.py
    --backend tflite|onnx``), checked to exist; read nothing.

    Raises:
        ValueError: for a folder without one (not an export), naming it and the fix.
    """
    meta = Path(folder) / EXPORT_RECORD
    if not meta.is_file():
        raise ValueError(
            f"{folder} is not an export of scripts/export.py ({meta} is missing): "
            "export a run first, python scripts/export.py <run> <folder> --format tflite"
        )
    return meta


def check_export_request(
    fmt: str, quantize: str | None, calibration, size: int, overlap: int | None = None
) -> None:
    """Refuse, before any work, what ``sr.deploy.export_model`` cannot do.

    Args:
        fmt: one of :data:`FORMATS`.
        quantize: None or one of :data:`QUANTIZE` (TFLite only; calibrated on ``calibration``,
            or without it on scikit-image's photos).
        calibration: a folder of images, or None.
        size: the LR side of a TFLite export's windows, at least :data:`MIN_TFLITE_SIZE`.
        overlap: the windows' overlap in LR pixels (None: the export's choice), at least
            :data:`MIN_OVERLAP`, and under half of ``size`` for TFLite.

    Raises:
        ValueError: naming the option at fault and the fix.
    """
    if fmt not in FORMATS:
        raise ValueError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if quantize is not None and quantize not in QUANTIZE:
        raise ValueError(f"--quantize {quantize!r}: choose one of {', '.join(QUANTIZE)}")
    if quantize and fmt != "tflite":
        raise ValueError(
            f"--quantize {quantize} is for --format tflite (LiteRT's int8 kernels); "
            f"--format {fmt} is written in float32"
        )
    if fmt == "tflite" and size < MIN_TFLITE_SIZE:
        raise ValueError(
            f"--size {size}: a TFLite export needs an LR side of at least {MIN_TFLITE_SIZE}"
        )
    if overlap is not None and overlap < MIN_OVERLAP:
        raise ValueError(
            f"--overlap {overlap}: use at least {MIN_OVERLAP} pixels (the bicubic kernel's reach "
            "in upscale.py's tiles), or leave it out for the model's receptive field"
        )
    if overlap is not None and fmt == "tflite" and size <= 2 * overlap:
        raise ValueError(
            f"--overlap {overlap} leaves nothing of a --size {size} window (it overlaps on both "
            f"sides): use --overlap {(size - 1) // 2} or less, or --size {2 * overlap + 32}"
        )
