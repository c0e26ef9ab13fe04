"""``data=tfrecord``: the source that builds its shard set when missing or stale and reads it.

Two layouts (``data.subimage_size``):

* **patches** (0, the default): records are the crops themselves (HR patch + margin), cut on a
  grid at ``data.stride`` (default 64). A run sees only those positions: about 180 per
  1024 x 768 photograph, 650 per DIV2K image.
* **sub-images** (S > 0, BasicSR's layout, Wang et al. 2018 / ``extract_subimages.py``): records
  are S x S sub-images cut on a grid whose step (default: ``S - crop + 1``, the largest that leaves
  no crop position out) lets every crop position of the image fall inside some sub-image; reading
  cuts one crop at a uniformly random position inside each sub-image, in the tf.data graph
  (:func:`sr.data.tfrecord.read.random_crops`; stateless, seeded by the stream seed and the
  batch's number, so a resumed run crops as an uninterrupted one would). Every position is
  reachable, as in ``data=generator``, for less disk than the patch grid (1.7x the image's
  pixels at S = 480 against 3.1x), and at the cost of reading S^2 bytes per patch instead of
  crop^2.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import tensorflow as tf

from sr.core.errors import ConfigError
from sr.data.schemas import TFRecordConfig
from sr.data.source import PatchSource, checked
from sr.data.tfrecord.buildlock import build_lock
from sr.data.tfrecord.folders import check_destination
from sr.data.tfrecord.manifest import manifest_problem, mark_stale, read_manifest, stale_reason
from sr.data.tfrecord.params import (
    CHANNEL,
    CHANNEL_RGB,
    PatchParams,
    ShardError,
    full_coverage_stride,
)
from sr.data.tfrecord.read import read_patches
from sr.data.tfrecord.verify import check_shards, describe_bad_shards
from sr.data.tfrecord.write import write_shards

log = logging.getLogger(__name__)


class TFRecordSource(PatchSource):
    """``data=tfrecord``: patches cut on a grid into shuffled shards (built automatically when
    missing or stale, see :func:`write_shards`), read with tf.data (:func:`read_patches`).

    Keyword args: those of :class:`sr.data.source.PatchSource`, and
        tfrecord_dir: shard folder; None for ``<data_root>/tfrecords/<hr_dir name>-<hash>``.
        data_root: the project's dataset root.
        num_shards: shard files to write (>= 1).
        stride: grid step of record corners (>= 1; None: 64 for patches, for sub-images
            :func:`full_coverage_stride`, and with sub-images at most that).
        subimage_size: 0 (records are the crops) or the side S of sub-image records, at least
            the crop (``patch_size + 2 margin``) and a multiple of ``scale`` with ``lr_dir``.
        shuffle_buffer: read-time shuffle buffer in Y patches' worth of memory (0 or 1: none);
            with sub-images or RGB records :attr:`buffer_records` records.
        write_workers: decode threads while writing shards (>= 1).

    Raises:
        ValueError: for a value out of range, naming the key.
    """

    mode = "tfrecord"
    patch_stride = 64  # the grid step of patch records when data.stride is null
    schema = TFRecordConfig
    checkpoint_iterator = True  # resume restores the iterator: nothing repeated or skipped

    def __init__(
        self,
        *,
        tfrecord_dir: str | None,
        data_root: str,
        num_shards: int,
        stride: int | None,
        subimage_size: int,
        shuffle_buffer: int,
        write_workers: int,
        **common,
    ):
        super().__init__(**common)
        self.num_shards = checked(self.schema, "num_shards", num_shards)
        self.subimage_size = checked(self.schema, "subimage_size", subimage_size)
        crop, align = self.crop, self.scale if self.lr_dir else 1
        if self.subimage_size:
            if self.subimage_size < crop:
                raise ValueError(
                    f"data.subimage_size {subimage_size} is smaller than the crop {crop} "
                    f"(data.patch_size {self.patch_size} + 2 x margin {self.margin}): use 0 "
                    f"(patch records) or at least {crop}"
                )
            if self.subimage_size % align:
                raise ValueError(
                    f"data.subimage_size {subimage_size} is not a multiple of data.scale "
                    f"{self.scale} (needed with data.lr_dir): use "
                    f"{self.subimage_size // align * align or align}"
                )
            widest = full_coverage_stride(self.subimage_size, crop, align)
            self.stride = widest if stride is None else checked(self.schema, "stride", stride)
            if self.stride > widest:
                raise ValueError(
                    f"data.stride {stride} leaves crop positions out of every {subimage_size}-"
                    f"pixel sub-image (crop {crop}): use at most {widest}, or null for that"
                )
        else:
            self.stride = (
                self.patch_stride if stride is None else checked(self.schema, "stride", stride)
            )
        self.shuffle_buffer = checked(self.schema, "shuffle_buffer", shuffle_buffer)
        self.write_workers = checked(self.schema, "write_workers", write_workers)
        self.data_root = Path(data_root)
        if self.service:  # the position lives on the service's workers: not checkpointable
            from sr.data.service import parse_address

            self.service = parse_address(self.service)  # a malformed address: at start-up
            self.checkpoint_iterator = False
        self.tfrecord_dir = Path(tfrecord_dir) if tfrecord_dir else self._default_tfrecord_dir()

    def _default_tfrecord_dir(self) -> Path:
        """``<data_root>/tfrecords/<hr_dir name>-<hash of its path>``, with ``-sub<S>`` and
        ``-rgb`` for the other layouts: a run reading one layout while another run of the same
        folder builds a second one would otherwise find its shards replaced under it."""
        digest = hashlib.sha1(str(self.hr_dir.resolve()).encode()).hexdigest()[:8]
        layout = f"-sub{self.subimage_size}" if self.subimage_size else ""
        layout += "-rgb" if self.hr_channels == 3 else ""
        return self.data_root / "tfrecords" / f"{self.hr_dir.name}-{digest}{layout}"

    def params(self) -> PatchParams:
        """What the shards are cut with (stored in the manifest; a change rebuilds them)."""
        return PatchParams(
            patch_size=self.patch_size,
            scale=self.scale,
            margin=self.margin,
            stride=self.stride,
            lr_dir=str(self.lr_dir) if self.lr_dir else None,
            channel=CHANNEL_RGB if self.hr_channels == 3 else CHANNEL,
            subimage=self.subimage_size,
        )

    @property
    def buffer_records(self) -> int:
        """Records in the read-time shuffle buffer: as many as fit in the memory of
        ``shuffle_buffer`` one-channel crops (at least 1): ``shuffle_buffer`` itself for Y
        patches, fewer for sub-images or RGB records."""
        if self.shuffle_buffer <= 1:
            return self.shuffle_buffer
        record = self.params().record
        return max(1, self.shuffle_buffer * self.crop**2 // (record**2 * self.hr_channels))

    def check_images(self) -> None:
        """With sub-images, every training image must hold one (checked at start-up).

        Raises:
            ConfigError: naming the images smaller than ``data.subimage_size`` and the fix.
        """
        if not self.subimage_size:
            return
        small = [
            f"{p.name} ({w}x{h})"
            for p, (h, w) in zip(self.images.files, self.images.sizes)
            if min(h, w) < self.subimage_size
        ]
        if small:
            least = min(min(hw) for hw in self.images.sizes)
            raise ConfigError(
                f"data.subimage_size {self.subimage_size} is larger than {len(small)} image(s) "
                f"of {self.hr_dir}: {', '.join(small[:5])}{' ...' if len(small) > 5 else ''}; "
                f"use at most {least} (the smallest side), or 0 for patch records"
            )

    def prepare(self) -> None:
        """Check the folders and build the shards if missing or stale.

        With ``data.service``, also check that its dispatcher answers (within 10 s), before
        any shard or model work.

        Raises:
            ImageFolderError: if a folder is missing or has no usable image.
            sr.data.service.ServiceError: if no tf.data service dispatcher answers.
        """
        if self.service:
            from sr.data.service import check_reachable

            check_reachable(self.service)
        super().prepare()
        self.check_images()
        self.ensure_shards()

    def ensure_shards(self, force: bool = False) -> dict:
        """The manifest of up-to-date shards for this config, building them first if needed (or
        always, with ``force``).

        An up-to-date set is returned at once. Otherwise the build lock of the folder is taken
        (waiting for another process's build, see :func:`build_lock`), staleness is checked
        again (the other build may have made the set fresh), and only then is the set built.

        Raises:
            ShardError: before anything is decoded, if the set must be built and
                ``tfrecord_dir`` holds files a shard build did not write.
        """
        params = self.params()
        if not force:
            manifest = read_manifest(self.tfrecord_dir)
            if stale_reason(manifest, self.tfrecord_dir, self.images, params) is None:
                return manifest
        check_destination(self.tfrecord_dir)  # refuse before creating anything (the lock file)
        with build_lock(self.tfrecord_dir):
            manifest = read_manifest(self.tfrecord_dir)
            reason = stale_reason(manifest, self.tfrecord_dir, self.images, params)
            if reason is None and not force:
                log.info("using the shards another process just built in %s", self.tfrecord_dir)
                return manifest
            check_destination(self.tfrecord_dir)
            reason = reason or "rebuild forced"
            log.info("building TFRecord shards in %s: %s", self.tfrecord_dir, reason)
            return write_shards(
                self.images,
                self.tfrecord_dir,
                params,
                self.num_shards,
                seed=self.seed,
                workers=self.write_workers,
            )

    def share(self, pipeline: tuple[int, int]) -> str:
        index, count = pipeline
        n = len((read_manifest(self.tfrecord_dir) or {}).get("shards", []))
        return f"shard files {', '.join(map(str, range(index, n, count)))} of {n}"

    def check_pipelines(self, count: int) -> None:
        """Check at start-up that the shard files split over ``count`` input pipelines.

        Raises:
            ShardError: if there are fewer shard files than pipelines (names data.num_shards).
        """
        super().check_pipelines(count)
        shards = len((read_manifest(self.tfrecord_dir) or {}).get("shards", []))
        if count > 1 and shards < count:
            raise ShardError(
                f"{count} workers but {shards} shard file(s) in {self.tfrecord_dir}: each worker "
                f"reads shard files of its own; set data.num_shards to at least {count} (a "
                "multiple of it balances the workers)"
            )

    def explain_data_loss(self, error: tf.errors.DataLossError) -> Exception:
        """The error to raise for a ``DataLossError`` from :meth:`patch_dataset` (a record failed
        its CRC; tf.data does not say in which file): scans the shards (:func:`check_shards`),
        marks the set stale so that the next run rebuilds it, and names the corrupt shards.

        Returns:
            :class:`ShardError` naming the bad shards and the fix; ``error`` itself if no shard
            is found corrupt on a second read.
        """
        manifest = read_manifest(self.tfrecord_dir)
        if manifest is None or manifest_problem(manifest):
            return error
        bad = check_shards(self.tfrecord_dir, manifest)
        if not bad:
            return error
        mark_stale(self.tfrecord_dir)
        log.error("corrupt shards in %s: %s", self.tfrecord_dir, bad)
        return ShardError(describe_bad_shards(self.tfrecord_dir, bad))

    def patch_dataset(
        self, start: int = 0, batch_size: int | None = None, pipeline: tuple[int, int] = (0, 1)
    ) -> tf.data.Dataset:
        """The shards read by :func:`read_patches` with the stream's seed; ``pipeline`` ``(i, n)``
        reads shard files ``i, i + n, ...`` (see there). ``start`` is ignored: a resumed run
        restores this dataset's iterator from its checkpoint (``checkpoint_iterator``), shuffle
        buffer and prefetched batches included.

        Raises:
            ShardError: if there are fewer shard files than pipelines (names ``data.num_shards``).
        """
        manifest = self.ensure_shards()
        if manifest["images"] != [p.name for p in self.images.files]:
            raise RuntimeError(f"manifest of {self.tfrecord_dir} lists other images")
        if self.subimage_size:
            log.info(
                "sub-images of %d px, one random %d px crop each when read; shuffle buffer %d "
                "sub-images (%.0f MB, the memory of data.shuffle_buffer=%d crops)",
                self.subimage_size,
                self.crop,
                self.buffer_records,
                self.buffer_records * self.subimage_size**2 / 2**20,
                self.shuffle_buffer,
            )
        return read_patches(
            self.tfrecord_dir,
            manifest,
            batch_size or self.batch_size,
            self.buffer_records,
            # on tf.data service workers every worker runs this graph: a fixed seed would make
            # two workers handed the same files shuffle them alike (identical batches)
            seed=None if self.service else self.stream_seed,
            deterministic=self.deterministic,
            pipeline=pipeline,
        )

    def stream_identity(self) -> dict:
        # the whole manifest: a rebuilt set (even of the same images) is another stream, since
        # the saved iterator holds byte offsets into the shard files
        manifest = json.dumps(read_manifest(self.tfrecord_dir), sort_keys=True)
        return {
            **super().stream_identity(),
            "shuffle_buffer": self.shuffle_buffer,
            "shards": hashlib.sha256(manifest.encode()).hexdigest()[:16],
        }
