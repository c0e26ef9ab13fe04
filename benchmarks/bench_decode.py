"""Decoder benchmark: MP/s of each maintained decoder on real PNG and JPEG photos, their pixel
identity with Pillow, and the generator mode against its decode-bound ceiling.

    python benchmarks/bench_decode.py                     # decoders + load_y (~2 min on 2 cores)
    python benchmarks/bench_decode.py --generator         # + bench_data's generator_ppi100 rows,
                                                       #   Pillow-only and with the fast decoders
    python benchmarks/bench_decode.py --png-folder DIR --jpeg-folder DIR --images 20 --repeats 7

Every decoder turns the bytes of a file (read inside the timing, from the page cache) into an RGB
uint8 array on one thread (OpenCV and TensorFlow told to use one thread); MP/s is the median over
``--repeats`` passes over ``--images`` files (min-max beside it). "identical" counts the files
whose array equals Pillow's ``np.asarray(Image.open(f))``. Then ``sr.core.images.load_y`` (the
generator's decode: file to uint8 Y) with Pillow alone (``SR_IMAGE_DECODER=pillow``) and with the
fast decoders, single-threaded (ms per image) and on 2 threads (images/s, CPU-ms per image).

Default folders: ``../shared/datasets/hr_sample`` (JPEG photos) and the same re-encoded as PNG
(``sr.bench.folders.reencode_png``, zlib level 6) into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"  # bench_data.py, a user command


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def decoders() -> dict:
    """name -> (formats, function path -> RGB/gray array, version); only installed packages."""
    import PIL

    out = {}

    def pillow(p):
        with Image.open(p) as im:
            return np.asarray(im)

    out["Pillow"] = (("png", "jpeg"), pillow, PIL.__version__)
    try:
        import imagecodecs

        v = imagecodecs.__version__
        out["imagecodecs png (libpng)"] = (
            ("png",),
            lambda p: imagecodecs.png_decode(_read(p)),
            v,
        )
        out["imagecodecs spng (libspng)"] = (
            ("png",),
            lambda p: imagecodecs.spng_decode(_read(p)),
            v,
        )
        out["imagecodecs jpeg8 (libjpeg-turbo)"] = (
            ("jpeg",),
            lambda p: imagecodecs.jpeg8_decode(_read(p)),
            v,
        )
    except ImportError:
        pass
    try:
        import cv2

        cv2.setNumThreads(1)
        flag = getattr(cv2, "IMREAD_COLOR_RGB", None)

        def opencv(p):
            buf = np.frombuffer(_read(p), np.uint8)
            if flag is not None:
                return cv2.imdecode(buf, flag)
            return cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)

        out["OpenCV imdecode"] = (("png", "jpeg"), opencv, cv2.__version__)
    except ImportError:
        pass
    try:
        import pyspng

        out["pyspng"] = (("png",), lambda p: pyspng.load(_read(p)), pyspng.__version__)
    except (ImportError, AttributeError):
        pass
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    out["tf.io.decode_image"] = (
        ("png", "jpeg"),
        lambda p: tf.io.decode_image(_read(p), expand_animations=False).numpy(),
        tf.__version__,
    )
    out["tf.io.decode_jpeg INTEGER_ACCURATE"] = (
        ("jpeg",),
        lambda p: tf.io.decode_jpeg(_read(p), dct_method="INTEGER_ACCURATE").numpy(),
        tf.__version__,
    )
    return out


def _passes(fn, files, repeats: int) -> tuple[list[float], list[float]]:
    """Wall and process CPU seconds of each of ``repeats`` passes over ``files``. On a shared
    machine the CPU seconds are the steadier figure (other jobs stretch the wall time)."""
    walls, cpus = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        for f in files:
            fn(f)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return walls, cpus


def bench_decoders(files: dict, repeats: int) -> list[dict]:
    rows = []
    decs = decoders()
    for fmt, paths in files.items():
        ref = [decs["Pillow"][1](p) for p in paths]
        mp = sum(r.shape[0] * r.shape[1] for r in ref) / 1e6
        for name, (formats, fn, version) in decs.items():
            if fmt not in formats:
                continue
            got = [fn(p) for p in paths]  # also the warm-up
            same = sum(g.shape == r.shape and np.array_equal(g, r) for g, r in zip(got, ref))
            diff = max(
                int(np.abs(g.astype(np.int32) - r).max()) if g.shape == r.shape else -1
                for g, r in zip(got, ref)
            )
            walls, cpus = _passes(fn, paths, repeats)
            rates = [mp / t for t in walls]
            rows.append(
                {
                    "format": fmt,
                    "decoder": name,
                    "version": version,
                    "mp_s": statistics.median(rates),
                    "mp_cpu_s": mp / statistics.median(cpus),
                    "min": min(rates),
                    "max": max(rates),
                    "identical": same,
                    "files": len(paths),
                    "max_abs_diff": diff,
                }
            )
            print(
                f"  {fmt:4} {name:36} {rows[-1]['mp_s']:6.1f} MP/s, "
                f"{rows[-1]['mp_cpu_s']:6.1f} MP/CPU-s  identical {same}/{len(paths)}",
                flush=True,
            )
    return rows


def _load_y_worker(folder: str, images: int, repeats: int, old_y: bool) -> dict:
    """In a subprocess (SR_IMAGE_DECODER decides the decoder): load_y, 1 and 2 threads;
    ``old_y``: ``y_channel(load_image(f))``, the Y conversion load_y used before."""
    from sr.core.color import y_channel
    from sr.core.images import FAST_DECODE, list_images, load_image
    from sr.core.images import load_y as fast_y

    def load_y(f):
        return y_channel(load_image(f)) if old_y else fast_y(f)

    files = list_images(folder)[:images]
    mp = sum(load_y(f).size for f in files) / 1e6
    single, single_cpu = _passes(load_y, files, repeats)
    rates, cpu = [], []
    with ThreadPoolExecutor(2) as ex:
        for _ in range(repeats):
            c0, t0 = time.process_time(), time.perf_counter()
            list(ex.map(load_y, files))
            rates.append(len(files) / (time.perf_counter() - t0))
            cpu.append(1000 * (time.process_time() - c0) / len(files))
    return {
        "fast": FAST_DECODE,
        "ms_per_image_1thread": 1000 * statistics.median(single) / len(files),
        "cpu_ms_per_image_1thread": 1000 * statistics.median(single_cpu) / len(files),
        "mp_s_1thread": mp / statistics.median(single),
        "images_s_2threads": statistics.median(rates),
        "cpu_ms_per_image_2threads": statistics.median(cpu),
    }


def bench_load_y(folders: dict, images: int, repeats: int) -> list[dict]:
    rows = []
    for fmt, folder in folders.items():
        for decoder, old_y, name in (
            ("pillow", True, "before: Pillow + y_channel"),
            ("pillow", False, "Pillow + band-wise Y"),
            ("auto", False, "now: imagecodecs + band-wise Y"),
        ):
            env = {**os.environ, "SR_IMAGE_DECODER": decoder}
            cmd = [sys.executable, __file__, "--load-y-worker", str(folder)]
            cmd += ["--images", str(images), "--repeats", str(repeats)]
            cmd += ["--old-y"] if old_y else []
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append({"format": fmt, "decoder": name, **r})
            print(
                f"  load_y {fmt:4} {name:32} {r['ms_per_image_1thread']:6.1f} ms/image "
                f"({r['cpu_ms_per_image_1thread']:.1f} CPU-ms), "
                f"2 threads {r['images_s_2threads']:5.1f} images/s",
                flush=True,
            )
    return rows


def bench_generator(png_folder: Path, runs: int) -> list[dict]:
    """``bench_data.py --only generator_ppi100 ceiling`` with Pillow alone and with the fast
    decoders, alternating, ``runs`` times each. The decode-bound ceiling is bench_data's: files
    decoded alone by ``load_y_pair`` on the generator's 2 threads, x 100 patches per decode,
    capped by the in-memory ceiling."""
    rows = []
    for r in range(runs):
        for decoder in ("pillow", "auto"):
            env = {**os.environ, "SR_IMAGE_DECODER": decoder}
            cmd = [sys.executable, str(SCRIPTS / "bench_data.py"), "--folder", str(png_folder)]
            cmd += ["--only", "generator_ppi100", "ceiling"]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode:
                sys.stderr.write(proc.stderr[-3000:])
                raise RuntimeError("bench_data.py failed")
            out = proc.stdout
            res = json.loads(out[out.index("{") :])
            g, c, d = (
                res["pipelines"]["generator_ppi100"],
                res["pipelines"]["ceiling"],
                res["decode"],
            )
            cap = min(100 * d["median"], c["median"])
            row = {
                "run": r + 1,
                "decoder": decoder,
                "generator": g["median"],
                "generator_cpu_s_per_1000": g["cpu_s_per_1000"],
                "decode_images_s": d["median"],
                "decode_cpu_ms": d["cpu_ms_per_image"],
                "in_memory_ceiling": c["median"],
                "graph_cpu_s_per_1000": c["cpu_s_per_1000"],
                "decode_bound_ceiling": cap,
                "of_ceiling": g["median"] / cap,
                "load_avg": res["load_avg_after"],
            }
            rows.append(row)
            print(
                f"  run {r + 1} {decoder:6} generator {g['median']:7.0f}/s, decode "
                f"{d['median']:5.1f} images/s -> ceiling {cap:7.0f}/s: "
                f"{100 * row['of_ceiling']:.0f} %"
                f"  (CPU: generator {g['cpu_s_per_1000']:.3f} s/1000 patches, decode "
                f"{d['cpu_ms_per_image']:.1f} ms/image)",
                flush=True,
            )
    return rows


def cpu_info() -> dict:
    flags, model = set(), platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {
        "cpu": model,
        "nproc": os.cpu_count(),
        "flags": {f: f in flags for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw")},
        "python": platform.python_version(),
        "load_avg": os.getloadavg(),
    }


def report(res: dict) -> str:
    c = res["cpu"]
    flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in c["flags"].items())
    lines = [
        f"CPU: {c['cpu']}, {c['nproc']} cores; {flags}; Python {c['python']}; load average "
        f"before {c['load_avg'][0]:.1f}",
        "",
        f"Decoders, one thread, {res['images']} files per format, median of {res['repeats']} "
        "passes:",
        "",
        "| format | decoder | version | MP/s median (min-max) | MP per CPU-s "
        "| identical to Pillow "
        "| max abs diff |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["decoders"]:
        lines.append(
            f"| {r['format'].upper()} | {r['decoder']} | {r['version']} | {r['mp_s']:.1f} "
            f"({r['min']:.1f}-{r['max']:.1f}) | {r['mp_cpu_s']:.1f} "
            f"| {r['identical']}/{r['files']} "
            f"| {r['max_abs_diff']} |"
        )
    lines += [
        "",
        "`sr.core.images.load_y` (file to uint8 Y, the generator's decode), one process each:",
        "",
        "| format | decoder | ms/image, 1 thread | CPU-ms/image, 1 thread | MP/s, 1 thread "
        "| images/s, 2 threads | CPU-ms/image, 2 threads |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["load_y"]:
        name = r["decoder"]
        lines.append(
            f"| {r['format'].upper()} | {name} | {r['ms_per_image_1thread']:.1f} "
            f"| {r['cpu_ms_per_image_1thread']:.1f} "
            f"| {r['mp_s_1thread']:.1f} | {r['images_s_2threads']:.1f} "
            f"| {r['cpu_ms_per_image_2threads']:.1f} |"
        )
    if res.get("generator"):
        lines += [
            "",
            "Generator at 100 patches per decode (`bench_data.py --only generator_ppi100 "
            "ceiling`), PNG folder:",
            "",
            "| run | decoder | generator patches/s | decode images/s (2 threads) | decode-bound "
            "ceiling | of ceiling | generator CPU-s/1000 patches | decode CPU-ms/image |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in res["generator"]:
            lines.append(
                f"| {r['run']} | {r['decoder']} | {r['generator']:.0f} "
                f"| {r['decode_images_s']:.1f} | {r['decode_bound_ceiling']:.0f} "
                f"| {100 * r['of_ceiling']:.0f} % | {r['generator_cpu_s_per_1000']:.3f} "
                f"| {r['decode_cpu_ms']:.1f} |"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--png-folder", type=Path, default=None)
    p.add_argument("--jpeg-folder", type=Path, default=None)
    p.add_argument("--images", type=int, default=20, help="files per format")
    p.add_argument("--repeats", type=int, default=5, help="timed passes (median reported)")
    p.add_argument("--generator", action="store_true", help="also the generator rows")
    p.add_argument("--generator-runs", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="write bench_decode.json/.md here")
    p.add_argument("--load-y-worker", help=argparse.SUPPRESS)
    p.add_argument("--old-y", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.load_y_worker:
        print(json.dumps(_load_y_worker(a.load_y_worker, a.images, a.repeats, a.old_y)))
        return 0

    from sr.bench.folders import SHARED_SAMPLE, reencode_png
    from sr.core.images import list_images

    with tempfile.TemporaryDirectory(prefix="bench_decode-") as tmp:
        jpeg = a.jpeg_folder or SHARED_SAMPLE
        png = a.png_folder
        if png is None:
            print(f"re-encoding {SHARED_SAMPLE} as PNG into {tmp}/png ...", flush=True)
            png = reencode_png(SHARED_SAMPLE, Path(tmp) / "png")
        folders = {"png": png, "jpeg": jpeg}
        files = {
            fmt: [f for f in list_images(d) if (f.suffix.lower() == ".png") == (fmt == "png")][
                : a.images
            ]
            for fmt, d in folders.items()
        }
        res = {"cpu": cpu_info(), "images": a.images, "repeats": a.repeats}
        print("decoders:", flush=True)
        res["decoders"] = bench_decoders(files, a.repeats)
        print("load_y:", flush=True)
        res["load_y"] = bench_load_y(folders, a.images, a.repeats)
        if a.generator:
            print("generator (bench_data.py):", flush=True)
            res["generator"] = bench_generator(png, a.generator_runs)
    table = report(res)
    print()
    print(table)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "bench_decode.json").write_text(json.dumps(res, indent=1))
        (a.out / "bench_decode.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
