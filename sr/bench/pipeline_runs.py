"""The image pipelines of ``scripts/bench_data.py``, each built and timed in its own process.

Pipelines (:data:`PIPELINES`): the project's ``data=tfrecord`` and ``data=generator`` loaders built
as ``train.py`` builds them (``hydra.utils.instantiate(cfg.data).dataset()``); the references
(a) naive, (b) the generator and (c) the TFRecord modes of ``references/004``
(:mod:`sr.bench.references`), and (c) reordered (batch before map, no ``py_func``); the in-memory
ceiling (the project's post-decode graph fed from uint8 patches in RAM); and two TFRecord variants
of issue 11 (sub-image records, RGB records). Besides them: the generator at 16..256 patches per
decoded image (``gen_ppi_<n>``), the files decoded alone (``decode``) and the shards built before
the timing (``build``).
"""

from __future__ import annotations

from pathlib import Path

from sr.bench.folders import compose_data
from sr.bench.timing import peak_rss_mb, rate_stats, rss_mb, time_decodes, time_pipeline

SUBIMAGE = 384  # data.subimage_size of the sub-image row
GEN_POOL = 64  # generator pool for the decode-bound rows: at least B, smaller than the folder
PPI_SWEEP = (16, 32, 64, 128, 256)
# name -> (label, kind, extra)
PIPELINES = {
    "tfrecord": ("project data=tfrecord", "project", ("tfrecord",)),
    "generator": ("project data=generator (default)", "project", ("generator",)),
    "generator_ppi100": (
        f"project data=generator ppi=100 pool={GEN_POOL}",
        "project",
        ("generator", "data.patches_per_image=100", f"data.pool_size={GEN_POOL}"),
    ),
    "tfrecord_1shard": (
        "project data=tfrecord, 1 shard",
        "project",
        ("tfrecord", "data.num_shards=1"),
    ),
    # issue 11: random crop positions from sub-image records (384: the folder's smallest side is
    # 426), and the LR made from RGB records (data.lr_from=rgb)
    "tfrecord_subimage": (
        "project data=tfrecord, sub-images 384",
        "project",
        ("tfrecord", f"data.subimage_size={SUBIMAGE}"),
    ),
    "tfrecord_rgb": (
        "project data=tfrecord, lr_from=rgb",
        "project",
        ("tfrecord", "data.lr_from=rgb"),
    ),
    "ref_a": ("ref (a) naive, 1 decode/patch", "ref", ()),
    "ref_b": ("ref (b) 004 generator", "ref", ()),
    "ref_c": ("ref (c) 004 TFRecord", "ref", ()),
    "ref_c_batched": ("ref (c) batch-then-map, no py_func", "ref", ()),
    "ceiling": ("in-memory ceiling", "ceiling", ()),
}


def project_loader(name: str, a):
    """The project's loader of pipeline ``name`` (a ``project`` row or ``gen_ppi_<n>``), prepared
    (a ``tfrecord_*`` row builds its own shard folder here, before the timing)."""
    import hydra

    if name.startswith("gen_ppi_"):
        extra = ("generator", f"data.patches_per_image={name[8:]}", f"data.pool_size={GEN_POOL}")
    else:
        extra = PIPELINES[name][2]
    if name.startswith("tfrecord_"):
        extra = (*extra, f"data.tfrecord_dir={Path(a.work) / name}")
    cfg = compose_data(extra[0], a.folder, Path(a.work) / "data", *extra[1:])
    loader = hydra.utils.instantiate(cfg.data)
    loader.prepare()
    return loader


def build_pipeline(name: str, a):
    """(dataset, index_dataset or None, decode counter callable, loader or None)."""
    import tensorflow as tf

    from sr.bench import references as ref
    from sr.core.images import list_images

    files = list_images(a.folder)
    work = Path(a.work)
    if name in PIPELINES and PIPELINES[name][1] == "project" or name.startswith("gen_ppi_"):
        loader = project_loader(name, a)
        ds = loader.dataset()

        def decodes():  # the pool of the timed dataset() (patch_dataset() makes a new one)
            return loader.pool.decodes if hasattr(loader, "pool") else 0

        return ds, loader.patch_dataset, decodes, loader
    if name == "ref_a":
        counter = tf.Variable(0, dtype=tf.int64)
        return ref.naive(files, seed=0, decodes=counter), None, lambda: int(counter.numpy()), None
    if name == "ref_b":
        ds, source = ref.generator(files, seed=0)
        return ds, None, lambda: source.decodes, None
    if name == "ref_c":
        return ref.read_tfrecords(work / "ref_c", seed=0), None, lambda: 0, None
    if name == "ref_c_batched":
        return ref.read_tfrecords_batched(work / "ref_c", seed=0), None, lambda: 0, None
    if name == "ceiling":
        return ceiling(a, files), None, lambda: 0, None
    raise ValueError(f"unknown pipeline {name!r}; choose from {sorted(PIPELINES)}")


