"""Real-ESRGAN's high-order degradation in TensorFlow ops, a whole batch at a time
(``degradation=realesrgan``), in the tf.data graph or in the training step on the accelerator.

Source: X. Wang, L. Xie, C. Dong, Y. Shan, "Real-ESRGAN: Training Real-World Blind
Super-Resolution with Pure Synthetic Data", ICCV Workshops 2021, section 3; its official code
(``realesrgan/models/realesrnet_model.py`` ``feed_data``, ``realesrgan/data/realesrgan_dataset.py``
and BasicSR's ``basicsr/data/degradations.py``, ``basicsr/utils/img_process_util.py``) and its
configuration ``options/train_realesrnet_x4plus.yml``, whose values are the defaults here and in
``conf/degradation/realesrgan.yaml``.

A training pair of an HR batch ``x`` (float RGB in [0, 1]) at scale ``s``
(:meth:`RealESRGAN.pair`):

0. with ``gt_usm`` (on, as in every official option file) the HR is sharpened by unsharp
   masking (``sr.degradations.usm``); it is the target, and the LR is made from it;
1. first stage: blur by each image's random kernel (:func:`sr.degradations.kernels.random_kernel`:
   isotropic or anisotropic Gaussian, generalized Gaussian, plateau, or with ``sinc_prob`` a 2-D
   sinc; side 7..21), resize by a factor drawn up / down / keep (``resize_prob``,
   ``resize_range``) with area, bilinear or bicubic interpolation, Gaussian noise
   (``gaussian_noise_prob``) else Poisson noise, grey (one plane for all channels; Gaussian:
   one plane shared by the batch's grey images, as BasicSR) with ``gray_noise_prob``, JPEG of
   a quality drawn from ``jpeg_range``;
2. second stage: blur with ``second_blur_prob``, resize to ``(H / s) f`` for a drawn factor f,
   noise with the ``*2`` parameters, and no JPEG;
3. in random order (one half each): [resize to ``H / s`` + the final sinc filter] then JPEG
   (``jpeg_range2``), or JPEG then [resize + final sinc]; the final sinc is the identity with
   ``1 - final_sinc_prob``;
4. clip and round to the 8-bit grid.

So two JPEG round trips per image. Draws are per batch where ``feed_data`` draws per batch (the
resize factors and modes, the noise kinds, the second-blur flag, the final order and mode) and
per image where it draws per image (the kernels, noise sigma, Poisson scale, grey flag, JPEG
quality): :func:`batch_draws`, a function of the batch's seeds, so a resumed stream is exact.
Every stage is one op (or a few) on the whole batch: the batch keeps one size through the
random resizes, as in the official code.

Where this differs from the official PyTorch code, and why (``docs/data.md`` lists them too):

- resizing is PyTorch's ``interpolate`` exactly (:mod:`sr.degradations.interpolate`: bicubic
  a = -0.75,
  area as adaptive average pooling, the first resize mapped by its scale factor); a resized side
  is at least ``KERNEL_SIZE // 2 + 1`` = 11 pixels, the least the reflect padding of a 21-pixel
  kernel allows (it only binds for crops under 74 pixels; official crops are 400);
- JPEG is libjpeg through TensorFlow's coder (4:2:0 chroma, accurate integer IDCT: Pillow's
  pixels), or on the accelerator the batched JPEG of ``sr.degradations.jpeg``, not DiffJPEG; the
  quality is the drawn value rounded down to an integer (DiffJPEG scales its tables by the
  real value);
- the sharpened target is rounded to the 8-bit grid, like every HR target of the project;
- the degradation runs on training crops with their margin (``degradation.margin``: 8 pixels by
  default, 112-pixel crops at x4; 36 in the paper's recipes), not on 400-pixel crops cut to 256
  afterwards: the default margin leaves the filters' border effects in the patch's outer pixels
  (``benchmarks/realesrgan_border.py``), 36 keeps the typical ones out (above 59 dB), not the
  worst (after a first resize by 0.15: 45.6 dB in the LR's outer 2 pixels; 116 removes it);
- the training-pair pool (``queue_size``, 180 in the official files) is ``degradation.pool_size``
  (``sr.data.pair_pool``): 0 (none) by default, 180 in the paper's recipes.

Blurs pad by reflection (PyTorch's ``reflect``, OpenCV's ``BORDER_REFLECT_101``) as the
official ``filter2D`` does.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, fields

import numpy as np
import tensorflow as tf

from sr.core.degrade import crop_margin
from sr.degradations import interpolate
from sr.degradations.jpeg import jpeg_batch
from sr.degradations.kernels import Draws, blur_batch, final_sinc, random_kernel
from sr.degradations.realesrgan_params import (  # noqa: F401  (re-exported)
    DEVICES,
    JPEGS,
    KERNEL_SIZE,
    KERNEL_TYPES,
    MIN_SIDE,
    SPEC,
    Options,
    Params,
    check_keys,
    least_crop,
    schema_fields,
)
from sr.degradations.usm import usm_sharp

RESIZE_MODES = interpolate.MODES
"""Interpolations of the random resizes, drawn uniformly."""

DEFAULTS = Params()
"""The paper's parameters (``options/train_realesrnet_x4plus.yml``)."""


