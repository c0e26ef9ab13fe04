"""Export a trained run or a PyTorch weight file: a TensorFlow SavedModel, a TFLite (LiteRT)
model, an ONNX model, or PyTorch weights (``.safetensors``).

    python scripts/export.py <run dir> <output folder> [--format savedmodel|tflite|onnx]
        [--size 256] [--overlap N] [--quantize int8] [--calibration DIR]
        [--checkpoint best|last|ckpt-N] [--weights auto|ema|live]
    python scripts/export.py RealESRGAN_x4plus.pth <output folder> --format tflite|onnx|...
    python scripts/export.py <run dir> <output folder> --format safetensors

A ``.pth`` / ``.safetensors`` file in place of the run is read as PyTorch weights (its
architecture, hyperparameters and parameter count printed; docs/pytorch.md). ``--format
safetensors`` writes ``model.safetensors``, the reference architecture's state dict, which
BasicSR's class (``strict=True``) and spandrel load, checked by reading it back
(``sr.deploy.pytorch``).

``--format savedmodel`` (the default) writes the whole upscaling: the ``serving_default``
signature takes ``lr``: uint8 RGB ``[1, H, W, 3]`` (H, W >= 3) and returns ``sr``: uint8 RGB
``[1, s H, s W, 3]`` (s = the run's scale): Y (BT.601) through the model, Cb and Cr by the
project's bicubic, back to RGB, rounded; for an RGB run (``data.channels=rgb``) R, G and B
through the model, rounded. It is the graph of ``scripts/upscale.py`` (``sr.inference.Upscaler``)
untiled, so both give the same pixels. Load it back with::

    m = tf.saved_model.load("<output folder>")
    sr = m.signatures["serving_default"](lr=tf.constant(rgb[None]))["sr"][0].numpy()

``--format tflite`` and ``--format onnx`` write the network alone (``model.tflite``,
``model.onnx``), float32 ``[1, h, w, C]`` in [0, 1] to ``[1, s h, s w, C]``, C = 1 (Y) or 3
(an RGB run); the colour conversion stays in ``scripts/upscale.py --backend tflite|onnx``, which
runs them with the LiteRT interpreter or ONNX Runtime. TFLite takes a fixed input, ``--size`` x
``--size`` LR pixels (256 by default; upscale.py tiles any image into it, overlapping by
``--overlap``: the model's receptive field where it fits the window, else a quarter of it,
checked), ONNX any h, w. ``--quantize int8`` (TFLite only) makes weights and activations int8,
its ranges measured on LR tiles of the images of ``--calibration DIR`` taken as HR (without it,
scikit-image's photos). Needs the export extra: ``pip
install -e ".[export]"``. Details and measured agreement: docs/deployment.md.

Every export is checked when written: run on a calibration image (the first of
``--calibration DIR``, else scikit-image's astronaut) and compared with the Keras model; a float
export below 45 dB PSNR fails and leaves nothing. A TFLite export is checked in its windows on an
image larger than one against the whole image (int8: against its own whole-image output); below
45 dB it fails naming the ``--overlap`` that reaches 45 dB. ``export.json`` in the folder records
the format, input and output, scale, channels, quantisation, the check's PSNR and the source: which
weights (``<model>+ema`` for averaged ones), step, run and checkpoint. ``--checkpoint`` is
``best`` (the default where the run has ``checkpoints/best``: the best validation PSNR so far),
``last`` or ``ckpt-N``; ``--weights live`` exports the trained weights of a ``train.ema`` run.

A multi-frame run (``data=sequence`` with ``data.frames`` > 1) is refused: its model reads a
window of k frames of a sequence, which these one-image exports cannot give; upscale sequences
with ``scripts/upscale.py <run> <folder of sequences> <output folder>``.
"""

from __future__ import annotations

import argparse
import sys

import sr.config  # noqa: F401  (registers the ${sr_root:} resolver of run configs; no TensorFlow)
from sr.cli import (
    DEFAULT_SIZE,
    EXIT_REFUSED,
    FORMATS,
    QUANTIZE,
    STATE_DICT,
    add_checkpoint_argument,
    add_weights_argument,
    check_export_request,
    check_source,
    refused,
)
from sr.core.errors import RunDirError
from sr.core.quiet import quiet_tensorflow
from sr.core.runfiles import load_run_config
from sr.core.weightfiles import is_weight_file


