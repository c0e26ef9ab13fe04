"""tests/oracles/realesrgan.py, the NumPy/OpenCV reference of Real-ESRGAN's degradation: kernels
against BasicSR's formulas and a sampled Gaussian, each operation against an independent
reference (scipy, Pillow, block means), noise statistics, the output contract, determinism per
seed, the parameters against the project's config, and its timing by ``sr.bench`` (the reference
rows of ``scripts/bench_data.py --degradation``)."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import scipy.ndimage
import scipy.optimize
import scipy.special
import skimage.data
from omegaconf import OmegaConf
from PIL import Image

from sr.bench import degradation_runs
from sr.config import compose
from tests.oracles import realesrgan as ref


def astronaut(size: int = 112, top: int = 100, left: int = 150) -> np.ndarray:
    """A real RGB crop, float32 [size, size, 3] in [0, 1]."""
    image = skimage.data.astronaut()[top : top + size, left : left + size]
    return image.astype(np.float32) / 255.0


# ------------------------------------------------------------------------------------------------
# Kernels
# ------------------------------------------------------------------------------------------------
def test_gaussian_kernel_follows_the_bivariate_formula():
    sx, sy = 1.3, 0.6
    k = ref.gaussian_kernel(7, sx, sy, 0.0, pad_to=0)
    c = 3
    assert k.shape == (7, 7) and k.sum() == pytest.approx(1.0, abs=1e-12)
    # theta = 0: x (columns) has sigma_x, y (rows) sigma_y
    assert k[c, c + 1] / k[c, c] == pytest.approx(math.exp(-0.5 / sx**2), rel=1e-12)
    assert k[c + 1, c] / k[c, c] == pytest.approx(math.exp(-0.5 / sy**2), rel=1e-12)
    assert k[c + 2, c + 1] / k[c, c] == pytest.approx(
        math.exp(-0.5 * (1 / sx**2 + 4 / sy**2)), rel=1e-12
    )
    # a quarter turn swaps the axes; the isotropic kernel ignores theta
    turned = ref.gaussian_kernel(7, sx, sy, math.pi / 2, pad_to=0)
    np.testing.assert_allclose(turned, ref.gaussian_kernel(7, sy, sx, 0.0, pad_to=0), atol=1e-12)
    np.testing.assert_allclose(
        ref.gaussian_kernel(9, 1.1, 1.1, 0.7), ref.gaussian_kernel(9, 1.1, 1.1, 0.0), atol=1e-12
    )


def test_rotated_gaussian_matches_the_covariance_formula():
    """theta = pi/4: Sigma^-1 = [[(a + b)/2, (a - b)/2], [(a - b)/2, (a + b)/2]] with
    a = 1/sx^2, b = 1/sy^2."""
    sx, sy, c = 2.0, 0.5, 10
    k = ref.gaussian_kernel(21, sx, sy, math.pi / 4, pad_to=0)
    a, b = 1 / sx**2, 1 / sy**2
    inv_xx = inv_yy = (a + b) / 2
    inv_xy = (a - b) / 2
    q = inv_xx + 2 * inv_xy + inv_yy  # at (x, y) = (1, 1)
    assert k[c + 1, c + 1] / k[c, c] == pytest.approx(math.exp(-0.5 * q), rel=1e-12)
    assert k.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("sigma", [0.2, 0.8, 1.7, 3.0])
def test_isotropic_gaussian_is_the_sampled_2d_gaussian(sigma):
    """scipy's Gaussian filter of a delta (sampled, normalised, radius 10) is the same kernel."""
    delta = np.zeros((21, 21))
    delta[10, 10] = 1.0
    sampled = scipy.ndimage.gaussian_filter(delta, sigma, mode="constant", truncate=10 / sigma)
    np.testing.assert_allclose(ref.gaussian_kernel(21, sigma, sigma, 0.0), sampled, atol=1e-12)


