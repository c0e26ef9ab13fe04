"""The batched JPEG round trip in TensorFlow ops (``sr.degradations.jpeg``) against Pillow's
libjpeg.

Everything but the final k / 255 is integer arithmetic (carried exactly by float64 or int32),
the same on every CPU, GPU and under XLA, so the tests ask for Pillow's pixels exactly
(measured: identical at every quality 1..100, every size 1x1..11x11 and on photo crops).
A later Pillow built on another libjpeg (IJG 9 upsamples chroma by DCT scaling) would fail
them: that is a real change of the reference.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from sr.degradations.jpeg import jpeg_batch, quality_tables
from tests.conftest import photo, shared_folder

QUALITIES = (30, 50, 70, 80, 90, 95)
CARRIERS = pytest.mark.parametrize("dtype", [tf.float64, tf.int32], ids=["float64", "int32"])


def pillow_round_trip(image: np.ndarray, quality: int) -> np.ndarray:
    """uint8 ``[H, W, 3]`` -> Pillow's JPEG (its defaults: 4:2:0, ISLOW) decoded, uint8."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=int(quality))
    buf.seek(0)
    return np.asarray(Image.open(buf).convert("RGB"))


def ours(images: np.ndarray, qualities, dtype=tf.float64) -> np.ndarray:
    """uint8 ``[B, H, W, 3]`` -> :func:`jpeg_batch`'s output as uint8 (checked on the grid)."""
    images = tf.constant(images, tf.float32) / 255.0
    out = jpeg_batch(images, tf.constant(qualities), dtype=dtype).numpy()
    levels = np.round(out * 255.0)
    assert np.array_equal(out, levels.astype(np.float32) / np.float32(255.0)), "off the grid"
    return levels.astype(np.uint8)


def differences(a: np.ndarray, b: np.ndarray) -> str:
    d = np.abs(a.astype(int) - b.astype(int))
    mse = float(np.mean(d**2))
    psnr = 10 * np.log10(255.0**2 / mse) if mse else float("inf")
    return f"{int((d > 0).sum())} of {d.size} samples differ, max {d.max()}, PSNR {psnr:.2f} dB"


def set14_crops(size: int = 112) -> np.ndarray:
    """uint8 ``[4, size, size + 5, 3]``: centre crops of four Set14 photos (odd width)."""
    folder = shared_folder("Set14")
    crops = []
    for name in ("baboon", "comic", "lenna", "zebra"):
        image = np.asarray(Image.open(folder / f"{name}.png").convert("RGB"))
        top, left = (image.shape[0] - size) // 2, (image.shape[1] - size - 5) // 2
        crops.append(image[top : top + size, left : left + size + 5])
    return np.stack(crops)


@CARRIERS
def test_photos_equal_pillows_at_every_quality_of_realesrgan(dtype):
    """Set14 crops at the qualities of Real-ESRGAN's range, all in one batch: Pillow's pixels.
    (A float DCT instead of libjpeg's integer one gave 44-56 dB here, not identity.)"""
    crops = set14_crops()
    images = np.concatenate([crops] * len(QUALITIES))
    qualities = np.repeat(QUALITIES, len(crops))
    got = ours(images, qualities, dtype)
    for image, quality, out in zip(images, qualities, got, strict=True):
        want = pillow_round_trip(image, quality)
        assert np.array_equal(out, want), f"quality {quality}: {differences(out, want)}"


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (6, 3), (8, 8), (9, 13), (16, 16), (31, 17)])
@CARRIERS
def test_every_quality_and_small_or_odd_sizes_equal_pillows(shape, dtype):
    """Qualities 1..100 (with the baseline clamp of the tables below 25) on sizes that are no
    multiple of 16 and chroma planes 1 or 2 samples wide (libjpeg repeats those samples)."""
    h, w = shape
    image = photo("astronaut")[200 : 200 + h, 180 : 180 + w]
    qualities = np.arange(1, 101)
    got = ours(np.repeat(image[None], len(qualities), axis=0), qualities, dtype)
    for quality, out in zip(qualities, got, strict=True):
        want = pillow_round_trip(image, quality)
        assert np.array_equal(out, want), f"{h}x{w} q{quality}: {differences(out, want)}"