def export(
    run_dir,
    out_dir,
    checkpoint: str | None = None,
    weights: str = "auto",
    fmt: str = "savedmodel",
    size: int = DEFAULT_SIZE,
    quantize: str | None = None,
    calibration: str | None = None,
    overlap: int | None = None,
) -> dict:
    """Write and check one export of a run's checkpoint (``sr.deploy.export_model``).

    Args:
        run_dir: run directory of ``train.py``.
        out_dir: folder to write (must not exist, or be empty).
        checkpoint: ``best``, ``last`` or ``ckpt-N``; None: ``best`` where the run has one,
            else ``last`` (``sr.loading.checkpoints.find_checkpoint``).
        weights: ``auto``, ``ema`` or ``live`` (``sr.loading.models.load_model_from_run``).
        fmt, size, quantize, calibration, overlap: as ``sr.deploy.export_model``.

    Returns:
        The ``export.json`` record (``source``: label, step, run, checkpoint).

    Raises:
        RunDirError: for a run without config or checkpoint, or without the one chosen.
        MissingExtraError: if the format's packages are not installed (before any work).
        ExportCheckError: if a float export disagrees with Keras (below 45 dB).
        ValueError: for an ``out_dir`` that is not empty, a multi-frame run (``data.frames`` >
            1), or options that do not go together (``--quantize`` without tflite, an
            ``--overlap`` of half ``--size`` or more).
    """
    from sr.deploy import check_out, export_model, require
    from sr.loading.models import load_model

    if fmt == STATE_DICT:
        return export_weights(run_dir, out_dir, checkpoint, weights, quantize)
    check_export_request(fmt, quantize, calibration, size, overlap)
    require(fmt)
    check_out(out_dir)  # a non-empty output is refused now, before loading anything
    file = is_weight_file(run_dir)
    frames = 1 if file else int(load_run_config(run_dir).data.get("frames", 1))
    if frames > 1:
        raise ValueError(
            f"run {run_dir} is a multi-frame run (data.frames={frames}): its model reads a window "
            f"of {frames} frames of a sequence, and these exports take one image, so it is not "
            f"exported; upscale sequences with scripts/upscale.py {run_dir} <folder of sequences> "
            "<output folder>"
        )
    model, cfg, step = load_model(run_dir, checkpoint, weights, say=print)
    scale = int(cfg.data.scale)
    source = describe_source(model, step, run_dir)
    return export_model(model, out_dir, fmt, scale, size, quantize, calibration, source, overlap)


def describe_source(model, step: int, run_dir) -> dict:
    """``export.json``'s ``source``: the weights, step, run (or weight file) and checkpoint."""
    from sr.loading.models import model_label

    key = "file" if is_weight_file(run_dir) else "run"
    return {"weights": model_label(model), "step": int(step), key: str(run_dir),
            "checkpoint": str(model.sr_checkpoint)}  # fmt: skip


def export_weights(run_dir, out_dir, checkpoint, weights, quantize) -> dict:
    """``--format safetensors``: the model as the reference's PyTorch state dict."""
    from sr.deploy import check_out
    from sr.deploy.pytorch import export_state_dict
    from sr.loading.models import load_model

    check_weights_request(quantize)
    check_out(out_dir)
    model, cfg, step = load_model(run_dir, checkpoint, weights, say=print)
    return export_state_dict(model, cfg, out_dir, describe_source(model, step, run_dir))


def check_weights_request(quantize: str | None) -> None:
    """Refuse ``--quantize`` with ``--format safetensors`` (ValueError)."""
    if quantize:
        raise ValueError("--quantize is for --format tflite; a state dict is written in float32")


def check_args(args: argparse.Namespace) -> None:
    """The checks of :func:`export` that need no TensorFlow: the options, the run or file.

    Raises:
        ValueError (RunDirError, WeightFileError): naming the option or path and the fix.
    """
    if args.fmt == STATE_DICT:
        check_weights_request(args.quantize)
    else:
        check_export_request(args.fmt, args.quantize, args.calibration, args.size, args.overlap)
    check_source(args.run, args.checkpoint, args.weights)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="export.py", description="Export a run: SavedModel, TFLite or ONNX, checked."
    )
    parser.add_argument("run", help="run directory of train.py, or a .pth / .safetensors file")
    parser.add_argument("out", help="export folder to create")
    parser.add_argument(
        "--format", default="savedmodel", choices=(*FORMATS, STATE_DICT), dest="fmt"
    )
    parser.add_argument(
        "--size", type=int, default=DEFAULT_SIZE, help="TFLite: the LR input side (default 256)"
    )
    parser.add_argument(
        "--overlap",
        type=int,
        help="TFLite and ONNX: LR pixels by which windows and upscale.py's tiles overlap "
        "(default: the receptive field, or a quarter of --size where it does not fit; checked)",
    )
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE,
        help="TFLite: int8 weights and activations, calibrated on --calibration (default: "
        "scikit-image's photos)",
    )
    parser.add_argument(
        "--calibration",
        help="folder of images (taken as HR): the check's image, and int8's calibration tiles",
    )
    add_checkpoint_argument(parser)
    add_weights_argument(parser)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if refused("export.py", check_args, args):
        return EXIT_REFUSED
    quiet_tensorflow()  # the command line is checked: TensorFlow, its INFO lines hidden
    from sr.deploy import ExportCheckError, MissingExtraError

    try:
        r = export(
            args.run, args.out, args.checkpoint, args.weights, args.fmt, args.size,
            args.quantize, args.calibration, args.overlap,
        )  # fmt: skip
    except (RunDirError, ValueError, MissingExtraError, ExportCheckError) as e:
        print(f"export.py: error: {e}", file=sys.stderr)
        return EXIT_REFUSED
    src, check = r["source"], r.get("check")
    if r["format"] == STATE_DICT:
        print(
            f"exported {args.run} (checkpoint {src['checkpoint']}, step {src['step']}) to "
            f"{args.out}/{r['file']}: {r['arch']} x{r['scale']} {r['channels']}, "
            f"{check['tensors']} tensors, read back identical"
        )
        return 0
    agreed = f"; against Keras {check['psnr_db']} dB PSNR" if check else ""
    if r["format"] == "tflite":
        agreed += f" in windows of {r['size']} overlapping by {r['overlap']}"
        if "windows_psnr_db" in check:
            agreed += f" ({check['windows_psnr_db']} dB against its whole-image output)"
    print(
        f"exported {args.run} (checkpoint {src['checkpoint']}, step {src['step']}, "
        f"x{r['scale']}, {src['weights']} weights) to {args.out} as {r['format']}"
        f"{' ' + r['quantize'] if r['quantize'] else ''}: {r['input']} -> {r['output']}{agreed}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
