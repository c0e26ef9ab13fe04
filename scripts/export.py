"""Export a trained run as a TensorFlow SavedModel for serving.

    python scripts/export.py <run dir> <output folder> [--checkpoint best|last|ckpt-N]
        [--weights auto|ema|live]

The SavedModel's ``serving_default`` signature takes ``lr``: uint8 RGB ``[1, H, W, 3]`` (H, W >= 3)
and returns ``sr``: uint8 RGB ``[1, s H, s W, 3]`` (s = the run's scale): Y (BT.601) through the
model, Cb and Cr by the project's bicubic, back to RGB, rounded; for an RGB run
(``data.channels=rgb``) R, G and B through the model, rounded. It is the graph of
``scripts/upscale.py`` (``sr.inference.Upscaler.graph``) untiled, so both give the same pixels.
The weights are the run's averaged ones when it was trained with ``train.ema`` (``--weights live``
for the trained ones); ``weights.txt`` in the folder says which (``<model>+ema`` for averaged),
from which step, run and checkpoint: ``espcn_x4+ema step 4000 of <run>, checkpoint best
(ckpt-4000)``. ``--checkpoint`` is ``best`` (the default where the run has ``checkpoints/best``:
the best validation PSNR so far), ``last`` (the newest of the rotation, where ``resume=``
continues) or ``ckpt-N``.

A multi-frame run (``data=sequence`` with ``data.frames`` > 1) is refused: its model reads a
window of k frames of a sequence, which this one-image signature cannot give; upscale sequences
with ``scripts/upscale.py <run> <folder of sequences> <output folder>``. A sequence run with
``data.frames=1`` is a single-image model and exports as above.

Load it back with::

    m = tf.saved_model.load("<output folder>")
    sr = m.signatures["serving_default"](lr=tf.constant(rgb[None]))["sr"][0].numpy()
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import sr.config  # noqa: E402,F401  (registers the ${sr_root:} resolver of saved run configs)
from sr.inference import serving_module  # noqa: E402
from sr.train.checkpoint import (  # noqa: E402
    RunDirError,
    add_weights_argument,
    load_model_from_run,
    load_run_config,
    model_label,
)


def export(
    run_dir, out_dir, checkpoint: str | None = None, weights: str = "auto"
) -> tuple[Path, int, int]:
    """Write the SavedModel of a run's checkpoint.

    Args:
        run_dir: run directory of ``train.py``.
        out_dir: SavedModel folder to write (must not exist, or be empty).
        checkpoint: ``best``, ``last`` or ``ckpt-N``; None: ``best`` where the run has one,
            else ``last`` (``sr.train.checkpoint.find_checkpoint``).
        weights: ``auto``, ``ema`` or ``live`` (``sr.train.checkpoint.load_model_from_run``):
            by default the averaged weights of a run trained with ``train.ema``.

    Returns:
        ``(out_dir, scale, step)``.

    Raises:
        RunDirError: for a run without config or checkpoint, or without the one chosen.
        ValueError: if ``out_dir`` exists and is not an empty folder, or the run is multi-frame
            (``data.frames`` > 1; names ``scripts/upscale.py``, which upscales sequences).
    """
    out_dir = Path(out_dir)
    frames = int(load_run_config(run_dir).data.get("frames", 1))
    if frames > 1:
        raise ValueError(
            f"run {run_dir} is a multi-frame run (data.frames={frames}): its model reads a window "
            f"of {frames} frames of a sequence, and the SavedModel's signature takes one image, "
            "so it is not exported; upscale sequences with scripts/upscale.py "
            f"{run_dir} <folder of sequences> <output folder>"
        )
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ValueError(f"output {out_dir} already exists and is not empty: pick a new folder")
    model, cfg, step = load_model_from_run(run_dir, checkpoint, weights)
    scale = int(cfg.data.scale)
    module = serving_module(model, scale)
    tf.saved_model.save(module, str(out_dir), signatures={"serving_default": module.serve})
    (out_dir / "weights.txt").write_text(
        f"{model_label(model)} step {step} of {run_dir}, checkpoint {model.sr_checkpoint}\n"
    )
    return out_dir, scale, step


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="export.py",
        description="SavedModel: uint8 RGB [1, H, W, 3] -> uint8 RGB [1, sH, sW, 3].",
    )
    parser.add_argument("run", help="run directory of train.py (outputs/DATE/TIME)")
    parser.add_argument("out", help="SavedModel folder to create")
    parser.add_argument(
        "--checkpoint",
        help="best (default where the run has one: the best validation PSNR), last (the newest "
        "checkpoint, where resume= continues), or ckpt-N",
    )
    add_weights_argument(parser)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        out, scale, step = export(args.run, args.out, args.checkpoint, args.weights)
    except (RunDirError, ValueError) as e:
        print(f"export.py: error: {e}", file=sys.stderr)
        return 2
    text = (out / "weights.txt").read_text().strip()  # "<label> step N of <run>, checkpoint C"
    label, chosen = text.split()[0], text.rsplit(", checkpoint ", 1)[1]
    print(
        f"exported {args.run} (checkpoint {chosen}, step {step}, x{scale}, {label} weights) to "
        f"{out}: serving_default(lr: uint8 [1, H, W, 3]) -> sr: uint8 [1, {scale}H, {scale}W, 3]"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