# ------------------------------------------------------------------------------------------------
# The random draws of a batch: per batch where the official code draws per batch, else per image
# ------------------------------------------------------------------------------------------------
BATCH_DRAWS = 16  # scalar uniforms per batch (12 are taken)
IMAGE_DRAWS = 48  # uniforms per image (29 for the kernels, 8 for noise and JPEG)


def batch_draws(seeds) -> tuple[Draws, Draws]:
    """The draws of a batch from its seeds (int ``[B, 2]``): ``(per_batch, per_image)``, each
    vector drawn by one op from a key folded from ``seeds[0]``; so a batch's degradation is a
    function of its first element's seed, i.e. of ``(stream seed, batch index)``. Per batch
    (scalars): the resize factors and modes, the noise kinds, the second-blur flag, the final
    order and mode (``feed_data`` of ``realesrnet_model.py`` draws these with ``random`` and
    ``np.random`` once per batch). Per image (``[B]``): the kernels, noise sigma, Poisson scale,
    grey flag and JPEG quality (drawn per sample there too)."""
    key = tf.random.experimental.stateless_fold_in(tf.cast(seeds[0], tf.int64), 3)
    per_image_key = tf.random.experimental.stateless_fold_in(key, 1)
    n = tf.shape(seeds)[0]
    per_batch = Draws(tf.random.stateless_uniform([BATCH_DRAWS], key), key)
    uniforms = tf.random.stateless_uniform(tf.stack([n, IMAGE_DRAWS]), per_image_key)
    return per_batch, Draws(uniforms, per_image_key)


