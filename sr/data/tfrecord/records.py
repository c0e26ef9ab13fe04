"""The record format: one ``tf.train.Example`` per grid record (a patch, or a sub-image), written
by :func:`serialize_patches` and parsed a batch at a time by :func:`parse_batch`.

=============  ======  =====================================================================
key            type    meaning
=============  ======  =====================================================================
``hr``         bytes   uint8 HR Y patch, row-major, ``hr_height x hr_width x C``, with margin
                       (C = 1, or 3 for RGB sets)
``hr_height``  int64   rows of ``hr`` (HR patch size + 2 margin, or the sub-image size)
``hr_width``   int64   columns of ``hr``
``lr``         bytes   uint8 pre-made LR Y patch (only when built from ``data.lr_dir``)
``lr_height``  int64   rows of ``lr`` (0 without ``lr``)
``lr_width``   int64   columns of ``lr`` (0 without ``lr``)
``image``      int64   index of the source image in ``manifest["images"]`` (name order)
``y``, ``x``   int64   top-left corner of ``hr`` in the source image (pixels)
``gray``       int64   RGB sets only: 1 for a gray image (its value in all three channels)
=============  ======  =====================================================================
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from sr.data.tfrecord.params import PatchParams


def _int64(v) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))


def _bytes(b: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[b]))


def grid_positions(height: int, width: int, crop: int, stride: int, align: int = 1):
    """Top-left corners ``[(y, x), ...]`` of ``crop x crop`` windows at ``stride`` (multiples of
    ``align``) covering an image; the last row and column are pushed to the far border so that
    the image's bottom and right edges are used too."""

    def axis(n):
        last = (n - crop) // align * align
        pos = list(range(0, last + 1, stride))
        if pos[-1] != last:
            pos.append(last)
        return pos

    return [(y, x) for y in axis(height) for x in axis(width)]


def serialize_patches(
    index: int, hr: np.ndarray, lr: np.ndarray | None, params: PatchParams, gray: bool = False
):
    """Serialized Examples of every grid record (patch or sub-image) of one image (Y uint8
    ``[H, W]``, or RGB ``[H, W, 3]`` with ``gray`` for an RGB set)."""
    s, side = params.scale, params.record
    align = s if lr is not None else 1
    stride = max(align, params.stride // align * align)
    out = []
    for y, x in grid_positions(hr.shape[0], hr.shape[1], side, stride, align):
        feat = {
            "hr": _bytes(hr[y : y + side, x : x + side].tobytes()),
            "hr_height": _int64(side),
            "hr_width": _int64(side),
            "image": _int64(index),
            "y": _int64(y),
            "x": _int64(x),
        }
        if params.channels == 3:
            feat["gray"] = _int64(gray)
        if lr is not None:
            p = side // s
            feat["lr"] = _bytes(lr[y // s : y // s + p, x // s : x // s + p].tobytes())
            feat["lr_height"] = feat["lr_width"] = _int64(p)
        else:
            feat["lr"] = _bytes(b"")
            feat["lr_height"] = feat["lr_width"] = _int64(0)
        out.append(tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString())
    return out


def feature_spec() -> dict:
    """The ``tf.io.parse_example`` spec of a record (the keys of the table above)."""
    return {
        "hr": tf.io.FixedLenFeature([], tf.string),
        "hr_height": tf.io.FixedLenFeature([], tf.int64),
        "hr_width": tf.io.FixedLenFeature([], tf.int64),
        "lr": tf.io.FixedLenFeature([], tf.string),
        "lr_height": tf.io.FixedLenFeature([], tf.int64),
        "lr_width": tf.io.FixedLenFeature([], tf.int64),
        "image": tf.io.FixedLenFeature([], tf.int64),
        "y": tf.io.FixedLenFeature([], tf.int64),
        "x": tf.io.FixedLenFeature([], tf.int64),
        "gray": tf.io.FixedLenFeature([], tf.int64, default_value=0),  # RGB sets only
    }


def _decode_raw(raw, height, width, want: int, channels: int = 1) -> tf.Tensor:
    """uint8 ``[B, want, want, channels]`` from a batch of byte strings, checked against stored
    shapes."""
    check = tf.debugging.assert_equal(
        tf.stack([height, width]),
        tf.cast(want, tf.int64),
        message=f"record shape differs from the manifest's {want}x{want}: rebuild the shards",
    )
    with tf.control_dependencies([check]):
        flat = tf.io.decode_raw(raw, tf.uint8)
    batch = raw.shape[0] if raw.shape[0] is not None else -1  # keep a static batch size
    return tf.reshape(flat, [batch, want, want, channels])


def parse_batch(serialized: tf.Tensor, params: PatchParams) -> dict[str, tf.Tensor]:
    """Parse a batch of serialized Examples (one vectorised ``parse_example``).

    Returns:
        ``{"hr": uint8 [B, R, R, C], "image": int32 [B]}`` plus ``"lr": uint8 [B, R/s, R/s, 1]``
        for shards built from pre-made LR, and ``"gray"`` bool ``[B]`` for RGB sets (C = 3);
        R = ``params.record`` (the crop, or the sub-image).
    """
    f = tf.io.parse_example(serialized, feature_spec())
    out = {
        "hr": _decode_raw(f["hr"], f["hr_height"], f["hr_width"], params.record, params.channels),
        "image": tf.cast(f["image"], tf.int32),
    }
    if params.channels == 3:
        out["gray"] = f["gray"] > 0
    if params.lr_dir is not None:
        p = params.record // params.scale
        out["lr"] = _decode_raw(f["lr"], f["lr_height"], f["lr_width"], p)
    return out
