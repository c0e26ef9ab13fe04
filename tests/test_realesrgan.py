"""Real-ESRGAN's degradation in the graph (``sr.degradations.realesrgan``), the ``degradation``
group and
``data.channels``: each operation against a reference, determinism per element, shapes in both
modes, the refusals, and the default pipeline untouched."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from scipy import ndimage, special
from skimage import data

import sr.degradations.kernels as K
import sr.degradations.realesrgan as R
from sr.config import ConfigError, build_source, compose, degradation_named
from sr.data.pairs import make_pairs

S = 4


def crop(size=128, top=100, left=150) -> np.ndarray:
    """uint8 [size, size, 3], a crop of scikit-image's astronaut (real texture and colour)."""
    return data.astronaut()[top : top + size, left : left + size]


# ------------------------------------------------------------------------------------------------
# Operations against references
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("quality", [30, 60, 95])
def test_jpeg_round_trip_equals_pillows(quality):
    """Same libjpeg encoder settings (4:2:0) and the accurate IDCT as Pillow: tolerance one
    level at most on a pixel and 0.01 on average (measured: identical pixels)."""
    image = crop()
    ours = R.jpeg(tf.constant(image, tf.float32) / 255.0, tf.constant(quality)).numpy() * 255
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, "JPEG", quality=quality)
    ref = np.asarray(Image.open(buf)).astype(np.float64)
    diff = np.abs(np.round(ours) - ref)
    assert diff.max() <= 1 and diff.mean() < 0.01
    assert np.abs(ref - image).mean() > 1  # the round trip did change the image


def test_isotropic_gaussian_kernel_equals_scipys():
    """A 13-pixel isotropic kernel of sigma 1.5 is scipy's Gaussian filter (radius 4 sigma = 6)
    of a unit impulse: both the normalised sampled Gaussian on the same square."""
    ours = K.gaussian_kernel(13, 1.5, 1.5, 0.0).numpy()
    impulse = np.zeros((21, 21))
    impulse[10, 10] = 1
    ref = ndimage.gaussian_filter(impulse, 1.5, truncate=4.0, mode="constant")
    np.testing.assert_allclose(ours, ref, atol=1e-7)
    assert ours[:4].sum() == 0 and ours[:, -4:].sum() == 0  # padded from 13 to 21


def test_kernel_families_follow_basicsrs_formulas():
    xx, yy = np.meshgrid(np.arange(-10.0, 11), np.arange(-10.0, 11))
    theta, sx, sy, beta = 0.7, 2.5, 1.0, 1.7
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    inv = np.linalg.inv(rot @ np.diag([sx**2, sy**2]) @ rot.T)  # BasicSR's sigma_matrix2
    grid = np.stack([xx, yy], -1)
    q = np.sum((grid @ inv) * grid, -1)
    for ours, ref in [
        (K.gaussian_kernel(21, sx, sy, theta), np.exp(-0.5 * q)),
        (K.generalized_kernel(21, sx, sy, theta, beta), np.exp(-0.5 * q**beta)),
        (K.plateau_kernel(21, sx, sy, theta, beta), 1 / (1 + q**beta)),
    ]:
        np.testing.assert_allclose(ours.numpy(), ref / ref.sum(), rtol=1e-4, atol=1e-7)
    # a rotation by 90 degrees swaps the axes; beta = 1 is the Gaussian
    np.testing.assert_allclose(
        K.gaussian_kernel(15, 2.0, 1.0, math.pi / 2),
        K.gaussian_kernel(15, 1.0, 2.0, 0.0),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        K.generalized_kernel(15, 2.0, 1.0, 0.3, 1.0),
        K.gaussian_kernel(15, 2.0, 1.0, 0.3),
        atol=1e-6,
    )