def ram_crops(files, crop: int):
    """About 4096 uint8 HR crops ``[crop, crop, 1]`` of the Y of ``files``, spread over every
    image and drawn independently (seed 0), and the image index of each."""
    import numpy as np

    from sr.core.images import load_y

    rng = np.random.default_rng(0)
    per = max(1, 4096 // len(files))
    crops, index = [], []
    for i, f in enumerate(files):
        y = load_y(f)
        for _ in range(per):
            top, left = rng.integers(y.shape[0] - crop + 1), rng.integers(y.shape[1] - crop + 1)
            crops.append(y[top : top + crop, left : left + crop, None])
            index.append(i)
    return np.stack(crops), np.asarray(index, np.int32)


def ceiling(a, files):
    """The project's post-decode graph (``PatchSource.to_pairs``, the same tail as ``dataset()``)
    fed from uint8 HR crops already in RAM (:func:`ram_crops`), plus the int32 image index."""
    import hydra
    import tensorflow as tf

    cfg = compose_data("tfrecord", a.folder, Path(a.work) / "data")
    loader = hydra.utils.instantiate(cfg.data)
    crops, index = ram_crops(files, loader.crop)
    hr, image = tf.constant(crops), tf.constant(index)
    n = len(crops)
    ds = tf.data.Dataset.random(seed=0).batch(loader.batch_size)
    ds = ds.map(lambda r: {"hr": tf.gather(hr, r % n), "image": tf.gather(image, r % n)})
    pairs = ds.enumerate().map(
        lambda i, b: (*loader.to_pairs(b, i), b["image"]), num_parallel_calls=tf.data.AUTOTUNE
    )
    options = tf.data.Options()
    options.deterministic = False
    return pairs.with_options(options).prefetch(tf.data.AUTOTUNE)


def run_worker(name: str, a) -> dict:
    """Build pipeline ``name`` and time it (:func:`sr.bench.timing.time_pipeline`); ``decode``:
    the files decoded alone (:func:`decode_alone`). Returns the row of ``bench_data.json``."""
    import numpy as np

    from sr.bench.measures import distinct_per_batch, ideal_distinct
    from sr.core.images import list_images

    if name == "decode":
        return decode_alone(a)
    n_images = len(list_images(a.folder))
    rss0 = rss_mb()
    ds, index_ds, decodes, loader = build_pipeline(name, a)
    shards = getattr(loader, "tfrecord_dir", None)
    t = time_pipeline(ds, decodes, a)
    seen, total, batch_size = t["seen"], t["total"], t["batch_size"]
    if index_ds is not None:  # the project's dataset() yields (lr, hr): indices from patch_dataset
        it = iter(index_ds())
        seen = [next(it)["image"].numpy() for _ in range(a.index_batches)]
        del it
    distinct = distinct_per_batch(np.concatenate(seen), batch_size) if seen else np.zeros(0)
    return {
        "name": name,
        "patches_per_s": t["rates"],
        **rate_stats(t["rates"]),
        "batch_size": batch_size,
        "first_batch_s": t["first_batch_s"],
        "patches_timed": total,
        "decodes_per_patch": t["dec"] / total,
        "bytes_read_per_patch": t["io"] / total,
        "distinct_mean": float(distinct.mean()) if len(distinct) else None,
        "distinct_min": int(distinct.min()) if len(distinct) else None,
        "distinct_batches": int(len(distinct)),
        "distinct_ideal": ideal_distinct(n_images, batch_size),
        "rss_start_mb": rss0,
        "peak_rss_mb": peak_rss_mb(),
        "cpu_s_per_1000": 1000 * t["cpu"] / total,
        "shard_bytes": sum(p.stat().st_size for p in shards.glob("*.tfrecord"))
        if shards
        else None,
    }


def decode_alone(a) -> dict:
    """Files decoded to Y alone by the generator's own decode (``load_y_pair``) on
    ``decode_workers`` threads: images/s, the generator's decode-bound rate per patch/decode."""
    from sr.core.images import list_images, load_y_pair

    cfg = compose_data("generator", a.folder, Path(a.work) / "data")
    workers = int(cfg.data.decode_workers)
    rates, cpu = time_decodes(lambda f: load_y_pair(f, None, 4), list_images(a.folder), workers, a)
    return {
        "name": "decode",
        "images_per_s": rates,
        **rate_stats(rates),
        "workers": workers,
        "cpu_ms_per_image": 1000 * cpu / (a.repeats * a.decode_images),
        "peak_rss_mb": peak_rss_mb(),
    }


def build_shards(a) -> dict:
    """Build the project's shards (as ``train.py`` would on first use) and reference (c)'s."""
    import time

    import hydra

    from sr.bench import references as ref
    from sr.core.images import list_images

    work = Path(a.work)
    cfg = compose_data("tfrecord", a.folder, work / "data")
    loader = hydra.utils.instantiate(cfg.data)
    t0 = time.perf_counter()
    manifest = loader.ensure_shards()
    t1 = time.perf_counter()
    ref_c = (
        0
        if (work / "ref_c").is_dir()
        else ref.gen_tfrecords(list_images(a.folder), work / "ref_c")
    )
    return {
        "project_records": manifest["records"],
        "project_build_s": t1 - t0,
        "project_bytes": sum(
            (loader.tfrecord_dir / s["file"]).stat().st_size for s in manifest["shards"]
        ),
        "ref_c_records": ref_c,
        "ref_c_build_s": time.perf_counter() - t1,
        "ref_c_bytes": sum(p.stat().st_size for p in (work / "ref_c").glob("*.tfrecords")),
    }