def test_generalized_and_plateau_kernels_follow_their_formulas():
    s, beta, c = 1.5, 0.7, 5
    g = ref.generalized_kernel(11, s, s, 0.0, beta, pad_to=0)
    p = ref.plateau_kernel(11, s, s, 0.0, beta, pad_to=0)
    q = 1 / s**2  # at distance 1
    assert g[c, c + 1] / g[c, c] == pytest.approx(math.exp(-0.5 * q**beta), rel=1e-12)
    assert p[c, c + 1] / p[c, c] == pytest.approx(1 / (1 + q**beta), rel=1e-12)
    assert g[c + 2, c + 2] / g[c, c] == pytest.approx(math.exp(-0.5 * (8 * q) ** beta), rel=1e-12)
    assert g.sum() == pytest.approx(1.0) and p.sum() == pytest.approx(1.0)
    # beta = 1: the generalized Gaussian is the Gaussian
    np.testing.assert_allclose(
        ref.generalized_kernel(13, 2.0, 0.9, 0.3, 1.0), ref.gaussian_kernel(13, 2.0, 0.9, 0.3)
    )


def test_sinc_kernel_centre_and_ring_values():
    cutoff, size, c = 1.1, 9, 4
    k = ref.sinc_kernel(size, cutoff, pad_to=0)
    norm = (cutoff**2 / (4 * math.pi)) / k[c, c]  # the unnormalised centre is w^2 / (4 pi)
    for dy, dx in [(0, 1), (1, 1), (2, 3), (4, 4)]:
        r = math.hypot(dy, dx)
        want = cutoff * scipy.special.j1(cutoff * r) / (2 * math.pi * r)
        assert k[c + dy, c + dx] * norm == pytest.approx(want, rel=1e-10)
    assert k.sum() == pytest.approx(1.0, abs=1e-12)
    # the centre is the limit of the ring formula at r -> 0
    r = 1e-6
    limit = cutoff * scipy.special.j1(cutoff * r) / (2 * math.pi * r)
    assert limit == pytest.approx(cutoff**2 / (4 * math.pi), rel=1e-9)


def test_kernels_are_normalised_before_zero_padding():
    small = ref.sinc_kernel(7, 2.0, pad_to=0)
    padded = ref.sinc_kernel(7, 2.0)
    assert padded.shape == (21, 21)
    np.testing.assert_array_equal(padded[7:14, 7:14], small)
    assert np.count_nonzero(padded) == np.count_nonzero(small)
    assert padded.sum() == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match="odd"):
        ref.gaussian_kernel(8, 1.0, 1.0, 0.0)


def test_random_kernels_sum_to_one_and_honour_the_probabilities():
    for seed in range(60):
        rng = np.random.default_rng(seed)
        for k in (
            ref.random_kernel(rng, 1),
            ref.random_kernel(rng, 2),
            ref.final_sinc_kernel(rng),
        ):
            assert k.shape == (21, 21) and k.dtype == np.float64
            assert k.sum() == pytest.approx(1.0, abs=1e-9)
    rng = np.random.default_rng(0)
    iso = ref.random_kernel(rng, 1, dict(kernel_prob=(1, 0, 0, 0, 0, 0), sinc_prob=0.0))
    np.testing.assert_allclose(iso, iso.T, atol=1e-15)  # isotropic: symmetric
    assert iso.min() >= 0
    sinc = ref.random_kernel(rng, 2, dict(sinc_prob2=1.0))
    assert sinc.min() < 0  # the sinc's negative lobes
    pulse = ref.final_sinc_kernel(rng, dict(final_sinc_prob=0.0))
    assert pulse[10, 10] == 1.0 and pulse.sum() == 1.0
    aniso = dict(kernel_prob=(0, 1, 0, 0, 0, 0), sinc_prob=0.0)
    asymmetry = [
        np.abs(k - k.T).max() for k in (ref.random_kernel(rng, 1, aniso) for _ in range(8))
    ]
    assert max(asymmetry) > 1e-3  # rotated, unequal sigmas


