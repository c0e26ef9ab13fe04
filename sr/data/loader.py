"""``DataLoader``: the public contract of the input pipeline.

``hydra.utils.instantiate(cfg.data)`` returns a :class:`DataLoader`; its :meth:`dataset` returns
an endless ``tf.data.Dataset`` of ``(lr, hr)`` batches:

- ``lr``: float32 ``[B, P/s, P/s, 1]``, ``hr``: float32 ``[B, P, P, 1]``, values in [0, 1];
- the channel is Y of BT.601 as MATLAB ``rgb2ycbcr`` (16..235, divided by 255);
- LR is the MATLAB-equivalent antialiased bicubic downscale of HR computed from an HR crop with a
  margin (no border error), rounded to the 8-bit grid; or, with ``lr_dir``, pre-made LR images;
- random vertical and horizontal flips per sample (and transposes with ``rot90``), identical for
  LR and HR.

Two modes, the same pairs: ``tfrecord`` reads sharded patches written by
``scripts/make_tfrecords.py`` (built automatically when missing or stale); ``generator`` decodes
the images in Python threads into a pool and draws batches from many of them. Both end in the
same graph stage, :func:`sr.data.pairs.make_pairs`.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import tensorflow as tf

from sr.data import tfrecord
from sr.data.generator import PatchPool
from sr.data.images import ImageSet, scan_folder
from sr.data.pairs import make_pairs

log = logging.getLogger(__name__)

MODES = ("tfrecord", "generator")


class DataLoader:
    """LR/HR patch pairs of the Y channel for SR training (see the module docstring).

    Args:
        mode: ``"tfrecord"`` or ``"generator"``.
        hr_dir: folder of HR training images (PNG/JPEG; RGB, gray, RGBA or palette).
        val_dir: folder of full validation images (used by the trainer, listed here so that one
            config group holds the data).
        lr_dir: optional folder of pre-made LR images (DIV2K ``X4`` layout, ``0001x4.png``).
        batch_size: B.
        patch_size: HR patch P in pixels (a multiple of ``scale``).
        scale: s.
        flip: random flips. rot90: random transposes too.
        seed: seed of shuffles, crops and flips (None: nondeterministic).
        tfrecord_dir: shard folder; None for ``<data_root>/tfrecords/<hr_dir name>-<hash>``.
        data_root: the project's dataset root (default shard location).
        num_shards: shard files to write. stride: grid step of patch corners when writing.
        shuffle_buffer: records in the read-time shuffle buffer.
        write_workers: decode threads while writing shards.
        deterministic: keep the interleave order deterministic (slower).
        patches_per_image: generator mode: crops per decoded image.
        pool_size: generator mode: most decoded images in the pool.
        pool_memory_mb: generator mode: memory bound of the pool (MB).
        decode_workers: generator mode: decode threads.

    Raises:
        ValueError: on an unknown mode or sizes that do not divide by the scale.
    """

    def __init__(
        self,
        mode: str = "tfrecord",
        hr_dir: str = "data/demo/train",
        val_dir: str | None = "data/demo/val",
        lr_dir: str | None = None,
        batch_size: int = 64,
        patch_size: int = 96,
        scale: int = 4,
        flip: bool = True,
        rot90: bool = False,
        seed: int | None = None,
        tfrecord_dir: str | None = None,
        data_root: str = "data",
        num_shards: int = 10,
        stride: int = 64,
        shuffle_buffer: int = 2048,
        write_workers: int = 2,
        deterministic: bool = False,
        patches_per_image: int = 64,
        pool_size: int = 128,
        pool_memory_mb: float = 1024,
        decode_workers: int = 2,
    ):
        if mode not in MODES:
            raise ValueError(f"data.mode must be one of {MODES}, got {mode!r}")
        if patch_size % scale:
            raise ValueError(f"data.patch_size {patch_size} is not a multiple of scale {scale}")
        self.mode = mode
        self.hr_dir = Path(hr_dir).expanduser()
        self.val_dir = Path(val_dir).expanduser() if val_dir else None
        self.lr_dir = Path(lr_dir).expanduser().resolve() if lr_dir else None
        self.batch_size = batch_size
        self.patch_size = patch_size
        self.scale = scale
        self.flip = flip
        self.rot90 = rot90
        self.seed = seed
        self.data_root = Path(data_root)
        self.num_shards = num_shards
        self.stride = stride
        self.shuffle_buffer = shuffle_buffer
        self.write_workers = write_workers
        self.deterministic = deterministic
        self.patches_per_image = patches_per_image
        self.pool_size = pool_size
        self.pool_memory_mb = pool_memory_mb
        self.decode_workers = decode_workers
        self.tfrecord_dir = Path(tfrecord_dir) if tfrecord_dir else self._default_tfrecord_dir()
        self._images: ImageSet | None = None

    # -- geometry ------------------------------------------------------------------------------
    @property
    def margin(self) -> int:
        """HR pixels kept around each patch so that its LR has no border effect (0 with lr_dir)."""
        return 0 if self.lr_dir else 2 * self.scale

    @property
    def crop(self) -> int:
        return self.patch_size + 2 * self.margin

    @property
    def lr_patch_size(self) -> int:
        return self.patch_size // self.scale

    def params(self) -> tfrecord.PatchParams:
        return tfrecord.PatchParams(
            patch_size=self.patch_size,
            scale=self.scale,
            margin=self.margin,
            stride=self.stride,
            lr_dir=str(self.lr_dir) if self.lr_dir else None,
        )

    def _default_tfrecord_dir(self) -> Path:
        digest = hashlib.sha1(str(self.hr_dir.resolve()).encode()).hexdigest()[:8]
        return self.data_root / "tfrecords" / f"{self.hr_dir.name}-{digest}"

    # -- inputs --------------------------------------------------------------------------------
    @property
    def images(self) -> ImageSet:
        """The usable training images (scanned once; raises ``ImageFolderError`` if none)."""
        if self._images is None:
            self._images = scan_folder(self.hr_dir, self.crop)
        return self._images

    def prepare(self) -> None:
        """Check the image folder and, in TFRecord mode, build the shards if missing or stale.

        Raises:
            ImageFolderError: if the folder is missing or has no usable image.
        """
        images = self.images
        if self.mode == "tfrecord":
            self.ensure_shards(images)

    def ensure_shards(self, images: ImageSet | None = None, force: bool = False) -> dict:
        """The manifest of up-to-date shards for this config, building them first if needed (or
        always, with ``force``)."""
        images = images or self.images
        manifest = tfrecord.read_manifest(self.tfrecord_dir)
        reason = tfrecord.stale_reason(manifest, self.tfrecord_dir, images, self.params())
        if reason is None and not force:
            return manifest
        reason = reason or "rebuild forced"
        log.info("building TFRecord shards in %s: %s", self.tfrecord_dir, reason)
        return tfrecord.write_shards(
            images,
            self.tfrecord_dir,
            self.params(),
            self.num_shards,
            seed=self.seed,
            workers=self.write_workers,
        )

    # -- datasets ------------------------------------------------------------------------------
    def patch_dataset(self) -> tf.data.Dataset:
        """Endless batches of uint8 patches before augmentation and LR generation:
        ``{"hr": uint8 [B, crop, crop, 1], "image": int32 [B]}`` (+ ``"lr"`` with ``lr_dir``);
        ``image`` indexes ``self.images.files``. Used by :meth:`dataset` and by the benchmarks."""
        if self.mode == "tfrecord":
            manifest = self.ensure_shards()
            if manifest["images"] != [p.name for p in self.images.files]:
                raise RuntimeError(f"manifest of {self.tfrecord_dir} lists other images")
            return tfrecord.read_patches(
                self.tfrecord_dir,
                manifest,
                self.batch_size,
                self.shuffle_buffer,
                seed=self.seed,
                deterministic=self.deterministic,
            )
        pool = PatchPool(
            self.images,
            self.crop,
            self.batch_size,
            self.patches_per_image,
            self.pool_size,
            self.pool_memory_mb,
            self.decode_workers,
            self.seed,
            lr_dir=str(self.lr_dir) if self.lr_dir else None,
            scale=self.scale,
            lr_patch=self.lr_patch_size,
        )
        b, c, p = self.batch_size, self.crop, self.lr_patch_size
        signature = {
            "hr": tf.TensorSpec([b, c, c, 1], tf.uint8),
            "image": tf.TensorSpec([b], tf.int32),
        }
        if self.lr_dir:
            signature["lr"] = tf.TensorSpec([b, p, p, 1], tf.uint8)
        self.pool = pool
        return tf.data.Dataset.from_generator(pool, output_signature=signature)

    def to_pairs(self, batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        """The shared graph stage: augmented float ``(lr, hr)`` from a patch batch."""
        return make_pairs(
            batch["hr"],
            self.scale,
            self.margin,
            lr=batch.get("lr"),
            flip=self.flip,
            rot90=self.rot90,
        )

    def dataset(self) -> tf.data.Dataset:
        """Endless ``tf.data.Dataset`` of ``(lr, hr)``: float32 ``[B, P/s, P/s, 1]`` and
        ``[B, P, P, 1]`` in [0, 1] (see the module docstring).

        Raises:
            ImageFolderError: if the image folder is missing or holds no usable image.
        """
        ds = self.patch_dataset().map(self.to_pairs, num_parallel_calls=tf.data.AUTOTUNE)
        options = tf.data.Options()
        options.deterministic = self.deterministic
        return ds.with_options(options).prefetch(tf.data.AUTOTUNE)
