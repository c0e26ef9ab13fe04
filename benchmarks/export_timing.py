"""Each model through each backend: ms to upscale a 256 x 256 LR image on this CPU, and the size
of each export (docs/performance.md, "Exports: time and size").

    python benchmarks/export_timing.py [--repeat 10] [--calibration DIR] [--out FILE]

Every single-image model of ``conf/model`` at x4 on Y (random weights: time and size do not
depend on them; ``edsr_lite`` also at the recipes' 8 x 48) is exported by ``sr.deploy`` as the
users' ``scripts/export.py`` does: TFLite float32 and int8 at ``--size 256`` (one window: the
whole image), and ONNX. Each backend then maps a float32 ``[1, 256, 256, 1]`` Y image to
``[1, 1024, 1024, 1]``: Keras in a ``tf.function``, the LiteRT interpreter and ONNX Runtime
(``sr.deploy.Exported``) with as many threads as cores; the median of ``--repeat`` runs after
two warm-ups, with the minimum and maximum. Sizes are the files' bytes (Keras: the
``.weights.h5`` of the weights). int8 is calibrated on ``--calibration DIR`` (default: the
built-in astronaut photo; time does not depend on it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from sr.config import compose  # noqa: E402
from sr.deploy import Exported, export_model  # noqa: E402
from sr.loading.models import build_model  # noqa: E402
from sr.models.complexity import parameters  # noqa: E402
from sr.models.layers import deployed as reparameterize  # noqa: E402

MODELS = [
    ("espcn", ["model=espcn"]),
    ("edsr_lite 8 x 48", ["model=edsr_lite", "model.features=48"]),
    ("edsr_baseline", ["model=edsr_baseline"]),
    ("rlfn", ["model=rlfn"]),
    ("span", ["model=span"]),
]
BACKENDS = ("keras", "tflite", "tflite int8", "onnx")
SIZE = 256


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def timed(run, x, repeat: int) -> list[float]:
    """Milliseconds of each of ``repeat`` calls of ``run(x)`` after two warm-ups."""
    for _ in range(2):
        run(x)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(x)
        times.append(1000 * (time.perf_counter() - t0))
    return times


def runners(model, folder: Path, calibration) -> dict:
    """``{backend: (run(x) -> ndarray, bytes)}`` for one model, its exports written in
    ``folder``."""
    weights = folder / "keras.weights.h5"
    model.save_weights(weights)
    deployed = reparameterize(model)
    call = tf.function(lambda t: deployed(t, training=False))
    out = {"keras": (lambda x: call(x).numpy(), weights.stat().st_size)}
    for backend, fmt, quantize in (
        ("tflite", "tflite", None),
        ("tflite int8", "tflite", "int8"),
        ("onnx", "onnx", None),
    ):
        target = folder / backend.replace(" ", "_")
        cal = calibration if quantize else None
        if quantize and not cal:
            cal = folder / "calibration"
            cal.mkdir(exist_ok=True)
            tf.keras.utils.save_img(cal / "astronaut.png", _astronaut())
        record = export_model(model, target, fmt, 4, SIZE, quantize, cal)
        out[backend] = (Exported(target, record).run, record["bytes"])
    return out


def _astronaut():
    import skimage.data

    return skimage.data.astronaut()


def table(repeat: int, calibration) -> str:
    x = np.random.default_rng(0).random((1, SIZE, SIZE, 1), dtype=np.float32)
    lines = [
        f"x4, Y, LR {SIZE} x {SIZE} -> SR {4 * SIZE} x {4 * SIZE}, batch 1, {os.cpu_count()} "
        f"threads, TensorFlow {tf.__version__}: {cpu_name()}",
        "",
        "| model | parameters | backend | ms per 256 x 256 LR (median, min-max) | file (KB) |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for label, overrides in MODELS:
        model = build_model(compose(*overrides))
        model(x)
        with tempfile.TemporaryDirectory() as tmp:
            for backend, (run, size) in runners(model, Path(tmp), calibration).items():
                ms = timed(run, x, repeat)
                lines.append(
                    f"| {label} | {parameters(model):,} | {backend} | {statistics.median(ms):.0f}"
                    f" ({min(ms):.0f}-{max(ms):.0f}) | {size / 1024:,.0f} |"
                )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--calibration", help="folder of images for int8 calibration")
    parser.add_argument("--out", type=Path, help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    text = table(args.repeat, args.calibration)
    print(text)
    if args.out:
        cmd = "python benchmarks/export_timing.py" + (
            f" --calibration {args.calibration}" if args.calibration else ""
        )
        args.out.write_text(f"# Exports: time and size\n\n    {cmd} --out {args.out}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