def test_sinc_kernel_is_the_circular_low_pass():
    cutoff, size = 1.3, 17
    x = np.arange(size) - size // 2
    r = np.hypot(*np.meshgrid(x, x))
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = cutoff * special.j1(cutoff * r) / (2 * np.pi * r)
    ref[size // 2, size // 2] = cutoff**2 / (4 * np.pi)
    ref = np.pad(ref / ref.sum(), 2)
    np.testing.assert_allclose(K.sinc_kernel(size, cutoff).numpy(), ref, atol=1e-6)


def test_random_kernels_sum_to_one_on_a_centred_odd_square():
    """60 kernels drawn at once (a batch): each sums to 1 on a centred odd square."""
    _, per_image = R.batch_draws(R.image_seed(3, tf.range(60, dtype=tf.int64)))
    first, second, final = (k.numpy() for k in R.kernels(per_image, R.Params()))
    sides = set()
    for k in (*first, *second):
        assert abs(k.sum() - 1) < 1e-5
        rows = np.flatnonzero(np.abs(k).sum(1) > 0)
        side = rows[-1] - rows[0] + 1
        assert side % 2 == 1 and rows[0] == (21 - side) // 2  # centred, odd
        np.testing.assert_allclose(k, k[::-1, ::-1], atol=1e-6)  # point-symmetric
        sides.add(side)
    assert len(sides) >= 5  # the side is drawn
    pulses = sum(np.count_nonzero(k) == 1 for k in final)  # no final sinc: 1 - 0.8 of them
    assert 3 <= pulses <= 25


def test_blur_is_a_reflect_101_correlation():
    """The batched blur (one depthwise convolution, a kernel per image) against scipy's
    correlate with ``mirror`` borders (= PyTorch's reflect = OpenCV's BORDER_REFLECT_101)."""
    images = np.stack([crop(40), crop(40, 10, 20)]).astype(np.float32) / 255
    kernels = np.random.default_rng(0).random((2, 21, 21)).astype(np.float32)  # not symmetric
    kernels /= kernels.sum(axis=(1, 2), keepdims=True)
    ours = K.blur_batch(tf.constant(images), tf.constant(kernels)).numpy()
    for image, kernel, out in zip(images, kernels, ours):
        ref = [ndimage.correlate(image[..., c], kernel, mode="mirror") for c in range(3)]
        np.testing.assert_allclose(out, np.stack(ref, -1), atol=2e-6)


def test_gaussian_noise_has_the_drawn_sigma_per_image_and_grey_noise_is_one_plane():
    flat = tf.fill([2, 256, 256, 3], 0.5)
    sigma = tf.constant([12.0, 4.0]) / 255
    for gray in (False, True):
        noisy = R.gaussian_noise(flat, sigma, tf.constant([gray] * 2), tf.constant([1, 2]))
        noise = (noisy.numpy() - 0.5) * 255
        for image, want in zip(noise, (12.0, 4.0)):
            assert abs(image.std() - want) < 0.03 * want and abs(image.mean()) < 0.3
            spread = np.abs(image[..., 0] - image[..., 1]).max()
            assert (spread < 1e-4) if gray else (spread > 3)


def test_grey_gaussian_noise_is_one_plane_for_the_batch_as_basicsr_draws_it():
    """BasicSR's ``generate_gaussian_noise_pt`` draws one grey plane ``[H, W]`` for the batch
    (``torch.randn(*img.size()[2:4])``), scaled by each image's sigma; colour noise is drawn
    per image. Here images 1 and 3 are grey: they share one plane, which is not the noise of
    colour images 0 and 2 (correlation ~0); a batch of one keeps its own channel 0 (the draw
    before issue 46, so the fixed degraded sets made one image at a time are unchanged)."""
    flat = tf.fill([4, 64, 64, 3], 0.5)
    sigma = tf.constant([3.0, 6.0, 9.0, 12.0]) / 255
    gray = tf.constant([False, True, False, True])
    noise = (R.gaussian_noise(flat, sigma, gray, tf.constant([7, 8])).numpy() - 0.5) * 255
    unit = noise / np.array([3.0, 6.0, 9.0, 12.0])[:, None, None, None]
    np.testing.assert_allclose(unit[1], unit[3], atol=1e-4)  # one plane for both grey images
    np.testing.assert_allclose(unit[1, ..., 0], unit[1, ..., 2], atol=1e-4)
    for colour in (0, 2):
        for c in range(3):
            r = np.corrcoef(unit[colour, ..., c].ravel(), unit[1, ..., 0].ravel())[0, 1]
            assert abs(r) < 0.1, (colour, c, r)
    one = R.gaussian_noise(flat[:1], sigma[1:2], gray[1:2], tf.constant([7, 8])).numpy()
    alone = tf.random.stateless_normal([1, 64, 64, 3], tf.constant([7, 8])).numpy()
    np.testing.assert_allclose((one[0] - 0.5) * 255 / 6.0, np.repeat(alone[0, ..., :1], 3, -1),
                               atol=1e-4)  # fmt: skip


def test_poisson_noise_is_unbiased_with_variance_image_over_levels():
    """On an image of 256 distinct levels v = 256: noise = Poisson(256 x) / 256 - x, so its mean
    is 0 and its variance E[x] / 256 (BasicSR's ``generate_poisson_noise_pt``); a grey image's
    noise is one plane, and its levels are those of its luma."""
    ramp = np.repeat(np.linspace(0.2, 0.8, 256, dtype=np.float32)[None], 256, 0)
    ramp[:, :128] = np.linspace(0, 1, 128 * 256).reshape(256, 128)  # all 256 levels present
    image = tf.constant(np.repeat(ramp[None, ..., None], 3, -1))
    for gray in (False, True):
        noisy = R.poisson_noise(
            image, tf.constant([1.0]), tf.constant([gray]), tf.constant([5, 6])
        )
        rounded = np.round(image.numpy() * 255) / 255
        noise = (noisy.numpy() - rounded)[0, :, 128:]  # levels 0.2..0.8: no clipping
        assert abs(noise.mean()) < 5e-4
        assert abs(noise.var() / (rounded[0, :, 128:].mean() / 256) - 1) < 0.05
        spread = np.abs(noise[..., 0] - noise[..., 2]).max()
        assert (spread < 1e-6) if gray else (spread > 0.01)


# ------------------------------------------------------------------------------------------------
# The whole degradation
# ------------------------------------------------------------------------------------------------
def test_degradation_is_a_function_of_the_batch_seeds():
    hr = tf.constant(np.repeat(crop(112)[None], 4, 0), tf.float32) / 255.0
    seeds = R.image_seed(7, tf.range(4, dtype=tf.int64))
    lr = R.degrade_batch(hr, S, seeds).numpy()
    assert lr.shape == (4, 28, 28, 3) and lr.dtype == np.float32
    assert lr.min() >= 0 and lr.max() <= 1 and np.abs(lr * 255 - np.round(lr * 255)).max() < 1e-4
    np.testing.assert_array_equal(lr, R.degrade_batch(hr, S, seeds).numpy())  # same seeds
    for i in range(4):  # the same crop, four elements: four different degradations (per-image
        for j in range(i):  # kernels, noise and JPEG qualities)
            assert np.abs(lr[i] - lr[j]).mean() > 1 / 255
    other_seed = R.degrade_batch(hr, S, R.image_seed(8, tf.range(4, dtype=tf.int64))).numpy()
    assert np.abs(other_seed - lr).mean() > 1 / 255


@pytest.mark.slow
def test_two_jpeg_round_trips_per_image():
    """Real-ESRGAN compresses each image twice (end of the first stage, and in the final
    random-order step); its second stage has no JPEG. Counted by the images passed to the JPEG
    coder over many batches (both final orders, every branch run eagerly)."""
    seen = []

    def counting(images, quality):
        seen.append(int(images.shape[0]))
        assert quality.shape == (images.shape[0],)  # a quality per image
        return R.libjpeg_batch(images, quality)

    hr = tf.constant(np.stack([crop(64, 10 * i, 20 * i) for i in range(3)]), tf.float32) / 255
    batches = 12
    for b in range(batches):
        R.degrade_batch(hr, S, R.image_seed(1, tf.range(3 * b, 3 * b + 3, dtype=tf.int64)),
                        jpeg_batch=counting)  # fmt: skip
    assert sum(seen) / (3 * batches) == 2.0


def test_whole_images_of_any_size_and_the_set_seed():
    image = crop(96)[:, :80]  # 96 x 80
    deg = degradation_named("realesrgan")
    lr = deg.lr_image(image, S, seed=3, index=1)
    assert lr.shape == (24, 20, 3) and lr.dtype == np.uint8
    np.testing.assert_array_equal(lr, deg.lr_image(image, S, seed=3, index=1))
    assert not np.array_equal(lr, deg.lr_image(image, S, seed=3, index=2))


def test_degradation_config_is_checked_with_the_key_named():
    with pytest.raises(ConfigError, match=r"degradation.kernel_prob .*sum to 1"):
        degradation_named("realesrgan", "degradation.kernel_prob=[0.5,0.5,0,0,0,0.5]")
    with pytest.raises(ConfigError, match=r"degradation.jpeg_range .*1\.\.100"):
        degradation_named("realesrgan", "degradation.jpeg_range=[30,120]")
    with pytest.raises(ConfigError, match="unknown degradation 'jpeg': choose one of bicubic"):
        degradation_named("jpeg")
    with pytest.raises(Exception, match="kernel_size"):  # not a key of the schema-less group
        degradation_named("realesrgan", "+degradation.kernel_size=3")
    for key, value, why in (
        ("device", "gpu", "degradation.device must be one of input, accelerator, got 'gpu'"),
        ("jpeg", "pillow", "degradation.jpeg must be one of auto, libjpeg, tensorflow"),
        ("gt_usm", "maybe", "degradation.gt_usm=.*not a valid bool"),  # refused on composing
    ):
        with pytest.raises(ConfigError, match=why):
            degradation_named("realesrgan", f"degradation.{key}={value}")


# ------------------------------------------------------------------------------------------------
# The data pipeline
# ------------------------------------------------------------------------------------------------
def _source(folders, tmp_path, mode, *overrides):
    extra = (
        (f"data.data_root={tmp_path / 'root'}", "data.num_shards=2") if mode == "tfrecord" else ()
    )
    cfg = compose(
        f"data={mode}",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data.batch_size=4",
        "data.deterministic=true",
        *extra,
        *overrides,
    )
    src = build_source(cfg)
    src.prepare()
    return src


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, overrides, channels",
    [
        ("generator", ("data.channels=rgb",), 3),
        ("tfrecord", ("data.channels=rgb",), 3),
        ("generator", ("degradation=realesrgan",), 1),
        ("tfrecord", ("degradation=realesrgan", "data.channels=rgb"), 3),
    ],
)
@pytest.mark.slow
def test_pairs_of_rgb_and_realesrgan_in_both_modes(folders, tmp_path, mode, overrides, channels):
    src = _source(folders, tmp_path, mode, *overrides)
    assert src.hr_channels == 3  # RGB crops in the pool and in the shards
    lr, hr = next(iter(src.dataset()))
    assert lr.shape == (4, 24, 24, channels) and hr.shape == (4, 96, 96, channels)
    assert lr.dtype == hr.dtype == tf.float32
    for x in (lr.numpy(), hr.numpy()):
        assert 0 <= x.min() and x.max() <= 1
    if channels == 3:  # RGB on the 8-bit grid; Y of the LR is unrounded (the model input)
        assert np.abs(lr * 255 - np.round(lr * 255)).max() < 1e-3
    if "realesrgan" not in str(overrides):  # the bicubic LR of each channel: its HR's
        small = tf.image.resize(hr, (24, 24), "area").numpy()
        assert np.abs(small - lr.numpy()).mean() < 0.01