def sinc_cutoff(kernel: np.ndarray) -> float:
    """The cutoff w_c of a sinc kernel from its first neighbour: k(1) / k(0) = 2 J1(w_c) / w_c,
    decreasing on (0, 3.8)."""
    c = kernel.shape[0] // 2
    ratio = kernel[c, c + 1] / kernel[c, c]
    return scipy.optimize.brentq(
        lambda w: 2 * scipy.special.j1(w) / w - ratio, 1e-3, math.pi + 0.01
    )


@pytest.mark.parametrize("size, low", [(7, math.pi / 3), (11, math.pi / 3), (13, math.pi / 5)])
def test_random_sinc_cutoffs_follow_the_kernel_size(size, low):
    """realesrgan_dataset.py: w_c in [pi/3, pi] below side 13, [pi/5, pi] from 13 on."""
    rng = np.random.default_rng(size)
    params = dict(kernel_sizes=(size,), sinc_prob=1.0, final_sinc_prob=1.0)
    cutoffs = [sinc_cutoff(ref.random_kernel(rng, 1, params)) for _ in range(300)]
    assert low - 1e-6 <= min(cutoffs) < low + 0.05 and max(cutoffs) > math.pi - 0.05
    final = [sinc_cutoff(ref.final_sinc_kernel(rng, params)) for _ in range(300)]
    assert math.pi / 3 - 1e-6 <= min(final) < math.pi / 3 + 0.05  # whatever the side


# ------------------------------------------------------------------------------------------------
# Operations
# ------------------------------------------------------------------------------------------------
def test_blur_is_a_correlation_with_reflect_101_borders():
    image = astronaut(40)
    kernel = np.random.default_rng(0).random((21, 21))
    kernel /= kernel.sum()  # asymmetric: a convolution would differ
    want = np.stack(
        [scipy.ndimage.correlate(image[..., c], kernel, mode="mirror") for c in range(3)], -1
    )
    np.testing.assert_allclose(ref.blur(image, kernel), want, atol=2e-6)
    np.testing.assert_array_equal(ref.blur(image, ref.pulse_kernel()), image)


def test_resize_modes_and_the_smallest_side():
    image = astronaut(40)
    blocks = image.reshape(20, 2, 20, 2, 3).mean(axis=(1, 3))
    np.testing.assert_allclose(ref.resize(image, (20, 20), "area"), blocks, atol=1e-6)
    # bilinear at half size and half-pixel centres: the mean of each 2x2 block too
    np.testing.assert_allclose(ref.resize(image, (20, 20), 1), blocks, atol=1e-6)
    assert ref.resize(image, (5, 30), "bicubic").shape == (ref.MIN_SIDE, 30, 3)
    with pytest.raises(ValueError, match="resize mode"):
        ref.resize(image, (20, 20), "nearest")


@pytest.mark.parametrize("quality", [30, 75, 95])
def test_jpeg_is_pillows_rgb_round_trip(quality):
    """Same libjpeg settings as Pillow (4:2:0, accurate IDCT) on RGB: equal pixels; swapped
    channels would change the chroma and the pixels."""
    image = astronaut(64)
    buf = io.BytesIO()
    Image.fromarray(np.round(image * 255).astype(np.uint8)).save(buf, "JPEG", quality=quality)
    want = np.asarray(Image.open(buf), np.float32) / 255.0
    out = ref.jpeg(image, quality + 0.9)  # the quality is rounded down
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("gray", [False, True])
def test_gaussian_noise_statistics(gray):
    flat = np.full((512, 512, 3), 0.5, np.float32)
    out = ref.gaussian_noise(flat, 10.0, gray, np.random.default_rng(0))
    noise = (out - 0.5) * 255.0  # sigma 10 on 0..255: no clipping
    assert out.dtype == np.float32 and out.shape == flat.shape
    assert abs(noise.mean()) < 0.05
    assert noise.std() == pytest.approx(10.0, rel=0.003)  # ~4 standard errors (0.08 %)
    corr = np.corrcoef(noise[..., 0].ravel(), noise[..., 2].ravel())[0, 1]
    assert corr == pytest.approx(1.0) if gray else abs(corr) < 0.02


