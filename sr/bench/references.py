"""The reference pipelines of ``../shared/references``, ported to TensorFlow 2 as faithfully as
possible: the baselines of ``scripts/bench_data.py`` and ``benchmarks/shuffle_report.py``.

They are benchmark baselines, not product code: they keep the references' choices (one decode
per patch; Python per patch; one Example per patch parsed and resized one at a time; a 2000-record
shuffle over records in sorted order), which are what the project's loaders improve on. Every
pipeline yields ``(lr, hr, image)`` batches: float32 ``[B, P/s, P/s, 1]`` and ``[B, P, P, 1]`` in
[0, 1] and the int32 source index ``[B]`` of each patch (added for the measurements; the
references yield ``(lr, hr)`` only).

Porting notes (TF1 -> TF2): ``tf.py_func`` -> ``tf.numpy_function``; ``scipy.misc.imread`` ->
Pillow; ``scipy.misc.imresize(x, 1/s, 'bicubic', 'F')`` -> Pillow's antialiased bicubic resize of
a float ``F`` image (what ``imresize`` called); ``utils.rgb2ycbcr`` -> the unrounded float Y of
``sr.core.color`` (the same BT.601 formula); ``tf.contrib.data.unbatch`` / one-shot iterators ->
TF2 equivalents.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import tensorflow as tf
from PIL import Image

from sr.core.color import rgb_to_ycbcr, y_channel
from sr.core.images import load_image, load_y

# The DataLoader defaults of reference 004.
SHUFFLE_NUM = 2000
PREFETCH_NUM = 1000
MAP_PARALLEL_NUM = 8
ONE_IMG_PATCH_NUM = 100
TFRECORD_NUM = 10


def imresize_f(gt: np.ndarray, scale: int) -> np.ndarray:
    """``scipy.misc.imresize(gt, 1 / scale, 'bicubic', mode='F')``: Pillow's bicubic resize
    (antialiased when downscaling) of a float image. float32 ``[h/s, w/s]``."""
    h, w = gt.shape[:2]
    im = Image.fromarray(np.ascontiguousarray(gt, dtype=np.float32))
    return np.asarray(im.resize((w // scale, h // scale), Image.BICUBIC), dtype=np.float32)


# -- (a) naive: one decode per patch (reference 000, the question's starting point) --
def naive(
    files,
    patch_size: int = 96,
    scale: int = 4,
    batch_size: int = 64,
    seed=None,
    decodes: tf.Variable | None = None,
) -> tf.data.Dataset:
    """File names shuffled, each decoded, one random crop taken, LR made per patch, batched.

    ``decodes``, if given, is an int64 variable incremented once per decoded file.
    """
    paths = [str(p) for p in files]
    p, s = patch_size, scale

    def parse(path, index):
        image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        if decodes is not None:
            with tf.control_dependencies([decodes.assign_add(1)]):
                image = tf.identity(image)
        crop = tf.image.random_crop(image, [p, p, 3])
        gt = rgb_to_ycbcr(tf.cast(crop, tf.float32))[..., :1]  # Y, float32 [p, p, 1]
        lr = tf.image.resize(gt, [p // s, p // s], "bicubic", antialias=True)
        gt, lr = gt / 255.0, lr / 255.0
        c1, c2 = tf.random.uniform([]), tf.random.uniform([])
        gt, lr = tf.cond(c1 < 0.5, lambda: (gt[::-1], lr[::-1]), lambda: (gt, lr))
        gt, lr = tf.cond(c2 < 0.5, lambda: (gt[:, ::-1], lr[:, ::-1]), lambda: (gt, lr))
        return lr, gt, index

    ds = tf.data.Dataset.from_tensor_slices((paths, tf.range(len(paths), dtype=tf.int32)))
    ds = ds.shuffle(len(paths), seed=seed).repeat()
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch_size).prefetch(1)


# -- (b) generator mode of reference 004 (get_generator / read_pngs) --
class ReferenceGenerator:
    """``get_generator``: sorted files, each decoded once, ``one_img_patch_num`` patches cut, Y,
    bicubic LR and flips computed per patch in NumPy/Pillow, one ``yield`` per patch."""

    def __init__(
        self, files, patch_size=96, scale=4, one_img_patch_num=ONE_IMG_PATCH_NUM, seed=None
    ):
        self.files = sorted(Path(f) for f in files)
        self.patch_size, self.scale, self.per_image = patch_size, scale, one_img_patch_num
        self.rng = np.random.default_rng(seed)
        self.decodes = 0

    def __call__(self):
        p, s, rng = self.patch_size, self.scale, self.rng
        for index, path in enumerate(self.files):
            img = load_image(path)
            if img.shape[-1] == 1:
                img = np.repeat(img, 3, axis=-1)
            self.decodes += 1
            height, width, _ = img.shape
            for _ in range(self.per_image):
                h = rng.integers(height - p + 1)
                w = rng.integers(width - p + 1)
                gt = np.float32(y_channel(img[h : h + p, w : w + p].astype(np.float64)))
                lr = imresize_f(gt, s)
                gt, lr = gt / 255.0, lr / 255.0
                if rng.random() < 0.5:
                    gt, lr = gt[::-1, :], lr[::-1, :]
                if rng.random() < 0.5:
                    gt, lr = gt[:, ::-1], lr[:, ::-1]
                yield lr, gt, index


def generator(
    files, patch_size=96, scale=4, batch_size=64, seed=None, one_img_patch_num=ONE_IMG_PATCH_NUM
):
    """``read_pngs``: ``from_generator`` -> shuffle(2000) -> prefetch(1000) -> batch -> repeat.

    Returns:
        ``(dataset, source)``; ``source.decodes`` counts decoded files.
    """
    source = ReferenceGenerator(files, patch_size, scale, one_img_patch_num, seed)
    p, q = patch_size, patch_size // scale
    ds = tf.data.Dataset.from_generator(
        source,
        output_signature=(
            tf.TensorSpec([q, q], tf.float32),
            tf.TensorSpec([p, p], tf.float32),
            tf.TensorSpec([], tf.int32),
        ),
    )
    ds = ds.shuffle(SHUFFLE_NUM, seed=seed).prefetch(PREFETCH_NUM).batch(batch_size).repeat()
    ds = ds.map(
        lambda lr, gt, i: (tf.reshape(lr, [-1, q, q, 1]), tf.reshape(gt, [-1, p, p, 1]), i)
    )
    return ds, source


# -- (c) TFRecord mode of reference 004 (gen_tfrecords / read_tfrecords) --
def gen_tfrecords(files, save_dir, patch_size=96, tfrecord_num=TFRECORD_NUM) -> int:
    """One Example per ``patch_size`` Y patch cut at stride ``patch_size // 3 * 2`` from the
    sorted files, dealt round-robin over ``tfrecord_num`` shards (``data%d.tfrecords``); adds an
    ``index`` feature (the source image) for the measurements. Returns the number of Examples."""
    os.makedirs(save_dir, exist_ok=True)
    writers = [
        tf.io.TFRecordWriter(os.path.join(save_dir, f"data{i}.tfrecords"))
        for i in range(tfrecord_num)
    ]
    sample_num, p = 0, patch_size
    step = p // 3 * 2
    try:
        for index, path in enumerate(sorted(Path(f) for f in files)):
            y = load_y(path)
            height, width = y.shape
            for h in range(0, height - p + 1, step):
                for w in range(0, width - p + 1, step):
                    gt = np.ascontiguousarray(y[h : h + p, w : w + p])
                    feature = {
                        "gt": tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[gt.tobytes()])
                        ),
                        "index": tf.train.Feature(int64_list=tf.train.Int64List(value=[index])),
                    }
                    example = tf.train.Example(features=tf.train.Features(feature=feature))
                    writers[sample_num % tfrecord_num].write(example.SerializeToString())
                    sample_num += 1
    finally:
        for w in writers:
            w.close()
    return sample_num


def _shard_paths(save_dir) -> list[str]:
    return sorted(str(p) for p in Path(save_dir).glob("*.tfrecords"))


# The reference's record ("gt": the 96x96 uint8 patch) plus the source index for the measurements.
FEATURES = {
    "gt": tf.io.FixedLenFeature([], tf.string),
    "index": tf.io.FixedLenFeature([], tf.int64),
}


def read_tfrecords(
    save_dir, patch_size=96, scale=4, batch_size=64, seed=None, shuffle_num=SHUFFLE_NUM, pairs=True
) -> tf.data.Dataset:
    """``read_tfrecords``: the shards read one after the other in name order, one Example parsed
    per ``map`` call with the LR made by ``numpy_function`` (``py_func``), flips by ``tf.cond``,
    shuffle(2000) -> prefetch(1000) -> batch -> repeat. ``pairs=False`` parses only the index
    (same order, for cheap shuffle-bias sweeps)."""
    p, s = patch_size, scale

    def parse_one_example(example):
        f = tf.io.parse_single_example(example, FEATURES)
        index = tf.cast(f["index"], tf.int32)
        if not pairs:
            return index
        gt = tf.cast(tf.reshape(tf.io.decode_raw(f["gt"], tf.uint8), [p, p]), tf.float32)
        lr = tf.numpy_function(lambda x: imresize_f(x, s), [gt], tf.float32)
        gt = tf.reshape(gt, [p, p, 1]) / 255.0
        lr = tf.reshape(lr, [p // s, p // s, 1]) / 255.0
        c1, c2 = tf.random.uniform([], 0, 1), tf.random.uniform([], 0, 1)
        gt, lr = tf.cond(c1 < 0.5, lambda: (gt[::-1, :], lr[::-1, :]), lambda: (gt, lr))
        gt, lr = tf.cond(c2 < 0.5, lambda: (gt[:, ::-1], lr[:, ::-1]), lambda: (gt, lr))
        return lr, gt, index

    ds = tf.data.TFRecordDataset(_shard_paths(save_dir))
    ds = ds.map(parse_one_example, MAP_PARALLEL_NUM)
    if shuffle_num > 1:
        ds = ds.shuffle(shuffle_num, seed=seed)
    return ds.prefetch(PREFETCH_NUM).batch(batch_size).repeat()


def read_tfrecords_batched(
    save_dir, patch_size=96, scale=4, batch_size=64, seed=None, shuffle_num=SHUFFLE_NUM
) -> tf.data.Dataset:
    """(c) reordered, the same records and shuffle: shuffle -> batch -> one vectorised map per
    batch (``parse_example``, TF bicubic on the whole batch, per-sample flips by ``tf.where``),
    no ``py_func``. Isolates what the order of ``map``/``batch`` and ``py_func`` cost."""
    p, s = patch_size, scale

    def parse_batch(serialized):
        f = tf.io.parse_example(serialized, FEATURES)
        gt = tf.cast(tf.reshape(tf.io.decode_raw(f["gt"], tf.uint8), [-1, p, p, 1]), tf.float32)
        lr = tf.image.resize(gt, [p // s, p // s], "bicubic", antialias=True)
        n = tf.shape(gt)[0]
        for axis in (1, 2):
            m = (tf.random.uniform([n]) < 0.5)[:, None, None, None]
            gt, lr = (
                tf.where(m, tf.reverse(gt, [axis]), gt),
                tf.where(m, tf.reverse(lr, [axis]), lr),
            )
        return lr / 255.0, gt / 255.0, tf.cast(f["index"], tf.int32)

    ds = tf.data.TFRecordDataset(_shard_paths(save_dir))
    ds = ds.shuffle(shuffle_num, seed=seed).repeat().batch(batch_size, drop_remainder=True)
    return ds.map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