STRIPPED = (  # Real-ESRGAN's degradation reduced to its resizes: no blur, noise or JPEG loss
    "degradation=realesrgan",
    "data.channels=rgb",
    "degradation.kernel_sizes=[3]",
    "degradation.blur_sigma=[0.01,0.01]",
    "degradation.blur_sigma2=[0.01,0.01]",
    "degradation.sinc_prob=0",
    "degradation.sinc_prob2=0",
    "degradation.final_sinc_prob=0",
    "degradation.resize_prob=[0,0,1]",
    "degradation.resize_prob2=[0,0,1]",
    "degradation.gaussian_noise_prob=1",
    "degradation.gaussian_noise_prob2=1",
    "degradation.noise_range=[0,0]",
    "degradation.noise_range2=[0,0]",
    "degradation.jpeg_range=[100,100]",
    "degradation.jpeg_range2=[100,100]",
    "degradation.gt_usm=false",
)


def test_the_degraded_lr_is_aligned_with_its_hr(folders, tmp_path):
    """With every loss switched off the degradation is resizes alone: its LR is then within a
    few grey levels of the bicubic LR of the same crop (an LR shifted by one pixel is not)."""
    ours = _source(folders, tmp_path, "generator", *STRIPPED)
    ref = _source(folders, tmp_path, "generator", "data.channels=rgb")
    patches = next(iter(ours.patch_dataset(0)))
    index = tf.constant(0, tf.int64)
    lr, hr = ours.to_pairs(patches, index)
    lr_ref, hr_ref = ref.to_pairs(patches, index)
    np.testing.assert_array_equal(hr.numpy(), hr_ref.numpy())
    a, b = lr.numpy()[:, 1:-1, 1:-1], lr_ref.numpy()
    diffs = {
        (dy, dx): np.abs(a - b[:, 1 + dy : 23 + dy, 1 + dx : 23 + dx]).mean() * 255
        for dy in (-1, 0, 1)
        for dx in (-1, 0, 1)
    }
    assert min(diffs, key=diffs.get) == (0, 0) and diffs[0, 0] < 4, diffs  # aligned, close