def kernels(draws: Draws, params: Params) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The three kernels of each image (``realesrgan_dataset.py``): the first and second stages'
    blurs (:func:`random_kernel`) and the final sinc (:func:`final_sinc`), float32
    ``[B, 21, 21]`` each, from the per-image draws (``[B, K]`` uniforms)."""
    return (
        random_kernel(draws, params.stage(1), params.kernel_sizes),
        random_kernel(draws, params.stage(2), params.kernel_sizes),
        final_sinc(draws, params.kernel_sizes, params.final_sinc_prob),
    )


# ------------------------------------------------------------------------------------------------
# Operations on a batch [B, H, W, 3], float32 in [0, 1]
# ------------------------------------------------------------------------------------------------
def random_resize(per_batch: Draws, images, stage: dict, base, factor_given: bool) -> tf.Tensor:
    """Resize a batch by a factor f drawn up (in [1, high]), down (in [low, 1]) or kept, by
    ``resize_prob``, to ``floor(base f)`` (at least :data:`MIN_SIDE`), with a mode drawn from
    area, bilinear, bicubic: PyTorch's ``interpolate`` (:mod:`sr.degradations.interpolate`),
    mapping
    coordinates by f itself when ``factor_given`` (``interpolate(scale_factor=f)``), else by
    the ratio of the sizes (``interpolate(size=...)``). float32."""
    lo, hi = stage["resize_range"]
    kind = per_batch.choice(stage["resize_prob"])
    factor = tf.gather(
        tf.stack([per_batch.uniform(1.0, hi), per_batch.uniform(lo, 1.0), 1.0]), kind
    )
    mode = per_batch.choice([1 / 3] * 3)
    size = tf.maximum(tf.cast(tf.floor(base * factor), tf.int32), MIN_SIDE)
    clamped = tf.cast(size, tf.float32) != tf.floor(base * factor)
    source = tf.cast(tf.shape(images)[1:3], tf.float32)
    coords = tf.where(clamped, tf.cast(size, tf.float32) / source, factor)
    return interpolate.resize(images, size, mode, coords if factor_given else None)


def _bcast(v: tf.Tensor) -> tf.Tensor:
    """A per-image value ``[B]`` as ``[B, 1, 1, 1]``."""
    return v[:, tf.newaxis, tf.newaxis, tf.newaxis]


def gaussian_noise(images, sigma, gray, seed) -> tf.Tensor:
    """``images`` + N(0, sigma^2) per image (``sigma`` float32 ``[B]`` on [0, 1]), clipped to
    [0, 1] (``random_add_gaussian_noise_pt``). float32, same shape.

    Colour noise is drawn per image and channel. The grey images (``gray``, bool ``[B]``) share
    ONE noise plane ``[H, W]``, each scaled by its own sigma, as BasicSR's
    ``generate_gaussian_noise_pt`` draws it (``torch.randn(*img.size()[2:4])`` for the whole
    batch). That plane is channel 0 of the first grey image's own draw: a plane no colour image
    uses (so it is independent of their noise, as the official separate draw), and for a batch
    of one the image's own channel 0, as before this matched the official draw (issue 46; the
    fixed degraded test sets, made one image at a time, are unchanged)."""
    noise = tf.random.stateless_normal(tf.shape(images), seed)  # one draw for the batch
    first_gray = tf.argmax(tf.cast(gray, tf.int32), output_type=tf.int32)  # 0 if none
    plane = tf.gather(noise, first_gray)[tf.newaxis, ..., :1]  # [1, H, W, 1], shared
    noise = tf.where(_bcast(gray), plane, noise)
    return tf.clip_by_value(images + noise * _bcast(sigma), 0.0, 1.0)


def _poisson(seed, images: tf.Tensor) -> tf.Tensor:
    """Poisson noise of each image (BasicSR ``generate_poisson_noise_pt``): the image rounded to
    8 bits, ``v = 2^ceil(log2(distinct levels))`` per image, noise = Poisson(image v) / v -
    image. float32, same shape."""
    levels = tf.cast(tf.clip_by_value(tf.round(images * 255.0), 0.0, 255.0), tf.int32)
    rounded = tf.cast(levels, tf.float32) / 255.0
    flat = tf.reshape(levels, tf.stack([tf.shape(images)[0], -1]))
    counts = tf.math.bincount(flat, minlength=256, maxlength=256, axis=-1)
    distinct = tf.cast(tf.math.count_nonzero(counts, axis=-1), tf.float32)
    vals = _bcast(tf.pow(2.0, tf.math.ceil(tf.math.log(distinct) / math.log(2.0))))
    out = tf.random.stateless_poisson(tf.shape(images), seed, rounded * vals, dtype=tf.float32)
    return out / vals - rounded


def poisson_noise(images, scale, gray, seed) -> tf.Tensor:
    """``images`` + Poisson noise times ``scale`` (float32 ``[B]``); where ``gray`` (bool
    ``[B]``) the noise of the grey image (ITU-R BT.601 luma weights, as torchvision's
    ``rgb_to_grayscale``) in every channel; clipped to [0, 1] (``random_add_poisson_noise_pt``,
    which computes both and mixes them too). float32, same shape."""
    luma = tf.tensordot(images, tf.constant([0.2989, 0.587, 0.114]), 1)[..., tf.newaxis]
    # one draw for the batch: a grey image's luma in all three channels, channel 0's noise kept
    source = tf.where(_bcast(gray), tf.broadcast_to(luma, tf.shape(images)), images)
    noise = _poisson(seed, source)
    noise = tf.where(_bcast(gray), noise[..., :1], noise)
    return tf.clip_by_value(images + noise * _bcast(scale), 0.0, 1.0)


def random_noise(per_batch: Draws, per_image: Draws, images, stage: dict) -> tf.Tensor:
    """Gaussian noise with ``gaussian_noise_prob`` (one draw per batch), else Poisson noise;
    sigma, scale and the grey flag per image."""
    gauss = per_batch.chance(stage["gaussian_noise_prob"])
    sigma = per_image.uniform(*stage["noise_range"]) / 255.0
    scale = per_image.uniform(*stage["poisson_scale_range"])
    gray, seed = per_image.chance(stage["gray_noise_prob"]), per_image.seed()
    return tf.cond(
        gauss,
        lambda: gaussian_noise(images, sigma, gray, seed),
        lambda: poisson_noise(images, scale, gray, seed),
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


def libjpeg_batch(images: tf.Tensor, quality: tf.Tensor) -> tf.Tensor:
    """:func:`jpeg` of each image of a batch ``[B, H, W, 3]`` at its quality (int32 ``[B]``):
    libjpeg, exact, on the CPU (two ops per image)."""
    return tf.map_fn(
        lambda a: jpeg(a[0], a[1]),
        (images, quality),
        fn_output_signature=tf.TensorSpec(images.shape[1:], tf.float32),
    )


def _quality(per_image: Draws, jpeg_range) -> tf.Tensor:
    """A JPEG quality per image, drawn from ``jpeg_range`` and rounded down: int32 ``[B]``."""
    return tf.cast(tf.floor(per_image.uniform(*jpeg_range)), tf.int32)


# ------------------------------------------------------------------------------------------------
# The two-stage degradation of a batch
# ------------------------------------------------------------------------------------------------
# Not converted by AutoGraph: every branch on a tensor is written as tf.cond / tf.switch_case and
# every Python ``if`` / ``for`` is on Python values, so the graph is the same without it, and a
# tf.data map or a training step that calls it is traced without AutoGraph parsing and rewriting
# the ~75 functions it reaches. A tensor-valued Python ``if`` added later fails at trace time
# (OperatorNotAllowedInGraphError), not silently.
@tf.autograph.experimental.do_not_convert
def degrade_batch(
    hr: tf.Tensor, scale: int, seeds, params: Params = DEFAULTS, jpeg_batch=None
) -> tf.Tensor:
    """The LR of a batch by Real-ESRGAN's two-stage degradation (module docstring), every stage
    one op (or one small group of ops) on the whole batch, as ``feed_data`` runs it on the GPU.

    Args:
        hr: float32 ``[B, H, W, 3]`` RGB in [0, 1]; H, W multiples of ``scale``, at least
            ``scale * MIN_SIDE``.
        scale: s, the SR factor.
        seeds: int ``[B, 2]`` stateless seeds (:func:`image_seed`); the batch's draws are a
            function of them (:func:`batch_draws`).
        params: the ranges and probabilities (:class:`Params`).
        jpeg_batch: the JPEG of a batch, ``(images [B, H, W, 3], quality int32 [B]) -> images``:
            :func:`libjpeg_batch` (None, the default) or ``sr.degradations.jpeg.jpeg_batch``.

    Returns:
        float32 ``[B, H / s, W / s, 3]`` in [0, 1] on the 8-bit grid (k / 255).
    """
    hr = tf.convert_to_tensor(hr, tf.float32)
    jpeg_batch = jpeg_batch or libjpeg_batch
    per_batch, per_image = batch_draws(seeds)
    k1, k2, sinc = kernels(per_image, params)
    one, two = params.stage(1), params.stage(2)
    source = tf.cast(tf.shape(hr)[1:3], tf.float32)
    out_size = tf.shape(hr)[1:3] // scale
    # the first stage: blur, resize, noise, JPEG
    x = random_resize(per_batch, blur_batch(hr, k1), one, source, factor_given=True)
    x = random_noise(per_batch, per_image, x, one)
    x = jpeg_batch(tf.clip_by_value(x, 0.0, 1.0), _quality(per_image, one["jpeg_range"]))
    # the second stage: blur (with second_blur_prob), resize, noise; no JPEG of its own
    blur2 = per_batch.chance(params.second_blur_prob)
    x = tf.cond(blur2, lambda: blur_batch(x, k2), lambda: x)
    x = random_resize(per_batch, x, two, source / scale, factor_given=False)
    x = random_noise(per_batch, per_image, x, two)
    # [resize to H / s + the final sinc] and the last JPEG, in random order
    resize_first, mode = per_batch.chance(0.5), per_batch.choice([1 / 3] * 3)
    quality = _quality(per_image, params.jpeg_range2)

    def resize_and_sinc(y):
        return blur_batch(interpolate.resize(y, out_size, mode), sinc)

    def compress(y):
        return jpeg_batch(tf.clip_by_value(y, 0.0, 1.0), quality)

    out = tf.cond(
        resize_first, lambda: compress(resize_and_sinc(x)), lambda: resize_and_sinc(compress(x))
    )
    out = tf.clip_by_value(tf.round(out * 255.0), 0.0, 255.0) / 255.0
    if hr.shape[1] is not None and hr.shape[2] is not None:
        out = tf.ensure_shape(out, [hr.shape[0], hr.shape[1] // scale, hr.shape[2] // scale, 3])
    return out


def degrade(hr: tf.Tensor, scale: int, seed, params: Params = DEFAULTS, jpeg_batch=None):
    """:func:`degrade_batch` of one image: float32 ``[H, W, 3]`` in [0, 1] and an int ``[2]``
    seed to float32 ``[H / s, W / s, 3]`` on the 8-bit grid."""
    hr = tf.convert_to_tensor(hr, tf.float32)
    seed = tf.convert_to_tensor(seed)
    return degrade_batch(hr[tf.newaxis], scale, seed[tf.newaxis], params, jpeg_batch)[0]


class RealESRGAN:
    """``degradation=realesrgan``: Real-ESRGAN's LR synthesis (module docstring), from RGB HR.
    Implements :class:`sr.degradations.protocol.Degradation`; declared (name, schema, check) by
    ``sr.degradations.realesrgan_params.SPEC``.

    Keyword args: the fields of :class:`Params` (lists are accepted for tuples) and of
    :class:`Options` (``gt_usm``, ``device``, ``jpeg``), as written in
    ``conf/degradation/realesrgan.yaml``.

    Raises:
        ConfigError: for a value out of range, naming ``degradation.<key>`` and what it must be.
    """

    name = "realesrgan"
    needs_rgb = True  # made from the RGB HR (colour noise, JPEG chroma): sources keep 3 channels
    protocol_lr = SPEC.protocol_lr  # False: its own pairs, validated on a fixed degraded set

    def __init__(self, **params):
        check_keys(params)
        options = {f.name for f in fields(Options)}
        self.options = Options(**{k: v for k, v in params.items() if k in options})
        self.params = Params(**{k: tuple(v) if isinstance(v, list | tuple) else v
                                for k, v in params.items() if k not in options})  # fmt: skip

    @property
    def device(self) -> str:
        """``input`` (the LR is made in the tf.data pipeline) or ``accelerator`` (in the
        training step, on the model's device)."""
        return self.options.device

    @property
    def gt_usm(self) -> bool:
        """The target is the USM-sharpened HR (``degradation.gt_usm``)."""
        return bool(self.options.gt_usm)

    @property
    def pool_size(self) -> int:
        """Pairs of the training-pair pool (``degradation.pool_size``); 0: none."""
        return int(self.options.pool_size or 0)

    def identity(self) -> dict:
        """What the pairs are a function of besides the seed: the name, every parameter, the
        sharpened target (``gt_usm``, named when on: runs saved before it existed had none), the
        crop's ``margin`` when given and the pair pool's size when on. Not the device nor the
        JPEG coder: both give the same pixels."""
        extra = {} if self.options.gt_usm is False else {"gt_usm": True}
        if self.options.margin is not None:
            extra["margin"] = self.options.margin
        if self.options.pool_size:
            extra["pool_size"] = self.options.pool_size
        return {"name": self.name, **asdict(self.params), **extra}

    def crop_margin(self, scale: int) -> int:
        """HR pixels degraded around each patch (``degradation.margin``; null: the LR operator's
        ``sr.core.degrade.crop_margin``, 2 x scale); what a margin leaves of the filters' border
        effects in the patch: ``benchmarks/realesrgan_border.py``, docs/data.md. The config's
        check computes the same without TensorFlow (``realesrgan_params.crop_margin``)."""
        return crop_margin(scale) if self.options.margin is None else self.options.margin

    def least_crop(self, scale: int) -> int:
        """The smallest HR crop side (pixels) it takes at ``scale``: LR sides of
        :data:`MIN_SIDE`, and with ``gt_usm`` the reflect padding of USM's 51-pixel kernel (26):
        ``realesrgan_params.least_crop``."""
        return least_crop(bool(self.options.gt_usm), scale)

    def jpeg_coder(self) -> str:
        """``libjpeg`` or ``tensorflow``: ``degradation.jpeg``, with ``auto`` resolved by the
        device (libjpeg in the input pipeline, the batched TensorFlow JPEG on an accelerator)."""
        if self.options.jpeg != "auto":
            return self.options.jpeg
        return "tensorflow" if self.options.device == "accelerator" else "libjpeg"

    def _jpeg_fn(self):
        return libjpeg_batch if self.jpeg_coder() == "libjpeg" else jpeg_batch

    def degrade(self, hr: tf.Tensor, scale: int, seeds) -> tf.Tensor:
        """:func:`degrade_batch` with this object's parameters and JPEG coder (float32
        ``[B, H, W, 3]`` in [0, 1] and int ``[B, 2]`` seeds to float32 ``[B, H / s, W / s, 3]``
        on the 8-bit grid); no sharpening."""
        return degrade_batch(hr, scale, seeds, self.params, self._jpeg_fn())

    def pair(self, hr: tf.Tensor, scale: int, seeds, plain: bool = False) -> tuple[tf.Tensor, ...]:
        """A training pair of a batch, as ``feed_data``: with ``gt_usm`` the HR is sharpened
        (``sr.degradations.usm.usm_sharp``, rounded to the 8-bit grid like a saved image) and the
        LR is
        made from the sharpened HR.

        Args:
            hr: float32 ``[B, H, W, 3]`` RGB in [0, 1] on the 8-bit grid.
            scale, seeds: as :meth:`degrade`.
            plain: also return the HR as it is (the GAN stage's discriminator takes it:
                ``loss.gan_gt_usm=false``, as the official options).

        Returns:
            ``(lr, target)`` or ``(lr, target, hr)``: float32 ``[B, H / s, W / s, 3]``,
            ``[B, H, W, 3]`` and ``[B, H, W, 3]`` in [0, 1] on the 8-bit grid.
        """
        pair = traced_pair(self.params, bool(self.options.gt_usm), self.jpeg_coder(), scale, plain)
        if tf.executing_eagerly():  # op by op, as before: a tf.function run from eager code is
            pair = pair.python_function  # rewritten by Grappler (x / 255 to x * (1 / 255))
        return pair(tf.convert_to_tensor(hr, tf.float32), seeds)

    def lr_image(self, hr: np.ndarray, scale: int, seed: int, index: int) -> np.ndarray:
        """The degraded LR of a whole HR image, for a fixed degraded test set (made from the
        HR as it is: real LR photos are not made from sharpened ones).

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


@functools.lru_cache(maxsize=16)
def traced_pair(params: Params, gt_usm: bool, coder: str, scale: int, plain: bool):
    """:meth:`RealESRGAN.pair` of one configuration as one ``tf.function`` of ``(hr, seeds)``,
    shared by every source, dataset and training step of the process that asks for it: its graph
    (about 2,000 ops) is traced once per configuration and batch shape, and a tf.data map or a
    step that calls it adds one call op, not the ops again. The same ops as an inline call, so
    the same pixels in a graph; :meth:`RealESRGAN.pair` runs its Python function when called
    eagerly (a graph of its own, run from eager code, would be rewritten by Grappler's constant
    folding: ``x / 255`` to ``x * (1 / 255)``, one ulp apart).

    Args:
        params: :class:`Params`; gt_usm: sharpen the target first (``sr.degradations.usm``);
        coder: ``"libjpeg"`` (:func:`libjpeg_batch`) or ``"tensorflow"``
            (``sr.degradations.jpeg.jpeg_batch``); scale: s; plain: also return the HR.

    Returns:
        ``(hr float32 [B, H, W, 3] in [0, 1], seeds int [B, 2]) -> (lr, target[, hr])``, as
        :meth:`RealESRGAN.pair`.
    """
    jpeg = libjpeg_batch if coder == "libjpeg" else jpeg_batch

    def pair(hr, seeds):
        target = tf.round(usm_sharp(hr) * 255.0) / 255.0 if gt_usm else hr
        lr = degrade_batch(target, scale, seeds, params, jpeg)
        return (lr, target, hr) if plain else (lr, target)

    return tf.function(pair, autograph=False)


def image_seed(seed: int, index, pipeline: int = 0) -> tf.Tensor:
    """The stateless seeds of elements ``index`` (int, or int64 tensor of any shape) of the
    stream of ``seed`` read by input pipeline ``pipeline``: int64 ``[..., 2]``, ``(key, index)``
    with ``key`` a hash of ``(seed, pipeline)`` (NumPy ``SeedSequence``), apart from the flips'
    ``(seed, batch)`` seeds."""
    words = [int(seed) % 2**63, int(pipeline), 0x5EA1]
    key = int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] % 2**63)
    index = tf.cast(index, tf.int64)
    return tf.stack([tf.fill(tf.shape(index), tf.constant(key, tf.int64)), index], axis=-1)
