"""Real-ESRGAN's high-order degradation in the tf.data graph (``degradation=realesrgan``).

Source: X. Wang, L. Xie, C. Dong, Y. Shan, "Real-ESRGAN: Training Real-World Blind
Super-Resolution with Pure Synthetic Data", ICCV Workshops 2021, section 3; its official code
(``realesrgan/models/realesrnet_model.py`` ``feed_data``, ``realesrgan/data/realesrgan_dataset.py``
and BasicSR's ``basicsr/data/degradations.py``) and its configuration
``options/train_realesrnet_x4plus.yml``, whose values are the defaults here and in
``conf/degradation/realesrgan.yaml``.

The LR of one HR image ``x`` (float RGB in [0, 1]) at scale ``s``, all draws per image:

1. first stage: blur by a random kernel (:func:`random_kernel`: isotropic or anisotropic
   Gaussian, generalized Gaussian, plateau, or with ``sinc_prob`` a 2-D sinc; side 7..21),
   resize by a factor drawn up / down / keep (``resize_prob``, ``resize_range``) with area,
   bilinear or bicubic interpolation, Gaussian noise (``gaussian_noise_prob``) else Poisson
   noise, each grey (one plane for all channels) with ``gray_noise_prob``, clip, JPEG of a
   quality drawn from ``jpeg_range``;
2. second stage: the same with the ``*2`` parameters, the blur only with ``second_blur_prob``,
   the resize to ``(H / s) f`` for a drawn factor f;
3. in random order (one half each): [resize to ``H / s`` + the final sinc filter] then JPEG, or
   JPEG then [resize + final sinc]; the final sinc is the identity with ``1 - final_sinc_prob``;
4. clip and round to the 8-bit grid.

Where this differs from the official PyTorch code, and why:

- every draw is per image (the official code draws the resize factor, mode and the noise kind
  once per batch): each training element is a function of ``(seed, index)`` alone
  (:meth:`RealESRGAN.degrade`), whatever batch it falls in;
- bicubic resizing is ``tf.image.resize``'s Keys cubic with a = -0.5 (PyTorch: a = -0.75), and
  area resizing is TensorFlow's exact area average;
- JPEG is libjpeg through TensorFlow's encoder and decoder (4:2:0 chroma, as OpenCV and Pillow
  default to), not the differentiable DiffJPEG approximation; the quality is the drawn value
  rounded down to an integer;
- a resized side is at least ``KERNEL_SIZE // 2 + 1`` = 11 pixels, the least the reflect padding
  of a 21-pixel kernel allows (it only binds for crops under 74 pixels; official crops are 400);
- the ground truth is not sharpened (``gt_usm``): the HR target is the image itself.

Blurs pad by reflection (PyTorch's ``reflect``, OpenCV's ``BORDER_REFLECT_101``) as the
official ``filter2D`` does. Everything is TensorFlow ops, so the degradation runs inside tf.data
(on tf.data service workers too) with no Python per element.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np
import tensorflow as tf

from sr.core.errors import ConfigError
from sr.core.kernels import (
    KERNEL_SIZE,
    KERNEL_TYPES,
    Draws,
    blur,
    blur_batch,
    final_sinc,
    random_kernel,
)

RESIZE_MODES = ("area", "bilinear", "bicubic")
"""Interpolations of the random resizes, drawn uniformly."""

MIN_SIDE = KERNEL_SIZE // 2 + 1
"""Smallest side (pixels) a resize may produce: reflect padding needs more pixels than it adds."""


@dataclass(frozen=True)
class Params:
    """The parameters of :class:`RealESRGAN`, named as in Real-ESRGAN's configuration (the
    second stage's with the suffix ``2``). Defaults: ``options/train_realesrnet_x4plus.yml``.

    Probabilities are in [0, 1]; ``*_prob`` triples (up, down, keep) and ``kernel_prob`` (one
    per :data:`KERNEL_TYPES`) sum to 1; ranges are ``(low, high)`` with low <= high; sigmas in
    pixels, noise sigma on the [0, 255] scale, JPEG quality in 1..100.
    """

    # blur kernel sides (odd, <= 21), drawn uniformly
    kernel_sizes: tuple = (7, 9, 11, 13, 15, 17, 19, 21)
    # first blur's family: iso, aniso, generalized iso, aniso, plateau iso, aniso
    kernel_prob: tuple = (0.45, 0.25, 0.12, 0.03, 0.12, 0.03)
    sinc_prob: float = 0.1  # first blur: a sinc kernel instead
    blur_sigma: tuple = (0.2, 3.0)  # first blur's Gaussian sigmas (pixels)
    betag_range: tuple = (0.5, 4.0)  # generalized Gaussian shape beta
    betap_range: tuple = (1.0, 2.0)  # plateau shape beta
    resize_prob: tuple = (0.2, 0.7, 0.1)  # first resize: up, down, keep
    resize_range: tuple = (0.15, 1.5)  # first resize factor
    gaussian_noise_prob: float = 0.5  # first noise: Gaussian, else Poisson
    noise_range: tuple = (1.0, 30.0)  # Gaussian noise sigma on 0..255
    poisson_scale_range: tuple = (0.05, 3.0)  # Poisson noise scale
    gray_noise_prob: float = 0.4  # one noise plane for all channels
    jpeg_range: tuple = (30.0, 95.0)  # first JPEG quality
    second_blur_prob: float = 0.8  # the second stage blurs with this probability
    # second stage: blur's family, as kernel_prob
    kernel_prob2: tuple = (0.45, 0.25, 0.12, 0.03, 0.12, 0.03)
    sinc_prob2: float = 0.1  # second stage: a sinc kernel instead
    blur_sigma2: tuple = (0.2, 1.5)  # second stage: Gaussian sigmas (pixels)
    betag_range2: tuple = (0.5, 4.0)  # second stage: generalized Gaussian shape beta
    betap_range2: tuple = (1.0, 2.0)  # second stage: plateau shape beta
    resize_prob2: tuple = (0.3, 0.4, 0.3)  # second resize: up, down, keep
    resize_range2: tuple = (0.3, 1.2)  # second resize factor
    gaussian_noise_prob2: float = 0.5  # second noise: Gaussian, else Poisson
    noise_range2: tuple = (1.0, 25.0)  # second stage: Gaussian noise sigma on 0..255
    poisson_scale_range2: tuple = (0.05, 2.5)  # second stage: Poisson noise scale
    gray_noise_prob2: float = 0.4  # second stage: one noise plane for all channels
    jpeg_range2: tuple = (30.0, 95.0)  # second JPEG quality
    final_sinc_prob: float = 0.8  # the final sinc filter, else none

    def stage(self, n: int) -> dict:
        """The keys of stage ``n`` (1 or 2) without their suffix: ``{"kernel_prob": ..., ...}``."""
        suffix = "" if n == 1 else "2"
        names = [f.name for f in fields(self)]
        return {k[: len(k) - len(suffix)]: getattr(self, k) for k in names if k.endswith(suffix)}


def _check_params(p: Params) -> None:
    """Raise ConfigError naming ``degradation.<key>`` for a value out of range."""

    def bad(key, why):
        raise ConfigError(f"degradation.{key}={getattr(p, key)!r}: {why}")

    for f in fields(p):
        v = getattr(p, f.name)
        if f.name.endswith(("range", "range2", "sigma", "sigma2")):
            if len(v) != 2 or not v[0] <= v[1]:
                bad(f.name, "give [low, high] with low <= high")
        elif f.name.startswith(("kernel_prob", "resize_prob")):
            want = len(KERNEL_TYPES) if f.name.startswith("kernel") else 3
            if len(v) != want or min(v) < 0 or abs(sum(v) - 1) > 1e-6:
                bad(f.name, f"give {want} probabilities >= 0 that sum to 1")
        elif f.name.endswith(("prob", "prob2")) and not 0 <= v <= 1:
            bad(f.name, "a probability must be in [0, 1]")
    if not p.kernel_sizes or any(k % 2 == 0 or not 3 <= k <= KERNEL_SIZE for k in p.kernel_sizes):
        bad("kernel_sizes", f"give odd sizes in 3..{KERNEL_SIZE}")
    for key in ("blur_sigma", "blur_sigma2", "resize_range", "resize_range2"):
        if getattr(p, key)[0] <= 0:
            bad(key, "the low end must be > 0")
    for key in ("noise_range", "noise_range2", "poisson_scale_range", "poisson_scale_range2"):
        if getattr(p, key)[0] < 0:
            bad(key, "the low end must be >= 0")
    for key in ("jpeg_range", "jpeg_range2"):
        if not 1 <= getattr(p, key)[0] <= getattr(p, key)[1] <= 100:
            bad(key, "JPEG qualities must be in 1..100")
    for key in ("betag_range", "betag_range2", "betap_range", "betap_range2"):
        if not 0 < getattr(p, key)[0] <= 1 <= getattr(p, key)[1]:
            bad(key, "give [low, high] with 0 < low <= 1 <= high (half the draws each side of 1)")


# ------------------------------------------------------------------------------------------------
# Operations on one image [H, W, 3], float32 in [0, 1]
# ------------------------------------------------------------------------------------------------
def resize(image: tf.Tensor, size, mode) -> tf.Tensor:
    """``image`` ``[H, W, C]`` resized to ``size`` (height, width; each at least
    :data:`MIN_SIDE`) by ``RESIZE_MODES[mode]`` (int32 scalar tensor), without antialiasing (as
    PyTorch's ``interpolate``). float32."""
    size = tf.maximum(tf.cast(size, tf.int32), MIN_SIDE)
    branches = [
        lambda m=m: tf.image.resize(image, size, method=m, antialias=False) for m in RESIZE_MODES
    ]
    out = tf.switch_case(mode, branches)
    return tf.ensure_shape(out, [None, None, image.shape[-1]])


def random_resize(draws: Draws, image, stage: dict, base) -> tf.Tensor:
    """Resize ``base`` (float32 ``[2]``, the size that factor 1 gives) by a factor drawn up (in
    [1, high]), down (in [low, 1]) or kept, by ``resize_prob``, with a random mode. float32."""
    lo, hi = stage["resize_range"]
    kind = draws.choice(stage["resize_prob"])
    factor = tf.gather(tf.stack([draws.uniform(1.0, hi), draws.uniform(lo, 1.0), 1.0]), kind)
    size = tf.cast(tf.floor(base * factor), tf.int32)
    return resize(image, size, draws.choice([1 / 3] * 3))


def gaussian_noise(draws: Draws, image, sigma_range, gray_prob) -> tf.Tensor:
    """``image`` + N(0, sigma^2), sigma drawn from ``sigma_range`` (on the 0..255 scale), the same
    noise plane in every channel with ``gray_prob``; clipped to [0, 1]
    (``random_add_gaussian_noise_pt``). float32, same shape."""
    sigma = draws.uniform(*sigma_range) / 255.0
    shape = tf.shape(image)
    gray, seed = draws.chance(gray_prob), draws.seed()
    noise = tf.cond(
        gray,
        lambda: tf.random.stateless_normal(tf.concat([shape[:2], [1]], 0), seed),
        lambda: tf.random.stateless_normal(shape, seed),
    )
    return tf.clip_by_value(image + noise * sigma, 0.0, 1.0)


def _poisson_plane(seed, image: tf.Tensor) -> tf.Tensor:
    """Poisson noise of ``image`` (BasicSR ``generate_poisson_noise_pt``): the image rounded to
    8 bits, ``v = 2^ceil(log2(distinct levels))``, noise = Poisson(image v) / v - image."""
    levels = tf.cast(tf.clip_by_value(tf.round(image * 255.0), 0.0, 255.0), tf.int32)
    rounded = tf.cast(levels, tf.float32) / 255.0
    distinct = tf.math.count_nonzero(tf.math.bincount(tf.reshape(levels, [-1]), minlength=256))
    vals = tf.pow(2.0, tf.math.ceil(tf.math.log(tf.cast(distinct, tf.float32)) / math.log(2.0)))
    lam = rounded * vals
    out = tf.random.stateless_poisson(tf.shape(image), seed, lam, dtype=tf.float32) / vals
    return out - rounded


def poisson_noise(draws: Draws, image, scale_range, gray_prob) -> tf.Tensor:
    """``image`` + Poisson noise times a scale from ``scale_range``; with ``gray_prob`` the noise
    of the grey image (ITU-R BT.601 luma weights, as torchvision's ``rgb_to_grayscale``) in every
    channel; clipped to [0, 1] (``random_add_poisson_noise_pt``). float32, same shape."""
    scale = draws.uniform(*scale_range)
    gray, seed = draws.chance(gray_prob), draws.seed()
    luma = tf.tensordot(image, tf.constant([0.2989, 0.587, 0.114]), 1)[..., tf.newaxis]
    noise = tf.cond(gray, lambda: _poisson_plane(seed, luma), lambda: _poisson_plane(seed, image))
    return tf.clip_by_value(image + noise * scale, 0.0, 1.0)


def random_noise(draws: Draws, image, stage: dict) -> tf.Tensor:
    """Gaussian noise with ``gaussian_noise_prob``, else Poisson noise (each branch with seeds of
    its own, split before the choice)."""
    gauss = draws.chance(stage["gaussian_noise_prob"])
    g, p = draws.fork(), draws.fork()
    return tf.cond(
        gauss,
        lambda: gaussian_noise(g, image, stage["noise_range"], stage["gray_noise_prob"]),
        lambda: poisson_noise(p, image, stage["poisson_scale_range"], stage["gray_noise_prob"]),
    )


def jpeg(image: tf.Tensor, quality) -> tf.Tensor:
    """JPEG round trip of an RGB image ``[H, W, 3]`` in [0, 1]: clipped, rounded to 8 bits,
    encoded by libjpeg at ``quality`` (int32 scalar tensor, 1..100; 4:2:0 chroma) and decoded
    with the accurate integer IDCT: the same pixels as Pillow's round trip at that quality.
    float32 in [0, 1] on the 8-bit grid."""
    levels = tf.cast(tf.clip_by_value(tf.round(image * 255.0), 0.0, 255.0), tf.uint8)
    data = tf.raw_ops.EncodeJpegVariableQuality(images=levels, quality=quality)
    # the accurate integer IDCT (libjpeg's default, Pillow's and OpenCV's): TensorFlow's default
    # fast IDCT differs from them by up to 14 levels at quality 95
    out = tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE")
    return tf.ensure_shape(tf.cast(out, tf.float32) / 255.0, image.shape)


def random_jpeg(draws: Draws, image, jpeg_range) -> tf.Tensor:
    """:func:`jpeg` at a quality drawn from ``jpeg_range`` (rounded down)."""
    return jpeg(image, tf.cast(tf.floor(draws.uniform(*jpeg_range)), tf.int32))


# ------------------------------------------------------------------------------------------------
# The two-stage degradation
# ------------------------------------------------------------------------------------------------
def _stage(draws: Draws, image, stage: dict, kernel, blur_prob: float, base) -> tf.Tensor:
    """The second stage: blur with ``blur_prob``, random resize of ``base``, noise, JPEG."""
    image = tf.cond(draws.chance(blur_prob), lambda: blur(image, kernel), lambda: image)
    image = random_resize(draws, image, stage, base)
    image = random_noise(draws, image, stage)
    return random_jpeg(draws, image, stage["jpeg_range"])


KERNEL_DRAWS = 32  # uniforms per image for its three kernels (29 are taken)


def kernels(seeds, params: Params) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The three kernels of each image (``realesrgan_dataset.py``): the first and second stages'
    blurs (:func:`random_kernel`) and the final sinc (:func:`final_sinc`), float32
    ``[B, 21, 21]`` each, computed for the whole batch at once from the images' uniforms.

    Args:
        seeds: int ``[B, 2]``, the images' seeds.
    """
    seeds = tf.cast(seeds, tf.int64)
    uniforms = tf.map_fn(
        lambda s: tf.random.stateless_uniform(
            [KERNEL_DRAWS], tf.random.experimental.stateless_fold_in(s, 1)
        ),
        seeds,
        fn_output_signature=tf.TensorSpec([KERNEL_DRAWS], tf.float32),
    )
    draws = Draws(uniforms)
    return (
        random_kernel(draws, params.stage(1), params.kernel_sizes),
        random_kernel(draws, params.stage(2), params.kernel_sizes),
        final_sinc(draws, params.kernel_sizes, params.final_sinc_prob),
    )


def _after_first_blur(x, seed, kernel2, sinc, out_size, params: Params) -> tf.Tensor:
    """Steps after the first blur of one image ``[H, W, 3]``: the first stage's resize, noise
    and JPEG, the second stage, the final sinc and JPEG in random order, 8-bit rounding."""
    draws = Draws.from_seed(tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), 2))
    one, two = params.stage(1), params.stage(2)
    x = random_resize(draws, x, one, tf.cast(tf.shape(x)[:2], tf.float32))
    x = random_jpeg(draws, random_noise(draws, x, one), one["jpeg_range"])
    x = _stage(draws, x, two, kernel2, params.second_blur_prob, tf.cast(out_size, tf.float32))

    def resize_and_sinc(y, mode):
        return blur(resize(y, out_size, mode), sinc)

    quality = tf.cast(tf.floor(draws.uniform(*params.jpeg_range2)), tf.int32)
    mode = draws.choice([1 / 3] * 3)
    out = tf.cond(
        draws.chance(0.5),
        lambda: jpeg(resize_and_sinc(x, mode), quality),  # [resize + sinc] then JPEG
        lambda: resize_and_sinc(jpeg(x, quality), mode),  # JPEG then [resize + sinc]
    )
    return tf.clip_by_value(tf.round(out * 255.0), 0.0, 255.0) / 255.0


def degrade_batch(hr: tf.Tensor, scale: int, seeds, params: Params = Params()) -> tf.Tensor:
    """The LR of each image of a batch by Real-ESRGAN's two-stage degradation (module
    docstring), image i a function of ``seeds[i]`` alone.

    The kernels are drawn per image, the first blur runs on the whole batch at once
    (:func:`blur_batch`), the rest per image (sizes differ after the random resizes).

    Args:
        hr: float32 ``[B, H, W, 3]`` RGB in [0, 1]; H, W multiples of ``scale``, at least
            ``scale * MIN_SIDE``.
        scale: s, the SR factor.
        seeds: int ``[B, 2]`` stateless seeds (:func:`image_seed`).
        params: the ranges and probabilities (:class:`Params`).

    Returns:
        float32 ``[B, H / s, W / s, 3]`` in [0, 1] on the 8-bit grid (k / 255).
    """
    hr = tf.convert_to_tensor(hr, tf.float32)
    seeds = tf.cast(seeds, tf.int64)
    k1, k2, sinc = kernels(seeds, params)
    x = blur_batch(hr, k1)
    out_size = tf.shape(hr)[1:3] // scale
    out = tf.map_fn(
        lambda a: _after_first_blur(*a, out_size, params),
        (x, seeds, k2, sinc),
        fn_output_signature=tf.TensorSpec([None, None, 3], tf.float32),
    )
    if hr.shape[1] is not None and hr.shape[2] is not None:
        out = tf.ensure_shape(out, [hr.shape[0], hr.shape[1] // scale, hr.shape[2] // scale, 3])
    return out


def degrade(hr: tf.Tensor, scale: int, seed, params: Params = Params()) -> tf.Tensor:
    """:func:`degrade_batch` of one image: float32 ``[H, W, 3]`` in [0, 1] and an int ``[2]``
    seed to float32 ``[H / s, W / s, 3]`` on the 8-bit grid."""
    hr = tf.convert_to_tensor(hr, tf.float32)
    seed = tf.convert_to_tensor(seed)
    return degrade_batch(hr[tf.newaxis], scale, seed[tf.newaxis], params)[0]


class RealESRGAN:
    """``degradation=realesrgan``: Real-ESRGAN's LR synthesis (module docstring), from RGB HR.

    Keyword args: the fields of :class:`Params` (lists are accepted for tuples), as written in
    ``conf/degradation/realesrgan.yaml``.

    Raises:
        ConfigError: for a value out of range, naming ``degradation.<key>`` and what it must be.
    """

    name = "realesrgan"
    needs_rgb = True  # made from the RGB HR (colour noise, JPEG chroma): sources keep 3 channels

    def __init__(self, **params):
        unknown = set(params) - {f.name for f in fields(Params)}
        if unknown:
            raise ConfigError(
                f"degradation.{sorted(unknown)[0]} is not a key of degradation=realesrgan: "
                f"remove it (keys: {', '.join(f.name for f in fields(Params))})"
            )
        self.params = Params(**{k: tuple(v) if isinstance(v, list | tuple) else v
                                for k, v in params.items()})  # fmt: skip
        _check_params(self.params)

    def identity(self) -> dict:
        """What the LR is a function of besides the seed: the name and every parameter."""
        return {"name": self.name, **asdict(self.params)}

    def degrade(self, hr: tf.Tensor, scale: int, seeds) -> tf.Tensor:
        """:func:`degrade_batch` with this object's parameters (float32 ``[B, H, W, 3]`` in
        [0, 1] and int ``[B, 2]`` seeds to float32 ``[B, H / s, W / s, 3]`` on the 8-bit
        grid)."""
        return degrade_batch(hr, scale, seeds, self.params)

    def lr_image(self, hr: np.ndarray, scale: int, seed: int, index: int) -> np.ndarray:
        """The degraded LR of a whole HR image, for a fixed degraded test set.

        Args:
            hr: uint8 ``[H, W, 3]`` RGB, H and W multiples of ``scale`` (modcropped).
            scale: s.
            seed, index: the set's seed and the image's position in it: the LR is a function
                of ``(seed, index)`` alone (:func:`image_seed`).

        Returns:
            uint8 ``[H / s, W / s, 3]``.
        """
        x = tf.convert_to_tensor(np.asarray(hr), tf.float32) / 255.0
        lr = degrade(x, scale, image_seed(seed, index), self.params)
        return np.asarray(tf.cast(tf.round(lr * 255.0), tf.uint8))


def image_seed(seed: int, index, pipeline: int = 0) -> tf.Tensor:
    """The stateless seeds of elements ``index`` (int, or int64 tensor of any shape) of the
    stream of ``seed`` read by input pipeline ``pipeline``: int64 ``[..., 2]``, ``(key, index)``
    with ``key`` a hash of ``(seed, pipeline)`` (NumPy ``SeedSequence``), apart from the flips'
    ``(seed, batch)`` seeds."""
    words = [int(seed) % 2**63, int(pipeline), 0x5EA1]
    key = int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] % 2**63)
    index = tf.cast(index, tf.int64)
    return tf.stack([tf.fill(tf.shape(index), tf.constant(key, tf.int64)), index], axis=-1)