def _pairs(src, batches):
    """``(lr, hr)`` numpy of dataset elements: the input pipeline's pairs, or with
    ``degradation.device=accelerator`` the device stage applied to its clean crops."""
    stage = src.device_stage()
    return [tuple(t.numpy() for t in (stage(*b) if stage else b)) for b in batches]


def _seeded(folders, tmp_path, device):
    """The generator's RGB Real-ESRGAN source with libjpeg on ``device`` and its first three
    batches' pairs from batch 0."""
    src = _source(folders, tmp_path, "generator", "degradation=realesrgan", "data.channels=rgb",
                  f"degradation.device={device}", "degradation.jpeg=libjpeg")  # fmt: skip
    return src, _pairs(src, [b for b, _ in zip(src.dataset(0), range(3))])


@pytest.fixture(scope="module")
def on_input_rgb(folders, tmp_path_factory):
    """:func:`_seeded` on the input pipeline (device=input), made once for the two tests that
    read it (generator mode: nothing is written under the folder)."""
    return _seeded(folders, tmp_path_factory.mktemp("on_input_rgb"), "input")


@pytest.mark.slow
@pytest.mark.parametrize("device", ["input", "accelerator"])
def test_realesrgan_batches_are_seeded_and_resume_exactly(folders, tmp_path, device, request):
    if device == "input":
        src, batches = request.getfixturevalue("on_input_rgb")
    else:
        src, batches = _seeded(folders, tmp_path, device)
    resumed = _pairs(src, [next(iter(src.dataset(2)))])[0]
    for a, b in zip(resumed, batches[2]):  # the same seed and batch: the same pairs
        np.testing.assert_array_equal(a, b)  # a resume at batch 2 continues exactly
    assert np.abs(batches[0][0] - batches[1][0]).mean() > 1 / 255
    seeds = src.element_seeds(tf.zeros([4, 1]), tf.constant(2, tf.int64)).numpy()
    np.testing.assert_array_equal(seeds[:, 1], [8, 9, 10, 11])  # elements 8..11 of the stream