def test_tables_are_pillows():
    """The scaled IJG tables: what Pillow writes into the file, for every quality."""
    qualities = np.arange(1, 101)
    luma, chroma = (t.numpy() for t in quality_tables(qualities))
    image = photo("coffee")[:16, :16]
    for quality in qualities:
        buf = io.BytesIO()
        Image.fromarray(image).save(buf, format="JPEG", quality=int(quality))
        tables = Image.open(buf).quantization
        assert list(luma[quality - 1].ravel()) == list(tables[0]), f"luma q{quality}"
        assert list(chroma[quality - 1].ravel()) == list(tables[1]), f"chroma q{quality}"


def test_quality_is_per_image():
    """A batch of two qualities is the two single calls, and the two qualities differ."""
    crop = photo("coffee")[100:148, 200:260]
    batch = jpeg_batch(np.stack([crop, crop]) / 255.0, [20, 90]).numpy()
    low = jpeg_batch(crop[None] / 255.0, [20]).numpy()[0]
    high = jpeg_batch(crop[None] / 255.0, [90.0]).numpy()[0]
    assert np.array_equal(batch[0], low) and np.array_equal(batch[1], high)
    assert np.abs(low - high).mean() > 2 / 255, "quality 20 and 90 should differ clearly"


def test_float_quality_is_rounded_down_and_clamped():
    crop = np.asarray(photo("rocket")[50:90, 60:100], np.float32)[None] / 255.0
    assert np.array_equal(jpeg_batch(crop, [50.9]), jpeg_batch(crop, [50]))
    assert np.array_equal(jpeg_batch(crop, [0.0]), jpeg_batch(crop, [1]))
    assert np.array_equal(jpeg_batch(crop, [250]), jpeg_batch(crop, [100]))


def test_shape_kept_and_gray_stays_exactly_gray():
    """Gray in, Cb = Cr = 128 exactly (the integer weights sum to 2^15): gray out, any quality."""
    gray = photo("camera")[100:137, 50:95]  # 37 x 45
    rgb = np.repeat(gray[None, ..., None], 3, axis=-1)
    out = ours(np.concatenate([rgb, rgb]), [10, 75])
    assert out.shape == (2, 37, 45, 3)
    assert np.array_equal(out[..., 0], out[..., 1]) and np.array_equal(out[..., 0], out[..., 2])


@pytest.mark.slow
@CARRIERS
def test_compiled_with_xla_gives_the_same_pixels(dtype):
    """``tf.function(jit_compile=True)`` (the training step's compilation) and eager agree
    exactly, for a batch of qualities given as a float tensor."""
    crops = np.stack([photo("astronaut")[:24, :40], photo("chelsea")[:24, :40]]) / 255.0
    qualities = tf.constant([35.0, 85.0])
    compiled = tf.function(lambda x, q: jpeg_batch(x, q, dtype=dtype), jit_compile=True)
    assert np.array_equal(compiled(crops, qualities), jpeg_batch(crops, qualities, dtype=dtype))


def test_an_unknown_carrier_is_refused():
    with pytest.raises(ValueError, match="float32.* is not tf.int32 or tf.float64"):
        jpeg_batch(np.zeros([1, 8, 8, 3]), [50], dtype=tf.float32)


def test_unknown_shapes_in_a_graph_take_libjpegs_branch_at_run_time():
    """With no static width, the choice of upsampling (repeat for chroma 1-2 samples wide,
    else the triangle filter) is made in the graph: both widths equal eager (and Pillow)."""
    spec = [tf.TensorSpec([None, None, None, 3], tf.float32), tf.TensorSpec([None], tf.int32)]
    graph = tf.function(jpeg_batch, input_signature=spec)
    for width in (3, 13):
        crop = photo("astronaut")[120:130, 200 : 200 + width]
        got = graph(crop[None] / np.float32(255.0), tf.constant([60])).numpy()
        assert np.array_equal(np.round(got[0] * 255), pillow_round_trip(crop, 60)), width


def test_a_scalar_quality_applies_to_every_image():
    crops = np.stack([photo("astronaut")[:16, :24], photo("coffee")[:16, :24]]) / 255.0
    assert np.array_equal(jpeg_batch(crops, 40), jpeg_batch(crops, [40, 40]))
