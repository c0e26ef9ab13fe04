"""The released PyTorch layouts at full size through each backend: ms to upscale one 256 x 256 RGB
LR image with realesr-general-x4v3 (SRVGGNetCompact) and RealESRGAN_x4plus (RRDBNet) on this CPU,
through Keras, TFLite float32, TFLite int8 and ONNX Runtime (README's model table and
docs/pytorch.md).

    python benchmarks/pytorch_model_timing.py [--size 256] [--repeat 3] [--models compact,rrdbnet]
        [--out DIR] [--tiny]

Each model is built by the project's registry with random weights (time does not depend on them):
``make_model("compact", 4, 3, features=64, convs=32, activation="prelu")``
(``sr.models.registry``), 1,213,296 parameters, and
``make_model("rrdbnet", 4, 3, features=64, blocks=23, growth=32)``, 16,697,987
(``--tiny``: 8 features, 2 convs / 2 blocks of growth 8, for a quick check). Its exports are made
by ``sr.deploy``'s own code and written under ``--out DIR`` (absent or empty; default: a
temporary folder, deleted): TFLite float32 and int8 by ``sr.deploy.export.to_tflite``, run at
the LR side ``--size`` (the whole image is one window; int8 is calibrated on the timed tile
alone, the LR tile of scikit-image's astronaut photo, where ``scripts/export.py`` without
``--calibration`` calibrates on four of scikit-image's photos, astronaut first), ONNX by
``sr.deploy.export_model`` (dynamic size, checked against Keras when written). The TFLite exports
are not made by ``export_model``, whose check runs the export's windows on an image larger than
one (for RRDBNet at full size, minutes more), which one window does not need.

Each backend maps the astronaut's LR tile, float32 ``[1, S, S, 3]`` in [0, 1] (S = ``--size``),
to ``[1, 4S, 4S, 3]``: Keras in a ``tf.function`` (TensorFlow's default threads: all cores), the
LiteRT interpreter and ONNX Runtime through ``sr.deploy.Exported`` on as many threads as cores
(the process's CPU affinity); one warm-up run, then the median, minimum and maximum of
``--repeat`` runs, in ms. Beside the time: the PSNR (dB, peak 1) of the backend's output against
Keras's on that tile (random weights: it shows that the export runs the same network, not its
quality), and the size of the file (Keras: its ``.weights.h5``). A backend that fails (a
converter's error) gets the reason in its row and the table goes on.

The header gives the CPU (``lscpu``'s model name), the cores, the date, the load average at the
start and the end (run it on a quiet machine), and the TensorFlow, Keras, LiteRT, ONNX Runtime and
tf2onnx versions. For Qualcomm AI Hub's figure for realesr-general-x4v3 (TFLite, 128 x 128 LR on
phones' NPUs), ``--size 128`` times the same input size.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sr.core.quiet import quiet_tensorflow

quiet_tensorflow()  # before anything imports TensorFlow: its INFO lines hidden

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from sr.cli import MIN_TFLITE_SIZE as MIN_SIZE  # noqa: E402  (the smallest TFLite LR side)
from sr.deploy import Exported, check_out, export_model, psnr_float  # noqa: E402
from sr.deploy.export import calibration_inputs, to_tflite  # noqa: E402
from sr.inference import default_overlap  # noqa: E402
from sr.models.complexity import macs_per_output_megapixel, parameters  # noqa: E402
from sr.models.registry import make_model  # noqa: E402

SCALE = 4
CHANNELS = 3
# --models name: (released file it is the layout of, architecture, full-size keys, --tiny keys)
MODELS = {
    "compact": (
        "realesr-general-x4v3",
        "compact",
        {"features": 64, "convs": 32, "activation": "prelu"},
        {"features": 8, "convs": 2, "activation": "prelu"},
    ),
    "rrdbnet": (
        "RealESRGAN_x4plus",
        "rrdbnet",
        {"features": 64, "blocks": 23, "growth": 32},
        {"features": 8, "blocks": 2, "growth": 8},
    ),
}
BACKENDS = ("keras", "tflite", "tflite int8", "onnx")
# the packages whose versions the header gives (distribution name, as printed)
PACKAGES = (
    ("tensorflow", "TensorFlow"),
    ("keras", "Keras"),
    ("ai-edge-litert", "LiteRT"),
    ("onnxruntime", "ONNX Runtime"),
    ("tf2onnx", "tf2onnx"),
)
REASON_CHARS = 160  # a failure's reason is cut to this length in its row (stderr has it whole)


def cpu_name() -> str:
    """The CPU's model name as ``lscpu`` gives it, else ``/proc/cpuinfo``'s, else
    ``unknown CPU``."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        key = "Model name:"
    except (OSError, subprocess.CalledProcessError):
        try:
            text, key = Path("/proc/cpuinfo").read_text(), "model name"
        except OSError:
            return "unknown CPU"
    for line in text.splitlines():
        if line.strip().startswith(key):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def threads() -> int:
    """The cores this process may run on (its CPU affinity), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def versions() -> str:
    """``TensorFlow 2.21.0, Keras 3.15.1, ...`` for :data:`PACKAGES` (``not installed`` if so)."""
    found = []
    for package, label in PACKAGES:
        try:
            found.append(f"{label} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{label} not installed")
    return ", ".join(found)


def timed(run, x: np.ndarray, repeat: int) -> tuple[np.ndarray, list[float]]:
    """The output of a warm-up call ``run(x)``, and the milliseconds of each of ``repeat`` calls
    after it."""
    output = run(x)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(x)
        times.append(1000 * (time.perf_counter() - t0))
    return output, times


def tflite_export(model, folder: Path, size: int, calibration, n_threads: int) -> Exported:
    """Write ``model`` as ``folder/model.tflite`` at ``[1, size, size, C]`` (int8 when
    ``calibration``, a list of LR tiles, is given) with its ``export.json``; the export, opened
    on ``n_threads`` threads."""
    folder.mkdir(parents=True)
    to_tflite(model, folder / "model.tflite", calibration)
    shapes = [f"[1, {n}, {n}, {CHANNELS}]" for n in (size, SCALE * size)]
    record = {
        "format": "tflite",
        "scale": SCALE,
        "channels": CHANNELS,
        "quantize": None if calibration is None else "int8",
        "file": "model.tflite",
        "input": f"float32 {shapes[0]} in [0, 1]",
        "output": f"float32 {shapes[1]}",
        "size": size,
        "overlap": default_overlap(model),
        "bytes": (folder / "model.tflite").stat().st_size,
        "source": {"weights": "random", "made_by": "benchmarks/pytorch_model_timing.py"},
    }
    (folder / "export.json").write_text(json.dumps(record, indent=2) + "\n")
    return Exported(folder, record, threads=n_threads)


def runner(backend: str, model, folder: Path, tile: np.ndarray, n_threads: int):
    """``(run(x) -> ndarray, file)`` of one backend: the Keras model in a ``tf.function`` (its
    weights saved to measure them), or its export written under ``folder``."""
    if backend == "keras":
        folder.mkdir(parents=True)
        weights = folder / "keras.weights.h5"
        model.save_weights(weights)
        call = tf.function(lambda t: model(t, training=False))
        return (lambda x: call(tf.constant(x)).numpy()), weights
    if backend == "onnx":
        source = {"weights": "random", "made_by": "benchmarks/pytorch_model_timing.py"}
        record = export_model(model, folder, "onnx", SCALE, source=source)
        return Exported(folder, record, threads=n_threads).run, folder / record["file"]
    calibration = [tile] if backend == "tflite int8" else None
    exported = tflite_export(model, folder, tile.shape[1], calibration, n_threads)
    return exported.run, folder / "model.tflite"


def measure(backend: str, model, folder: Path, tile: np.ndarray, args, reference) -> dict:
    """One backend's row: ``ms`` (list), ``output``, ``psnr`` against ``reference`` (None: this
    is the reference) and ``mb``; or ``error``, the reason it failed (also printed whole on
    stderr)."""
    try:
        run, file = runner(backend, model, folder, tile, args.threads)
        output, ms = timed(run, tile, args.repeat)
    except Exception as e:  # a converter's or runtime's failure is a result: kept in the row
        print(f"{backend} failed: {type(e).__name__}: {e}", file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)  # no half-written export left in --out
        return {"error": reason(e)}
    psnr = None if reference is None else psnr_float(output, reference)
    return {"ms": ms, "output": output, "psnr": psnr, "mb": file.stat().st_size / 2**20}


def reason(error: Exception) -> str:
    """A failure in one line of at most :data:`REASON_CHARS` characters: for the TFLite
    converter's long MLIR dump, its error code and the TensorFlow ops it could not lower
    (``ConverterError: ERROR_NEEDS_FLEX_OPS, TF Select ops: Conv2D``), else the start of the
    message."""
    text = " ".join(str(error).split())
    code = re.search(r"Error code: (\w+)", text)
    if code:
        ops = re.search(r"TF Select ops: (.+?) Details:", text)
        text = code.group(1) + (f", TF Select ops: {ops.group(1)}" if ops else "")
    text = f"{type(error).__name__}: {text}".replace("|", "/")
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."


def model_rows(name: str, args, tile: np.ndarray, out: Path) -> list[str]:
    """The table rows of one model of :data:`MODELS`, one per backend of :data:`BACKENDS`."""
    release, build, full, tiny = MODELS[name]
    keras.utils.set_random_seed(0)
    model = make_model(build, SCALE, CHANNELS, **(tiny if args.tiny else full))
    label = f"{release} (`{name}`{', tiny' if args.tiny else ''})"
    count, macs = parameters(model), macs_per_output_megapixel(model, SCALE)
    rows, reference = [], None
    for backend in BACKENDS:
        t0 = time.perf_counter()
        folder = out / name / backend.replace(" ", "_")
        row = measure(backend, model, folder, tile, args, reference)
        print(f"{name} {backend}: {time.perf_counter() - t0:.0f} s in all", file=sys.stderr)
        if backend == "keras" and "output" in row:
            reference = row["output"]
        rows.append(f"| {label} | {count:,} | {macs:,.1f} | {backend} | {cells(row)} |")
    keras.backend.clear_session()
    return rows


def cells(row: dict) -> str:
    """The time, PSNR and size cells of a measured row, or its reason for failing."""
    if "error" in row:
        return f"failed: {row['error']} | | "
    ms = row["ms"]
    time_cell = f"{statistics.median(ms):,.0f} [{min(ms):,.0f}-{max(ms):,.0f}]"
    if row["psnr"] is None:
        psnr = "(reference)"
    else:
        psnr = "inf" if math.isinf(row["psnr"]) else f"{row['psnr']:.1f}"
    return f"{time_cell} | {psnr} | {row['mb']:,.1f}"


def table(args, out: Path) -> str:
    """The markdown table of every model of ``args.models`` through every backend, with its
    header (CPU, threads, date, load, versions)."""
    size, load = args.size, os.getloadavg()[0]
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    tile = calibration_inputs(None, SCALE, CHANNELS, size, 1)[0]
    rows = [row for name in args.models for row in model_rows(name, args, tile, out)]
    return "\n".join(
        [
            f"x{SCALE}, RGB, LR {size} x {size} -> SR {SCALE * size} x {SCALE * size}, batch 1, "
            f"random weights, {args.threads} cores; one warm-up, then the median "
            f"[min-max] of {args.repeat} runs",
            f"CPU: {cpu_name()}; {started}; load average {load:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end",
            versions(),
            "",
            f"| model | parameters | G mult-adds / output MP | backend | ms per {size} x {size} "
            "LR, median [min-max] | PSNR against Keras (dB) | file (MB) |",
            "| --- | ---: | ---: | --- | ---: | ---: | ---: |",
            *rows,
        ]
    )


def model_list(text: str) -> list[str]:
    """``--models``: comma-separated names of :data:`MODELS`, in the order given."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give one or more of {', '.join(MODELS)}, separated by commas"
        )
    return names


def parse_args(argv=None) -> argparse.Namespace:
    """The options, refused before any work: ``--size`` below :data:`MIN_SIZE`, ``--repeat``
    below 1, an unknown model, an ``--out`` that exists and is not an empty folder (exit 2)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=256, help="LR side S in pixels (256)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per backend (3)")
    parser.add_argument(
        "--models", type=model_list, default=list(MODELS), help="compact,rrdbnet (both)"
    )
    parser.add_argument("--out", type=Path, help="folder for the exports (default: temporary)")
    parser.add_argument(
        "--tiny", action="store_true", help="8 features, 2 convs / 2 blocks: a quick check"
    )
    args = parser.parse_args(argv)
    if args.size < MIN_SIZE:
        parser.error(f"--size {args.size}: a TFLite export needs an LR side of at least 16")
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: time at least 1 run")
    if args.out is not None:
        try:
            check_out(args.out)
        except ValueError as e:
            parser.error(f"--out: {e}")
    args.threads = threads()
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        print(table(args, args.out))
        return 0
    with tempfile.TemporaryDirectory(prefix="pytorch_model_timing_") as tmp:
        print(table(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