@pytest.mark.slow
@pytest.mark.parametrize("channels, coder", [("rgb", "auto"), ("y", "libjpeg")])
def test_the_accelerator_makes_the_input_pipelines_pairs(
    folders, tmp_path, channels, coder, request
):
    """degradation.device=accelerator: the input pipeline yields the flipped clean RGB crops
    (uint8, with their margin), their gray flags and seeds; the device stage then makes exactly
    the pairs the input pipeline makes with device=input and libjpeg: the same draws, and the
    batched TensorFlow JPEG (``auto`` on the accelerator) gives libjpeg's pixels."""
    common = ("degradation=realesrgan", f"data.channels={channels}")
    if channels == "rgb":  # the same source as the seeded test's on the input pipeline
        on_input, (theirs, *_) = request.getfixturevalue("on_input_rgb")
    else:
        on_input = _source(folders, tmp_path, "generator", *common, "degradation.jpeg=libjpeg")
        theirs = _pairs(on_input, [next(iter(on_input.dataset(0)))])[0]
    on_device = _source(folders, tmp_path, "generator", *common, "degradation.device=accelerator",
                        f"degradation.jpeg={coder}")  # fmt: skip
    assert on_device.degradation.jpeg_coder() == ("tensorflow" if coder == "auto" else coder)
    assert on_input.device_stage() is None
    hr, gray, seeds = next(iter(on_device.dataset(0)))
    assert hr.dtype == tf.uint8 and hr.shape == (4, 112, 112, 3) and gray.shape == (4,)
    assert seeds.dtype == tf.int64 and seeds.shape == (4, 2)
    ours = _pairs(on_device, [(hr, gray, seeds)])[0]
    c = 1 if channels == "y" else 3
    assert ours[0].shape == (4, 24, 24, c) and ours[1].shape == (4, 96, 96, c)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_the_hr_target_is_the_sharpened_crop(folders, tmp_path):
    """degradation.gt_usm (default true): the HR target is the USM-sharpened crop, rounded to 8
    bits; false gives the crop itself (the bicubic pairs' HR)."""
    from sr.degradations.usm import usm_sharp

    sharp = _source(folders, tmp_path, "generator", "degradation=realesrgan", "data.channels=rgb",
                    "degradation.device=accelerator")  # fmt: skip
    plain = _source(folders, tmp_path, "generator", "degradation=realesrgan", "data.channels=rgb",
                    "degradation.device=accelerator", "degradation.gt_usm=false")  # fmt: skip
    assert sharp.degradation.options.gt_usm and not plain.degradation.options.gt_usm
    hr, gray, seeds = next(iter(sharp.dataset(0)))
    m = sharp.margin
    want = np.round(usm_sharp(tf.cast(hr, tf.float32) / 255).numpy() * 255) / 255
    np.testing.assert_allclose(_pairs(sharp, [(hr, gray, seeds)])[0][1], want[:, m:-m, m:-m])
    got_plain = _pairs(plain, [(hr, gray, seeds)])[0][1]
    np.testing.assert_array_equal(got_plain, (hr.numpy()[:, m:-m, m:-m] / np.float32(255)))
    assert np.abs(want[:, m:-m, m:-m] - got_plain).max() > 5 / 255  # sharpening shows