def test_poisson_noise_variance_uses_the_power_of_two_levels():
    """Three levels -> v = 4: noise variance x / v times scale^2 at level x."""
    levels = (51 / 255, 102 / 255, 153 / 255)  # on the 8-bit grid: no rounding
    image = np.concatenate([np.full((200, 200, 3), x, np.float32) for x in levels])
    scale, v = 0.1, 4.0
    out = ref.poisson_noise(image, scale, False, np.random.default_rng(1))
    for k, x in enumerate(levels):
        noise = out[200 * k : 200 * (k + 1)] - image[200 * k : 200 * (k + 1)]
        want = math.sqrt(x / v) * scale  # no clipping: the noise is >= -x scale
        assert noise.std() == pytest.approx(want, rel=0.02), x
        assert abs(noise.mean()) < want / 50
    gray = ref.poisson_noise(image, scale, True, np.random.default_rng(1))
    np.testing.assert_array_equal(gray[..., 0] - image[..., 0], gray[..., 2] - image[..., 2])


def test_grey_poisson_noise_is_the_noise_of_the_luma():
    """One level of luma 0.2989 R + 0.587 G + 0.114 B = 87/255 -> v = 1: std sqrt(87/255)
    scale (R alone: sqrt(0.6); BGR weights: sqrt(78/255), 5 % less)."""
    image = np.empty((256, 256, 3), np.float32)
    image[:] = (0.6, 0.2, 0.4)
    scale = 0.05
    out = ref.poisson_noise(image, scale, True, np.random.default_rng(2))
    noise = out - image
    np.testing.assert_allclose(noise[..., 0], noise[..., 1], atol=1e-6)  # float32 sums
    assert noise.std() == pytest.approx(math.sqrt(87 / 255) * scale, rel=0.02)


