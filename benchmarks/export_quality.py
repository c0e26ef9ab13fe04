"""What an export costs in quality: a trained run's Set5 / Set14 PSNR through Keras, TFLite
float32, TFLite int8 and ONNX, and each one's drop against Keras (docs/deployment.md).

    python benchmarks/export_quality.py RUN --calibration DIR --test DIR [DIR ...] [--size 48]

The run's checkpoint (``best`` where it has one) is exported by ``sr.deploy`` as
``scripts/export.py`` does, int8 calibrated on LR tiles of the images of ``--calibration``
(training photos, never the test sets); every test folder is then scored with the literature's
protocol (``sr.evaluation.evaluate_folder``: Y of BT.601, MATLAB bicubic LR, ``scale`` pixels of
border cropped) through each backend (``sr.deploy.Exported``). The TFLite exports take ``--size``
x ``--size`` LR windows: 48 by default, no larger than the smallest LR image of Set5 and Set14
(57 pixels), so that every image is upscaled through whole windows (an image smaller than the
size is mirrored to it, which changes its bottom and right edges).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sr.config  # noqa: E402,F401  (registers the ${sr_root:} resolver of saved run configs)
from sr.deploy import Exported, export_model  # noqa: E402
from sr.evaluation import evaluate_folder  # noqa: E402
from sr.loading.models import load_model_from_run, model_label  # noqa: E402

BACKENDS = (("tflite", "tflite", None), ("tflite int8", "tflite", "int8"), ("onnx", "onnx", None))


def scores(model, folders: list[str], scale: int) -> dict[str, float]:
    """Mean Y-PSNR of each test folder (keyed by its name)."""
    return {Path(f).name: evaluate_folder(model, f, scale)["psnr"] for f in folders}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="run directory of train.py")
    parser.add_argument("--calibration", required=True, help="training photos for int8")
    parser.add_argument("--test", nargs="+", required=True, help="test folders (HR images)")
    parser.add_argument("--size", type=int, default=48, help="TFLite LR window side")
    args = parser.parse_args(argv)
    model, cfg, step = load_model_from_run(args.run)
    scale = int(cfg.data.scale)
    rows = {"keras": scores(model, args.test, scale)}
    with tempfile.TemporaryDirectory() as tmp:
        for label, fmt, quantize in BACKENDS:
            folder = Path(tmp) / label.replace(" ", "_")
            record = export_model(model, folder, fmt, scale, args.size, quantize, args.calibration)
            rows[label] = scores(Exported(folder, record), args.test, scale)
            rows[label]["check"] = record["check"]["psnr_db"]
    names = [Path(f).name for f in args.test]
    window = f"{args.size} x {args.size}"
    print(f"{model_label(model)}, step {step} of {args.run}; TFLite windows {window}")
    print()
    print("| backend | " + " | ".join(f"{n} PSNR (drop)" for n in names) + " | check (dB) |")
    print("| --- |" + " ---: |" * (len(names) + 1))
    for label, row in rows.items():
        cells = [
            f"{row[n]:.3f}" + ("" if label == "keras" else f" ({row[n] - rows['keras'][n]:+.3f})")
            for n in names
        ]
        print(f"| {label} | " + " | ".join(cells) + f" | {row.get('check', '')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
