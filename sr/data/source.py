"""Data sources: the public contract of the input pipeline, and the one function that turns any
source into training batches.

``hydra.utils.instantiate(cfg.data)`` returns a :class:`PatchSource` (the ``_target_`` of the
chosen ``conf/data/<mode>.yaml``); its :meth:`PatchSource.dataset` is an endless
``tf.data.Dataset`` of ``sr.core.batch.Batch(lq, gt)`` batches (a named tuple: ``[0]`` the LR,
``[1]`` the HR):

- ``lq``: float32 ``[B, P/s, P/s, 1]``, ``gt``: float32 ``[B, P, P, 1]``, values in [0, 1];
- the channel is Y of BT.601 as MATLAB ``rgb2ycbcr`` (16..235, divided by 255; ``sr.core.color``);
- LR is the project's LR operator (``sr.core.degrade``) applied to an HR crop with a margin (no
  border error), rounded to the 8-bit grid; or, with ``lr_dir``, pre-made LR images;
- random flips per sample (``flips``: vertical and horizontal, horizontal only, or none; and
  transposes with ``rot90``), identical for LR and HR.

A source only makes uint8 patch batches (:meth:`PatchSource.patch_dataset`); every source ends in
the same graph stage through :func:`pairs_dataset` (source -> ``sr.data.pairs.make_pairs`` ->
prefetch). The sources: ``sr.data.tfrecord.TFRecordSource`` (``data=tfrecord``, sharded patches
read with tf.data) and ``sr.data.generator.GeneratorSource`` (``data=generator``, a pool of
decoded images). Adding one is a :class:`DataConfig` subclass in ``sr.data.schemas`` (its keys
and defaults, no TensorFlow) and a module with a :class:`PatchSource` subclass, listed in
``sr.data.SOURCES``, plus a YAML in ``conf/data/`` naming its ``_target_``.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
from pathlib import Path
from typing import ClassVar

import numpy as np
import tensorflow as tf
from PIL import Image

from sr.core.degrade import flip_batch, min_hr_size
from sr.core.errors import ConfigError
from sr.core.images import ImageFolderError, ImageSet, image_size, list_images, scan_folder
from sr.core.schema import value_error
from sr.data import pair_pool
from sr.data.pairs import degraded_pairs, made_pairs, make_pairs, random_masks
from sr.data.pipeline import pairs_dataset, pipeline_threads  # noqa: F401  (re-exported)
from sr.data.schemas import (  # noqa: F401  (CHANNELS, LR_FROM, DataConfig re-exported)
    CHANNELS,
    LR_FROM,
    DataConfig,
    degradation_rules,
    made_rules,
    rule_error,
)
from sr.degradations import Bicubic
from sr.degradations.realesrgan import image_seed


def holdout(files: list[Path], count: int, key: str) -> list[Path]:
    """``count`` of ``files`` spread evenly over their order (the i-th of ``count`` at position
    ``floor((i + 0.5) n / count)`` of n), so that a name-sorted folder of categories gives a
    held-out set from all over it; the same files for the same folder on every machine.

    Raises:
        ConfigError: if there are not more than ``count`` files, naming ``key``.
    """
    n = len(files)
    if n <= count:
        raise ConfigError(
            f"{key} has {n} image(s), and data.val_holdout={count} would hold out all of them: "
            f"hold out fewer (at most {n - 1}), or set data.val_dir to a folder of its own"
        )
    return [files[int((i + 0.5) * n / count)] for i in range(count)]


def checked(schema, key: str, value):
    """``value`` of ``data.<key>`` if it is within the bounds that ``schema`` declares for the key
    (``sr.core.schema.bounded``: the one place of a bound, also checked when the config composes
    and listed in docs/config.md).

    Raises:
        ValueError: naming the key, the bound and the value (``data.batch_size must be an
            integer >= 1, got -4``).
    """
    meta = next(f.metadata for f in dataclasses.fields(schema) if f.name == key)
    why = value_error(value, meta)
    if why:
        raise ValueError(f"data.{key} {why}, got {value!r}")
    return value


class PatchSource(abc.ABC):
    """A data source: uint8 Y patch batches, turned into training pairs by :func:`pairs_dataset`.

    Keyword args (the keys of :class:`DataConfig`):
        hr_dir: folder of HR training images (PNG/JPEG; RGB, gray, RGBA or palette).
        val_dir: folder of full validation images, or None; listed by :meth:`prepare` and read
            by the trainer through :attr:`val_files`.
        val_holdout: N > 0 holds out N images of ``hr_dir`` as the validation images
            (:func:`holdout`; ``val_dir`` must then be None); 0: none.
        lr_dir: optional folder of pre-made LR images (DIV2K ``X4`` layout, ``0001x4.png``).
        batch_size: B. patch_size: HR patch P in pixels, a multiple of ``scale``. scale: s.
        flips: random flips, ``hv`` (vertical and horizontal), ``h`` (horizontal only) or
            ``none`` (``sr.data.pairs.FLIPS``). rot90: random transposes too.
        seed: seed of shuffles, crops and flips (None: one drawn at start, ``stream_seed``,
            saved in the run's checkpoints so that a resume continues the same stream).
        deterministic: deterministic element order in tf.data (slower for ``data=tfrecord``,
            whose shards are then read in a fixed interleave); with it the batches are the same
            in every run of a seed (crops and shuffles follow the seed, flips are a stateless
            function of the seed and the batch's number). Resume repeats and skips no batch
            either way (``checkpoint_iterator``; docs/training.md, "Resuming and interrupting").
        service: ``grpc://HOST:PORT`` of a tf.data service dispatcher that runs the whole
            pipeline on its workers (``sr.data.service``), or None; sources that run Python in
            the training process refuse it.
        lr_from: ``y`` or ``rgb``, the colour order of the Y pairs' LR (``sr.core.degrade``).
        channels: ``y`` (pairs of one channel, Y) or ``rgb`` (three, R, G, B).
        threads: the input pipeline's threads (:func:`pipeline_threads`).
        degradation: the LR operator (the ``degradation`` group, instantiated): None or
            ``sr.degradations.Bicubic`` for MATLAB bicubic,
            ``sr.degradations.realesrgan.RealESRGAN``
            for Real-ESRGAN's degradations (made from RGB crops, whatever ``channels``).

    Raises:
        ValueError: for a value out of range, naming the key (``data.patch_size 90 is not a
            multiple of data.scale 4``).
    """

    mode: ClassVar[str]  # the name of the config option, ``data=<mode>``
    schema: ClassVar[type[DataConfig]]  # its keys and defaults
    # how a resumed run finds its place in the stream: True, the tf.data iterator's state is
    # saved in every checkpoint (its buffers included); False, patch_dataset(start) rebuilds the
    # stream from batch ``start`` on (the source's randomness is a function of seed and batch)
    checkpoint_iterator: ClassVar[bool] = False
    # a degradation's pairs also give the HR as it is, after the sharpened target:
    # SharpenedBatch(lq, gt_usm, gt) (set by sr.config.build_source for loss.gan_gt_usm=false)
    plain_target: bool = False
    # degradation.pool_size on the accelerator: the pool of the device stage (sr.data.pair_pool)
    device_pool = None

    def __init__(
        self,
        *,
        hr_dir: str,
        val_dir: str | None,
        lr_dir: str | None,
        batch_size: int,
        patch_size: int,
        scale: int,
        flips: str,
        rot90: bool,
        seed: int | None,
        deterministic: bool,
        service: str | None,
        lr_from: str = "y",
        channels: str = "y",
        degradation=None,
        val_holdout: int = 0,
        threads: int | None = None,
    ):
        for key, value in (
            ("scale", scale),
            ("batch_size", batch_size),
            ("patch_size", patch_size),
            ("val_holdout", val_holdout),
            ("lr_from", lr_from),
            ("channels", channels),
        ):
            checked(self.schema, key, value)
        keys = dict(hr_dir=hr_dir, val_dir=val_dir, val_holdout=val_holdout, lr_dir=lr_dir)
        keys.update(patch_size=patch_size, scale=scale, lr_from=lr_from, channels=channels)
        why = rule_error(self.schema, {**keys, "service": service})  # the schema's rules
        if why:
            raise ConfigError(why)
        self._set_folders(hr_dir, val_dir, val_holdout)
        self.lr_dir = Path(lr_dir).expanduser().resolve() if lr_dir else None
        self.batch_size = int(batch_size)
        self.patch_size = int(patch_size)
        self.scale = int(scale)
        self.flips = checked(self.schema, "flips", flips)
        self.rot90 = bool(rot90)
        self.seed = seed
        self.deterministic = bool(deterministic)
        self.service = service or None
        self.threads = checked(self.schema, "threads", threads)
        self.lr_from = lr_from
        self.channels, self.degradation = channels, degradation or Bicubic()
        self._check_channels()
        self._images: ImageSet | None = None
        # the seed of the batch stream (read order, crops, flips): the config's, else fresh
        # entropy; a resumed run sets it to the one saved in its checkpoint
        self.stream_seed = (
            int(seed) if seed is not None else int(np.random.SeedSequence().entropy % 2**32)
        )
        self._val_files: list[Path] | None = None

    def _set_folders(self, hr_dir, val_dir, val_holdout) -> None:
        """``hr_dir``, ``val_dir`` and ``val_holdout`` (checked by the schema's rules)."""
        self.hr_dir = Path(hr_dir).expanduser()
        self.val_dir = Path(val_dir).expanduser() if val_dir else None
        self.val_holdout = int(val_holdout)

    def _check_channels(self) -> None:
        """Refuse combinations of ``channels``, ``lr_dir``, the mode and the degradation that
        cannot work, naming the keys (ValueError)."""
        d = self.degradation
        keys = dict(channels=self.channels, lr_dir=self.lr_dir, scale=self.scale)
        keys.update(patch_size=self.patch_size, batch_size=self.batch_size)
        why = made_rules(keys, self.schema, d.protocol_lr, d.name) or degradation_rules(
            keys, d.name, self.margin, d.least_crop(self.scale), d.pool_size
        )
        if why:
            raise ConfigError(why)

    # -- geometry ------------------------------------------------------------------------------
    @property
    def hr_channels(self) -> int:
        """Channels of the HR patches before the pair stage: 3 (RGB) with ``lr_from=rgb``,
        ``channels=rgb`` or a degradation made from RGB, else 1 (Y)."""
        rgb = self.lr_from == "rgb" or self.channels == "rgb" or self.degradation.needs_rgb
        return 3 if rgb else 1

    @property
    def margin(self) -> int:
        """HR pixels kept around each patch so that its LR has no border effect: the
        degradation's ``crop_margin(scale)`` (bicubic: ``sr.core.degrade.crop_margin``, the
        operator's reach; ``sr.degradations.realesrgan.RealESRGAN``: ``degradation.margin``); 0
        with pre-made LR."""
        if self.lr_dir:
            return 0
        return self.degradation.crop_margin(self.scale)

    @property
    def crop(self) -> int:
        """Side of the HR crop a patch is cut from: P + 2 margin (pixels)."""
        return self.patch_size + 2 * self.margin

    @property
    def lr_patch_size(self) -> int:
        return self.patch_size // self.scale

    # -- inputs --------------------------------------------------------------------------------
    @property
    def images(self) -> ImageSet:
        """The usable training images (scanned once).

        Raises:
            ImageFolderError: if the folder is missing or no image is large enough.
        """
        if self._images is None:
            held = set(self.held_out)
            self._images = scan_folder(self.hr_dir, self.crop, exclude=held)
        return self._images

    @property
    def held_out(self) -> list[Path]:
        """The images of ``hr_dir`` held out for validation (``val_holdout``; :func:`holdout`),
        in name order; empty with ``val_holdout=0``.

        Raises:
            ImageFolderError: if ``hr_dir`` is missing or empty.
            ValueError: if the folder has no more than ``val_holdout`` images (nothing would be
                left to train on).
        """
        if not self.val_holdout:
            return []
        return holdout(list_images(self.hr_dir), self.val_holdout, "data.hr_dir")

    @property
    def val_files(self) -> list[Path]:
        """The validation images of ``val_dir`` in name order (empty without ``val_dir``),
        checked once: each file's header readable, its PNG chunks intact (PIL ``verify``: CRCs,
        no pixel decode; catches a truncated PNG), and each side at least
        ``sr.core.degrade.min_hr_size(scale)`` pixels after the crop to a multiple of ``scale``
        (what evaluation needs).

        Raises:
            ImageFolderError: if ``val_dir`` is set but missing or empty, or an image is
                unreadable (names the file) or too small (names every such file and its size).
        """
        if self._val_files is None:
            files = list_images(self.val_dir) if self.val_dir else self.held_out
            self._check_val_files(files)
            self._val_files = files
        return self._val_files

    def _check_val_files(self, files: list[Path]) -> None:
        """The checks of :attr:`val_files` on ``files``.

        Raises:
            ImageFolderError: as :attr:`val_files`.
        """
        need, small = min_hr_size(self.scale), []
        for p in files:
            h, w = image_size(p)  # raises naming the file
            try:
                with Image.open(p) as im:
                    im.verify()
            except Exception as e:  # PIL raises OSError, SyntaxError, struct.error, ...
                raise ImageFolderError(
                    f"cannot read validation image {p}: {e}; remove or replace it"
                ) from e
            if min(h // self.scale, w // self.scale) * self.scale < need:
                small.append(f"{p.name} ({w}x{h})")
        if small:
            raise ImageFolderError(
                f"{len(small)} validation image(s) of {self.val_dir} smaller than the "
                f"{need}x{need} pixels that scale {self.scale} needs: {', '.join(small)}; "
                "remove them, or set data.val_dir to another folder (or null)"
            )

    def prepare(self) -> None:
        """Check the training and validation folders and do the source's own set-up (e.g.
        build TFRecord shards), before any model is built.

        Raises:
            ImageFolderError: if a folder is missing or has no usable image.
        """
        self.images  # noqa: B018  (scans and checks the training folder)
        self.val_files  # noqa: B018

    # -- datasets ------------------------------------------------------------------------------
    @abc.abstractmethod
    def patch_dataset(
        self, start: int = 0, batch_size: int | None = None, pipeline: tuple[int, int] = (0, 1)
    ) -> tf.data.Dataset:
        """Endless batches of uint8 patches before augmentation and LR generation:
        ``{"hr": uint8 [B, crop, crop, 1], "image": int32 [B]}`` (+ ``"lr"`` uint8
        ``[B, P/s, P/s, 1]`` with ``lr_dir``); with ``lr_from=rgb``, ``hr`` is RGB
        ``[B, crop, crop, 3]`` (a gray image's value in all three) and ``"gray"`` bool ``[B]``
        marks crops of gray images. ``image`` indexes ``self.images.files``. Used by
        :func:`pairs_dataset` and by the benchmarks.

        Args:
            start: the first batch's number in the stream of ``stream_seed``. A source with
                ``checkpoint_iterator`` ignores it (its iterator state is restored instead).
            batch_size: B of these batches (default ``self.batch_size``; under a distribution
                strategy, a replica's share of the global batch).
            pipeline: ``(index, count)`` of this input pipeline among the workers'; each
                pipeline reads a disjoint share of the data with its own seed.
        """

    def stream_identity(self) -> dict:
        """What the batch stream is a function of: the keys that shape it, the stream seed and a
        digest of the training images (names, byte sizes, pixel sizes). A resumed run continues
        the checkpoint's stream only if this is unchanged; else it starts a new one.
        """
        digest = hashlib.sha256()
        for p, hw in zip(self.images.files, self.images.sizes):
            digest.update(f"{p.name}\0{p.stat().st_size}\0{hw}\n".encode())
        return {
            "mode": self.mode,
            "seed": self.stream_seed,
            "batch_size": self.batch_size,
            "patch_size": self.patch_size,
            "scale": self.scale,
            "flip": self.flips != "none",
            "rot90": self.rot90,
            "lr_dir": str(self.lr_dir) if self.lr_dir else None,
            "images": digest.hexdigest()[:16],
            # only when not the default: runs saved before the key existed keep their identity
            **({"flips": self.flips} if self.flips == "h" else {}),
            **({"lr_from": self.lr_from} if self.lr_from != "y" else {}),
            **({"channels": self.channels} if self.channels != "y" else {}),
            **(
                {"degradation": self.degradation.identity()}
                if not self.degradation.protocol_lr
                else {}
            ),
        }

    def to_pairs(
        self, batch: dict[str, tf.Tensor], index: tf.Tensor | None = None, pipeline: int = 0
    ) -> tuple:
        """The shared graph stage: an augmented float ``sr.core.batch.Batch(lq, gt)`` from a
        patch batch (``sr.data.pairs.make_pairs``; ``SharpenedBatch(lq, gt_usm, gt)`` with
        :attr:`plain_target`), or with a device stage the flipped clean crops it takes
        (``(hr, gray, seeds)``, :meth:`device_stage`).

        Args:
            batch: a batch of :meth:`patch_dataset`.
            index: int64 scalar, the batch's position in the stream; with it the flips are a
                stateless function of (``seed``, index), so that a seeded source gives the same
                pairs in every run however ``map`` schedules its parallel calls. None: flips from
                TensorFlow's stateful generator.
            pipeline: the input pipeline's index (folded into the seed, so that workers flip
                independently; pipeline 0 is a single-pipeline run's stream).
        """
        if self.channels == "rgb" or not self.degradation.protocol_lr:
            flip_v, flip_h, transpose = random_masks(
                batch["hr"], self.flips, self.rot90, self.flip_seed(index, pipeline)
            )
            flips = (flip_v, flip_h, transpose if self.rot90 else None)  # as make_pairs
            seeds = self.element_seeds(batch["hr"], index, pipeline)
            if self.device_stage() is not None:  # the LR is made in the training step
                return flip_batch(batch["hr"], flips), batch["gray"], seeds
            return made_pairs(
                batch["hr"],
                batch["gray"],
                self.scale,
                self.margin,
                flips,
                self.channels,
                self.degradation,
                seeds,
                self.plain_target,
            )
        return make_pairs(
            batch["hr"],
            self.scale,
            self.margin,
            lr=batch.get("lr"),
            flips=self.flips,
            rot90=self.rot90,
            seed=self.flip_seed(index, pipeline),
            gray=batch.get("gray"),
        )

    def device_stage(self):
        """The part of the pair stage that runs in the training step, on the model's device:
        None when the input pipeline makes whole pairs (the default); with
        ``degradation.device=accelerator`` a function ``(hr uint8 [B, c, c, 3], gray bool [B],
        seeds int64 [B, 2]) -> Batch`` (``sr.data.pairs.degraded_pairs``), the input pipeline
        then yielding those flipped clean crops (a GPU's input pipeline only decodes, crops and
        flips), as Real-ESRGAN's ``feed_data`` degrades on the GPU; then through the training-pair
        pool of ``degradation.pool_size`` (:attr:`device_pool`, from :meth:`device_state`)."""
        if self.degradation.device != "accelerator":
            return None

        def stage(hr, gray, seeds):
            args = (self.scale, self.margin, self.channels, self.degradation)
            pairs = degraded_pairs(hr, gray, *args, seeds, self.plain_target)
            return pairs if self.device_pool is None else self.device_pool.apply(pairs, seeds[0])

        return stage

    def device_state(self, strategy, checkpoint: str | None):
        """What the device stage keeps across steps, to be saved with the data position: the
        pool of ``degradation.pool_size`` on the accelerator, one per local replica of
        ``strategy``, restored from ``checkpoint`` (None: emptied). None without one
        (``sr.data.pair_pool.device_pool_state``)."""
        return pair_pool.device_pool_state(self, strategy, checkpoint)

    def flip_seed(self, index: tf.Tensor | None, pipeline: int = 0) -> tf.Tensor | None:
        """The stateless seed of a batch's flips: int64 ``[2]`` ``(stream_seed, index)``, with
        the pipeline's index folded in when it is not 0; None (stateful flips) without ``index``.
        """
        if index is None:
            return None
        seed = tf.stack([tf.constant(self.stream_seed, tf.int64), tf.cast(index, tf.int64)])
        return tf.random.experimental.stateless_fold_in(seed, pipeline) if pipeline else seed

    def element_seeds(self, hr: tf.Tensor, index, pipeline: int = 0) -> tf.Tensor:
        """int64 ``[B, 2]`` stateless seeds of the degradation of each patch of batch ``index``:
        ``sr.degradations.realesrgan.image_seed(stream_seed, index B + j, pipeline)`` for patch j;
        without ``index``, drawn from TensorFlow's stateful generator."""
        b = tf.shape(hr)[0]
        if index is None:
            return tf.random.uniform([b, 2], maxval=2**62, dtype=tf.int64)
        first = tf.cast(index, tf.int64) * tf.cast(b, tf.int64)
        return image_seed(self.stream_seed, first + tf.range(tf.cast(b, tf.int64)), pipeline)

    def share(self, pipeline: tuple[int, int]) -> str:
        """What input pipeline ``(index, count)`` reads, for the log: ``images 1, 3, 5 of 6``."""
        index, count = pipeline
        n = len(self.images.files)
        return f"images {', '.join(map(str, range(index, n, count)))} of {n}"

    def check_pipelines(self, count: int) -> None:
        """Check at start-up that the data splits over ``count`` input pipelines (one per
        worker): each needs images of its own.

        Raises:
            ImageFolderError: if there are fewer usable images than pipelines.
        """
        if len(self.images.files) < count:
            raise ImageFolderError(
                f"{count} workers but only {len(self.images.files)} usable image(s) in "
                f"{self.hr_dir}: each worker reads images of its own; add images or use fewer "
                "workers"
            )

    def explain_data_loss(self, error: Exception) -> Exception:
        """The error to raise for a ``tf.errors.DataLossError`` met while reading this source:
        one that names the damaged file and the fix where the source can tell (TFRecord shards),
        else ``error`` itself."""
        return error

    def dataset(
        self,
        start: int = 0,
        context: tf.distribute.InputContext | None = None,
        slack: bool = True,
    ) -> tf.data.Dataset:
        """Endless ``sr.core.batch.Batch(lq, gt)`` batches from batch ``start`` on:
        :func:`pairs_dataset` (``slack=False`` for an iterator restored from a checkpoint)."""
        return pairs_dataset(self, start, context, slack)