def test_a_margin_of_its_own_is_degraded_and_cut(folders, tmp_path):
    """``degradation.margin=16``: the crops carry 16 HR pixels on every side, the pair is the
    degradation of the whole (flipped) crop with 16 HR and 4 LR pixels cut away, and the margin
    is part of the stream identity; a margin that is not a multiple of the scale is refused."""
    from sr.core.degrade import flip_batch
    from sr.data.pairs import degraded_pairs, random_masks

    rgb = ("degradation=realesrgan", "data.channels=rgb", "data.patch_size=32")
    src = _source(folders, tmp_path, "generator", *rgb, "degradation.margin=16")
    assert (src.margin, src.crop) == (16, 64)
    assert src.stream_identity()["degradation"]["margin"] == 16
    assert "margin" not in _source(folders, tmp_path, "generator", *rgb).degradation.identity()
    patches = next(iter(src.patch_dataset(0)))
    assert patches["hr"].shape == (4, 64, 64, 3)
    index = tf.constant(0, tf.int64)
    lr, hr = src.to_pairs(patches, index)
    assert lr.shape == (4, 8, 8, 3) and hr.shape == (4, 32, 32, 3)
    masks = random_masks(patches["hr"], src.flips, src.rot90, src.flip_seed(index))
    flipped = flip_batch(patches["hr"], (masks[0], masks[1], None))
    seeds = src.element_seeds(patches["hr"], index)
    ref = degraded_pairs(flipped, patches["gray"], S, 16, "rgb", src.degradation, seeds)
    for a, b in zip((lr, hr), ref):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ConfigError, match="degradation.margin=30 is not a multiple of data.scale"):
        build_source(compose(*rgb, "degradation.margin=30"))