# ------------------------------------------------------------------------------------------------
# The degradation
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, scale", [((112, 112), 4), ((96, 120), 4), ((48, 60), 2)])
def test_degrade_output_contract(shape, scale):
    hr = astronaut(128)[: shape[0], : shape[1]]
    for seed in range(8):
        lr = ref.degrade(hr, scale, np.random.default_rng(seed))
        assert lr.shape == (shape[0] // scale, shape[1] // scale, 3) and lr.dtype == np.float32
        assert lr.min() >= 0.0 and lr.max() <= 1.0
        np.testing.assert_allclose(lr * 255, np.round(lr * 255), atol=1e-4)  # 8-bit grid


# every step (nearly) the identity: Gaussian blurs of sigma 0.2 (weight 4e-6 off the centre),
# resizes by 1 but the last, zero noise, JPEG at 95, no second blur, no final sinc; the draws of
# a changed step are as many as of its neutral form, so each seed keeps the same other draws
NEUTRAL = dict(kernel_sizes=(21,), second_blur_prob=0.0, final_sinc_prob=0.0)
NEUTRAL |= dict(resize_range=(0.2, 1.0), resize_range2=(0.5, 1.0))
for sfx in ("", "2"):
    NEUTRAL |= {
        f"kernel_prob{sfx}": (1, 0, 0, 0, 0, 0),
        f"sinc_prob{sfx}": 0.0,
        f"blur_sigma{sfx}": (0.2, 0.2),
        f"resize_prob{sfx}": (1.0, 0.0, 0.0),  # "up" by uniform(1, 1): one draw, as "down"
        f"gaussian_noise_prob{sfx}": 1.0,
        f"noise_range{sfx}": (0.0, 0.0),
        f"poisson_scale_range{sfx}": (0.0, 0.0),
        f"jpeg_range{sfx}": (95.0, 95.0),
    }


def neutral_and(params: dict, seeds=range(8)) -> np.ndarray:
    """The LRs ``[len(seeds), 28, 28, 3]`` of :func:`astronaut` at x4 with :data:`NEUTRAL`
    updated by ``params``, image k drawn from seed k."""
    hr = astronaut()
    return np.stack(
        [ref.degrade(hr, 4, np.random.default_rng(s), {**NEUTRAL, **params}) for s in seeds]
    )


def detail(lrs: np.ndarray) -> float:
    """Mean absolute horizontal difference of ``lrs`` (grey levels)."""
    return float(np.abs(np.diff(lrs, axis=2)).mean() * 255)


@pytest.mark.parametrize(
    "step, change, effect",
    [
        ("first blur", {"blur_sigma": (3.0, 3.0)}, "less"),
        ("first resize", {"resize_prob": (0.0, 1.0, 0.0)}, None),
        ("first noise", {"noise_range": (25.0, 25.0)}, "more"),
        ("first JPEG", {"jpeg_range": (30.0, 30.0)}, None),
        ("second blur", {"second_blur_prob": 1.0, "blur_sigma2": (1.5, 1.5)}, "less"),
        ("second resize", {"resize_prob2": (0.0, 1.0, 0.0)}, None),
        ("second noise", {"noise_range2": (25.0, 25.0)}, "more"),
        (
            "Poisson noise",
            {"gaussian_noise_prob2": 0.0, "poisson_scale_range2": (3.0, 3.0)},
            "more",
        ),
        ("last JPEG", {"jpeg_range2": (30.0, 30.0)}, None),
    ],
)
def test_every_step_reaches_the_lr(step, change, effect):
    """Each step turned on alone moves the LR by over 1 grey level on average, and changes its
    detail by over 10 % the way it should (blurs remove, noise adds; resizes and JPEG have no
    sure direction: the unantialiased last resize of the neutral LR aliases)."""
    base, changed = neutral_and({}), neutral_and(change)
    assert np.abs(changed - base).mean() * 255 > 1.0, step
    if effect == "less":
        assert detail(changed) < 0.9 * detail(base), step
    elif effect == "more":
        assert detail(changed) > 1.1 * detail(base), step


def test_the_final_filter_applies_in_both_orders(monkeypatch):
    """A flat 21 x 21 box as the final filter: every LR (both orders of [resize + filter] and
    JPEG, one half each over the seeds) is nearly flat."""
    box = np.full((21, 21), 1 / 441)
    monkeypatch.setattr(ref, "final_sinc_kernel", lambda rng, params=None: box)
    boxed = neutral_and({}, range(12))
    monkeypatch.undo()
    plain = neutral_and({}, range(12))
    per_image = np.abs(np.diff(boxed, axis=2)).mean(axis=(1, 2, 3)) * 255
    assert per_image.max() < 0.25 * detail(plain), per_image


@pytest.mark.parametrize("second_blur_prob, blurs", [(1.0, 3), (0.0, 2)])
def test_each_image_goes_through_every_step(monkeypatch, second_blur_prob, blurs):
    """Per image, in either final order: 3 resizes, 2 noises, 2 JPEGs, and 3 blurs (2 without
    the second blur; the final filter is a blur, a pulse or a sinc)."""
    calls = []
    for name in ("blur", "resize", "jpeg", "gaussian_noise", "poisson_noise"):
        op = getattr(ref, name)
        monkeypatch.setattr(ref, name, lambda *a, op=op, name=name: calls.append(name) or op(*a))
    for seed in range(8):
        calls.clear()
        ref.degrade(
            astronaut(), 4, np.random.default_rng(seed), {"second_blur_prob": second_blur_prob}
        )
        noises = calls.count("gaussian_noise") + calls.count("poisson_noise")
        counts = (calls.count("blur"), calls.count("resize"), calls.count("jpeg"), noises)
        assert counts == (blurs, 3, 2, 2), (seed, calls)


def test_same_seed_same_lr_different_seed_different():
    hr = np.round(astronaut() * 255).astype(np.uint8)
    a = ref.degrade_uint8(hr, 4, 3)
    assert a.dtype == np.uint8 and a.shape == (28, 28, 3)
    np.testing.assert_array_equal(a, ref.degrade_uint8(hr, 4, 3))
    assert not np.array_equal(a, ref.degrade_uint8(hr, 4, 4))
    assert not np.array_equal(a, ref.degrade_uint8(hr, 4, (3, 1)))


def test_refusals_name_the_fault():
    with pytest.raises(ValueError, match="noise_range3"):
        ref.degrade(astronaut(), 4, np.random.default_rng(0), {"noise_range3": (1, 2)})
    with pytest.raises(ValueError, match="too small at x4"):
        ref.degrade(astronaut(40), 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"\[H, W, 3\]"):
        ref.degrade(astronaut()[..., 0], 4, np.random.default_rng(0))


def test_paper_parameters_are_the_projects_config():
    """One dict drives both: PAPER is the config of ``degradation=realesrgan`` (the TF graph's:
    its schema's defaults, which conf/degradation/realesrgan.yaml does not restate), and
    full_params accepts that config as it is."""
    cfg = OmegaConf.to_container(compose("degradation=realesrgan").degradation)
    assert cfg.pop("_target_") == "sr.degradations.realesrgan.RealESRGAN"
    # how the graph runs, not what it draws: the official options sharpen the target (gt_usm)
    # (and the crop's margin and the pair pool: around the degradation, not in it)
    assert {k: cfg.pop(k) for k in ("gt_usm", "device", "jpeg", "margin", "pool_size")} == {
        "gt_usm": True,
        "device": "input",
        "jpeg": "auto",
        "margin": None,
        "pool_size": 0,
    }
    as_lists = {k: list(v) if isinstance(v, tuple) else v for k, v in ref.PAPER.items()}
    assert cfg == as_lists
    assert ref.full_params(cfg) == {**ref.PAPER, **cfg}


def test_bench_times_the_reference_passed_in_on_every_crop(tmp_path):
    """The reference rows of ``python -m benchmarks.realesrgan_reference``, in process:
    ``sr.bench`` degrades each crop once per timed chunk (after a warm-up), seeded ``(0, i)``,
    with the function it is given, and reports its rates; ``scripts/bench_data.py
    --degradation`` (a user command, which must not need ``tests/``) has no reference row, and
    its table gives the ratios once the study has added them."""
    folder = tmp_path / "hr"
    folder.mkdir()
    for name in ("astronaut", "coffee"):
        Image.fromarray(getattr(skimage.data, name)()[:200, :200]).save(folder / f"{name}.png")
    crops = ref.random_crops(folder, 64, 6)
    seen = []

    def reference(hr, scale, seed):
        seen.append(seed)
        return ref.degrade_uint8(hr, scale, seed, gt_usm=True)

    row = degradation_runs.time_per_crop(reference, crops, 4, workers=1)
    assert seen[:6] == [(1, i) for i in range(6)]  # the warm-up
    assert seen[6:] == [(0, i) for i in range(6)]
    assert len(row["patches_per_s"]) == degradation_runs.REFERENCE_REPEATS
    assert 0 < row["min"] <= row["median"] <= row["max"] and row["cpu_s_per_1000"] > 0
    timed = ref.bench_degradation()  # what scripts/bench_data.py passes: the sharpened HR
    np.testing.assert_array_equal(
        timed(crops[1], 4, (0, 1)), ref.degrade_uint8(crops[1], 4, (0, 1), gt_usm=True)
    )
    assert not np.array_equal(timed(crops[1], 4, (0, 1)), ref.degrade_uint8(crops[1], 4, (0, 1)))
    assert not set(degradation_runs.REFERENCE_ROWS) & set(degradation_runs.ALL_DEG_ROWS)
    rows = {n: {"median": 100.0, "cpu_s_per_1000": 1.0} for n in degradation_runs.ALL_DEG_ROWS}
    alone = "\n".join(degradation_runs.ram_table(rows))
    assert "reference" not in alone and alone.count("\n") == 6
    reference = {"median": 50.0, "cpu_s_per_1000": 2.0}
    rows.update(dict.fromkeys(degradation_runs.REFERENCE_ROWS, reference))
    table = degradation_runs.ram_table(rows)
    assert table[0].endswith("| this / reference |") and table[2].endswith("| 2.00 |")
