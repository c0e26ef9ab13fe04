"""Issue 45's training matrix: each architecture's tiny preset trains here, on every way a user
would ask for it, and ends with finite checkpoints.

    python -m benchmarks.arch_training [--archs swinir,hat,...] [--steps 20] [--out DIR]

For each of SwinIR, HAT, DAT, OmniSR, RCAN, SAFMN and RealPLKSR (``model=<arch>_tiny``), five
in-process runs of ``train.py`` (``sr.train.app.run``, the function ``python train.py`` calls),
``--steps`` steps each, batch 4 of 96 x 96 HR patches cut from seven real photos (scikit-image's)
with a validation folder of two more:

- ``tfrecord``: the default data mode, bicubic Y pairs;
- ``generator``: the generator mode, bicubic Y pairs;
- ``realesrgan``: Real-ESRGAN's degradations (``degradation=realesrgan``), RGB;
- ``bfloat16``: ``train.precision=bfloat16`` (falls back to float32, with a warning, on a CPU
  without AMX or AVX512-BF16; the table says which ran);
- ``init_from``: RGB, starting from the architecture's PyTorch fixture
  (``tests/fixtures/pytorch/<arch>_tiny.safetensors``, made by the official class).

Each row gives the steps reached, the newest checkpoint's step, whether every float tensor of it
is finite, the validation PSNR (Set of two photos, Y or RGB as trained) and the run's wall
seconds (tracing included), with the CPU and
the load average. Exits 1 if any cell failed.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import skimage.data  # noqa: E402
import tensorflow as tf  # noqa: E402
from PIL import Image  # noqa: E402

from benchmarks.model_table import cpu_name  # noqa: E402
from sr.config import PROJECT_ROOT, compose  # noqa: E402
from sr.train.app import run  # noqa: E402

ARCHS = ["swinir", "hat", "dat", "omnisr", "rcan", "safmn", "realplksr"]
FIXTURES = PROJECT_ROOT / "tests" / "fixtures" / "pytorch"
TRAIN = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "camera", "moon")
VAL = ("astronaut", "coffee")
# where a fixture differs from its tiny preset (the message of train.init_from names the keys)
FIXTURE_KEYS = {
    "swinir": ["model.upsampler=pixelshuffle"],  # swinir_tiny.safetensors: the classical upsampler
    "dat": ["model.split=[2,4]", "model.resi_connection=1conv", "model.upsampler=pixelshuffle",
            "model.img_size=16"],
    "omnisr": ["model.features=12", "model.groups=1"],
    "rcan": ["model.norm=true"],
}  # fmt: skip


def write_folder(folder: Path, names, size: int, offset: int) -> Path:
    """``size`` x ``size`` crops of scikit-image's photos as PNG (gray ones stay gray)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        im = np.asarray(getattr(skimage.data, name)(), dtype=np.uint8)
        crop = im[offset : offset + size, offset : offset + size]
        Image.fromarray(crop).save(folder / f"{name}.png")
    return folder


def cells(arch: str) -> dict[str, list[str]]:
    """The overrides of each cell of ``arch``'s row."""
    init = FIXTURES / f"{arch}_tiny.safetensors"
    return {
        "tfrecord": ["data=tfrecord"],
        "generator": ["data=generator"],
        "realesrgan": ["data=generator", "degradation=realesrgan", "data.channels=rgb"],
        "bfloat16": ["data=tfrecord", "train.precision=bfloat16"],
        "init_from": ["data=tfrecord", "data.channels=rgb", f"train.init_from={init}",
                      *FIXTURE_KEYS.get(arch, [])],
    }  # fmt: skip


def finite_checkpoint(run_dir: Path) -> tuple[int | None, bool]:
    """The newest checkpoint's step and whether every float tensor in it (weights, averaged
    weights, optimizer slots) is finite; the divergence guard's memory is left out: it holds
    inf / NaN as its 'nothing seen yet' on purpose."""
    path = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    if path is None:
        return None, False
    reader = tf.train.load_checkpoint(path)
    finite = True
    for name, dtype in reader.get_variable_to_dtype_map().items():
        if dtype.is_floating and not name.startswith("guard/"):  # its sentinels are +-inf, NaN
            finite &= bool(np.all(np.isfinite(reader.get_tensor(name))))
    return int(path.rsplit("-", 1)[-1]), finite


def one_cell(arch: str, overrides: list[str], data: Path, run_dir: Path, steps: int) -> str:
    cfg = compose(
        f"model={arch}_tiny", *overrides,
        f"data.hr_dir={data / 'train'}", f"data.val_dir={data / 'val'}",
        "data.batch_size=4", f"train.steps={steps}", f"train.ckpt_every={steps}",
        f"train.log_every={max(1, steps // 4)}", f"train.val_every={steps}", "seed=0",
    )  # fmt: skip
    start = time.perf_counter()
    result = run(cfg, run_dir)
    seconds = time.perf_counter() - start
    step, finite = finite_checkpoint(run_dir)
    psnr = result.get("val/psnr")
    precision = tf.keras.mixed_precision.global_policy().compute_dtype
    tf.keras.mixed_precision.set_global_policy("float32")
    return (
        f"steps {result['step']}, checkpoint {step}, finite {finite}, "
        f"val PSNR {'-' if psnr is None else f'{psnr:.2f}'} dB, "
        f"compute {precision}, {seconds:.1f} s"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", default=",".join(ARCHS))
    parser.add_argument("--cells", default=None, help="comma-separated (default: all five)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default=None, help="run folders here (default: a temp folder)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    out = Path(args.out or tempfile.mkdtemp(prefix="arch_training_"))
    data = out / "data"
    write_folder(data / "train", TRAIN, 160, 40)
    write_folder(data / "val", VAL, 64, 200)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}; "
          f"TensorFlow {tf.__version__}; {args.steps} steps per cell; runs in {out}")  # fmt: skip
    failed = 0
    for arch in args.archs.split(","):
        for name, overrides in cells(arch).items():
            if args.cells and name not in args.cells.split(","):
                continue
            try:
                line = one_cell(arch, overrides, data, out / f"{arch}_{name}", args.steps)
                failed += "finite True" not in line
            except Exception as error:  # a study: report the cell, go on with the others
                failed += 1
                line = f"FAILED: {type(error).__name__}: {error}".splitlines()[0]
                traceback.print_exc()
            print(f"{arch:10s} {name:11s} {line}", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}; failed cells: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