def test_horizontal_flips_are_a_stream_of_their_own(folders, tmp_path):
    """``data.flips=h`` is named in the stream identity (a resume that changes it is not exact);
    ``none`` keeps the identity of ``data.flip=false`` before the key."""
    h = _source(folders, tmp_path, "generator", "data.flips=h").stream_identity()
    assert h["flips"] == "h" and h["flip"] is True
    off = _source(folders, tmp_path, "generator", "data.flips=none").stream_identity()
    assert "flips" not in off and off["flip"] is False


@pytest.mark.parametrize("mode", ["generator", "tfrecord"])
def test_the_default_pipeline_is_untouched(folders, tmp_path, mode):
    """degradation=bicubic with data.channels=y: Y crops, the pairs of ``make_pairs`` (the
    project's operator, tested in test_pairs.py) and the stream identity of before."""
    src = _source(folders, tmp_path, mode)
    assert src.hr_channels == 1 and src.degradation.name == "bicubic"
    identity = src.stream_identity()
    assert not {"channels", "degradation", "flips"} & set(identity) and identity["flip"] is True
    patches = next(iter(src.patch_dataset(0)))
    ours = src.to_pairs(patches, tf.constant(0, tf.int64))
    ref = make_pairs(
        patches["hr"], S, src.margin, flips="hv", seed=src.flip_seed(tf.constant(0, tf.int64))
    )
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (("data.channels=bgr",), "data.channels must be one of y, rgb, got 'bgr'"),
        (("data.channels=rgb", "data.lr_from=rgb"), "drop data.lr_from"),
        (("degradation=realesrgan", "data.lr_dir=/tmp"), "data.lr_dir=/tmp gives pre-made"),
        (("data=sequence", "data.channels=rgb"), "data=sequence decodes to Y only"),
        (
            ("degradation=realesrgan", "data.patch_size=16"),
            "needs crops of at least 44 pixels at x4; data.patch_size=16 gives 32",
        ),
    ],
)
def test_combinations_that_cannot_work_are_refused(folders, overrides, message):
    cfg = compose(f"data.hr_dir={folders / 'train'}", "data.val_dir=null", *overrides)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        build_source(cfg)


def test_a_degraded_run_is_validated_on_a_fixed_degraded_set(folders, tmp_path):
    """Validation LR of degradation=realesrgan: each validation image degraded with (0, i), the
    same in every run, not the bicubic LR (the best checkpoint is chosen on the LR trained for)."""
    from sr.core.degrade import make_lr
    from sr.core.images import load_image
    from sr.evaluation import modcrop
    from sr.train.validation import degraded_val_lr

    cfg = compose(
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        "degradation=realesrgan",
        "data.channels=rgb",
        f"data.data_root={tmp_path / 'root'}",
    )
    src = build_source(cfg)
    first, again = degraded_val_lr(src), degraded_val_lr(src)
    assert len(first) == len(src.val_files) == 2
    for lr, same, path in zip(first, again, src.val_files):
        hr = modcrop(load_image(path), 4)
        assert lr.dtype == np.uint8 and lr.shape == (
            hr.shape[0] // 4,
            hr.shape[1] // 4,
            hr.shape[2],
        )
        np.testing.assert_array_equal(lr, same)
        assert np.abs(lr.astype(float) - make_lr(hr, 4).numpy()).mean() > 1  # not bicubic
    assert degraded_val_lr(build_source(compose(f"data.hr_dir={folders / 'train'}"))) is None
