"""Generator mode: a pool of decoded images ("random caching filter") that yields whole batches.

Each image is decoded once (in background threads, which release the GIL while Pillow decodes)
and enters a pool of at most ``pool_size`` images and ``pool_memory_mb`` megabytes. Every batch
takes its B patches from B different pool images chosen uniformly at random (with replacement
only when the pool holds fewer than B images), one random crop each. An image leaves the pool
after ``patches_per_image`` crops and the next decoded image takes its place; the images of the
first fill get staggered budgets so that replacements arrive at a steady rate instead of all at
once. When the whole folder fits in the pool it is decoded once and kept.

Memory: the pool holds uint8 Y images, H x W bytes each (2.9 MB for a 2040x1400 DIV2K image), plus
up to ``2 * decode_workers`` images being decoded ahead.

Source: the "random caching filter" of the Q&A in ``references/000`` (decode once, keep N images,
draw at random, replace over time), batched so that no Python runs per patch beyond one slice.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from sr.core.images import ImageFolderError, ImageSet, load_rgb, load_y_pair
from sr.data.schemas import GeneratorConfig
from sr.data.source import PatchSource, checked

log = logging.getLogger(__name__)


@dataclass
class Plan:
    """The random decisions of one batch, made from image sizes alone (no pixels).

    Attributes:
        loads: ``(slot, file index)`` pairs: images that enter the pool before this batch (all
            of the pool for the first batch of a stream).
        slots: int ``[B]``, the pool slot each patch is cut from.
        ys, xs: int ``[B]``, top-left corner of each HR crop in its image (pixels; multiples of
            the scale with pre-made LR, so that the LR crop starts on its own pixel grid).
    """

    loads: list[tuple[int, int]]
    slots: np.ndarray
    ys: np.ndarray
    xs: np.ndarray


class PatchPool:
    """Endless source of batches of uint8 Y crops drawn from a pool of decoded images.

    The pool's random decisions (which file enters which slot when, which slot and which crop
    each patch takes) are a function of the seed and the images' sizes alone (:meth:`plans`,
    from file headers), and decoding only follows them. So the stream can start at any batch
    (``pool(start)``): the decisions of the first ``start`` batches are replayed without decoding
    (its cost: ``docs/performance.md``, "Exact resume"), then the images in the pool at that point
    are decoded, and the batches from ``start`` on are those of an
    uninterrupted stream, bit for bit.

    Args:
        images: usable images (``scan_folder``, with their sizes).
        crop: HR crop size in pixels (patch + 2 margin).
        batch_size: B, patches per batch.
        patches_per_image: crops taken from one decoded image before it is replaced.
        pool_size: most images held at once.
        pool_memory_mb: most megabytes of decoded images held at once (bounds ``pool_size``).
        decode_workers: decode threads.
        seed: random seed (None: fresh entropy).
        lr_dir, scale, lr_patch: pre-made LR folder (or None), the scale, and the LR patch size.
        channels: 1 (Y images) or 3 (RGB images, for ``data.lr_from=rgb``; batches then carry
            ``gray`` flags); counted in the memory bound.
    """

    PLANS_AHEAD = 64  # most batch plans read ahead to find the next images to decode

    def __init__(
        self,
        images: ImageSet,
        crop: int,
        batch_size: int,
        patches_per_image: int,
        pool_size: int,
        pool_memory_mb: float,
        decode_workers: int = 2,
        seed: int | None = None,
        lr_dir: str | None = None,
        scale: int = 4,
        lr_patch: int = 0,
        channels: int = 1,
    ):
        if patches_per_image < 1 or pool_size < 1 or batch_size < 1:
            raise ValueError(
                f"patches_per_image ({patches_per_image}), pool_size ({pool_size}) and "
                f"batch_size ({batch_size}) must be >= 1"
            )
        if len(images.sizes) != len(images.files):
            raise ValueError("images must come from scan_folder (with the size of every file)")
        self.images = images
        self.crop = crop
        self.batch_size = batch_size
        self.patches_per_image = patches_per_image
        self.pool_size = pool_size
        self.pool_bytes = int(pool_memory_mb * 2**20)
        self.decode_workers = max(1, decode_workers)
        self.seed = seed
        self.lr_dir = lr_dir
        self.scale = scale
        self.lr_patch = lr_patch
        self.channels = channels
        self.decodes = 0  # images decoded so far, for benchmarks
        self.replay_seconds = 0.0  # time spent replaying the plans before ``start``

    def _nbytes(self, i: int) -> int:
        h, w = self.images.sizes[i]
        return h * w * self.channels + (
            (h // self.scale) * (w // self.scale) if self.lr_dir else 0
        )

    def epoch_order(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """The order in which the ``n`` items enter the pool in one epoch: a uniform random
        permutation (``rng.permutation(n)``)."""
        return rng.permutation(n)

    def plans(self) -> Iterator[Plan]:
        """The pool's decisions, batch after batch, forever (see :class:`Plan`).

        Files enter the pool in epoch order (a fresh permutation every epoch, skipping files
        already in the pool so that a batch's patches come from distinct images), until
        ``pool_size`` images or ``pool_memory_mb`` are reached. Each batch picks B distinct slots
        (with replacement only when the pool holds fewer than B images) and one uniform crop in
        each; a slot whose image has given ``patches_per_image`` crops takes the next file. The
        images of the first fill get staggered budgets so that replacements come at a steady
        rate. Two generators (``SeedSequence(seed).spawn(2)``) draw the file order and the crops.
        """
        order_rng, crop_rng = (
            np.random.default_rng(s) for s in np.random.SeedSequence(self.seed).spawn(2)
        )
        n, b, c = len(self.images.files), self.batch_size, self.crop
        s = self.scale if self.lr_dir is not None else 1
        sizes = np.asarray(self.images.sizes, dtype=np.int64).reshape(-1, 2)
        heights, widths = sizes[:, 0], sizes[:, 1]
        pending: deque = deque()  # file indices in epoch order
        in_pool: dict[int, int] = {}  # file index -> slots holding it

        def next_file() -> int:
            if len(pending) < n:
                pending.extend(int(i) for i in self.epoch_order(order_rng, n))
            for _ in range(len(pending)):
                i = pending.popleft()
                if not in_pool.get(i):
                    break
                pending.append(i)
            else:  # every file is in the pool already
                i = pending.popleft()
            in_pool[i] = in_pool.get(i, 0) + 1
            return i

        slots: list[int] = []
        used = 0
        keep_all = n <= self.pool_size
        while len(slots) < min(n, self.pool_size):
            i = next_file()
            if slots and used + self._nbytes(i) > self.pool_bytes:
                in_pool[i] -= 1
                pending.appendleft(i)
                keep_all = False
                break
            slots.append(i)
            used += self._nbytes(i)
        k = len(slots)
        budget = np.array(
            [max(1, (self.patches_per_image * (j + 1)) // k) for j in range(k)], np.int64
        )
        self.pool_images, self.pool_used, self.keep_all = k, used, keep_all
        loads = list(enumerate(slots))
        files = np.array(slots)
        while True:
            picks = crop_rng.choice(k, size=b, replace=k < b)
            chosen = files[picks]
            ys = crop_rng.integers((heights[chosen] - c) // s + 1) * s
            xs = crop_rng.integers((widths[chosen] - c) // s + 1) * s
            yield Plan(loads, picks, ys, xs)
            loads = []
            if keep_all:
                continue
            np.subtract.at(budget, picks, 1)
            for j in np.flatnonzero(budget <= 0):
                in_pool[int(files[j])] -= 1
                files[j] = next_file()
                budget[j] = self.patches_per_image
                loads.append((int(j), int(files[j])))

    def _decode(self, i: int):
        """``(hr, lr, gray)`` of image ``i``: Y ``[H, W]`` and pre-made LR Y or None, or with
        3 channels RGB ``[H, W, 3]``, None and whether the image is gray."""
        gray = False
        if self.channels == 3:
            (hr, gray), lr = load_rgb(self.images.files[i]), None
        else:
            hr, lr = load_y_pair(self.images.files[i], self.lr_dir, self.scale)
        if hr.shape[:2] != self.images.sizes[i]:
            raise ImageFolderError(
                f"{self.images.files[i]} is {hr.shape[1]}x{hr.shape[0]} pixels, but its header "
                f"said {self.images.sizes[i][1]}x{self.images.sizes[i][0]} when the folder was "
                "scanned: the file changed during training; restore it, or restart the run"
            )
        return hr, lr, gray

    def __call__(self, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        """Yield batches from batch number ``start`` on (0: the stream's beginning):
        ``{"hr": uint8 [B, crop, crop, C], "image": int32 [B]}``, plus ``"lr"`` uint8
        ``[B, p, p, 1]`` with pre-made LR and ``"gray"`` bool ``[B]`` with 3 channels. Images
        are decoded ahead in threads (at most ``2 * decode_workers`` beyond the pool)."""
        plans = self.plans()
        t0 = time.perf_counter()
        first = next(plans)
        if start:
            current = dict(first.loads)
            for _ in range(start):
                first = next(plans)
                current.update(first.loads)
            first = Plan(sorted(current.items()), first.slots, first.ys, first.xs)
        self.replay_seconds = time.perf_counter() - t0
        if start:
            log.info(
                "generator: replayed the pool's decisions for %d batches in %.1f s (no decoding)",
                start,
                self.replay_seconds,
            )
        self._log_pool()
        ahead = 2 * self.decode_workers
        stream = itertools.chain([first], plans)
        read: deque[Plan] = deque()  # plans read ahead and not yet cut; read[0] is the next
        todo: deque = deque()  # (plan number, slot, file) of their loads not yet submitted
        pending: deque = deque()  # (plan number, slot, file, future): decodes under way or done
        numbers = itertools.count()  # plan numbers, in stream order

        def read_plan() -> None:
            plan, n = next(stream), next(numbers)
            read.append(plan)
            todo.extend((n, j, i) for j, i in plan.loads)

        with ThreadPoolExecutor(self.decode_workers, thread_name_prefix="decode") as ex:

            def submit() -> None:
                # at most ``ahead`` images decoded and not yet in the pool, whatever a plan loads
                while len(pending) < ahead:
                    if not todo:
                        if len(read) >= self.PLANS_AHEAD:
                            return
                        read_plan()
                        continue
                    n, j, i = todo.popleft()
                    pending.append((n, j, i, ex.submit(self._decode, i)))

            pool: dict[int, tuple] = {}
            for current in itertools.count():
                if not read:
                    read_plan()
                submit()
                # this batch's loads, in plan order, each into its slot as its decode ends (the
                # slot's old image is released then)
                while pending and pending[0][0] == current:
                    _, j, i, future = pending.popleft()
                    pool[j] = (i, *future.result())
                    self.decodes += 1
                    submit()
                yield self._cut(pool, read.popleft())

    def _log_pool(self) -> None:
        n = len(self.images.files)
        if self.keep_all:
            log.info(
                "generator: all %d images decoded once and kept (%.0f MB)",
                n,
                self.pool_used / 2**20,
            )
            return
        log.info(
            "generator: pool of %d images (%.0f MB, bound %d images / %.0f MB), "
            "%d patches per decoded image",
            self.pool_images,
            self.pool_used / 2**20,
            self.pool_size,
            self.pool_bytes / 2**20,
            self.patches_per_image,
        )
        if self.pool_images < self.batch_size:
            log.warning(
                "generator pool holds %d images < batch size %d: batches repeat images; "
                "raise data.pool_memory_mb or data.pool_size",
                self.pool_images,
                self.batch_size,
            )

    def _cut(self, pool: dict[int, tuple], plan: Plan) -> dict[str, np.ndarray]:
        b, c, p = self.batch_size, self.crop, self.lr_patch
        s = self.scale
        hr = np.empty((b, c, c, self.channels), np.uint8)
        lr = np.empty((b, p, p, 1), np.uint8) if self.lr_dir else None
        gray = np.zeros(b, bool)
        index = np.empty(b, np.int32)
        for out, (j, y, x) in enumerate(zip(plan.slots, plan.ys, plan.xs)):
            i, img, lr_img, gray[out] = pool[j]
            hr[out] = img[y : y + c, x : x + c].reshape(c, c, -1)
            if lr is not None:
                lr[out, ..., 0] = lr_img[y // s : y // s + p, x // s : x // s + p]
            index[out] = i
        batch = {"hr": hr, "image": index}
        if lr is not None:
            batch["lr"] = lr
        if self.channels == 3:
            batch["gray"] = gray
        return batch


# ------------------------------------------------------------------------------------------------
# The source: data=generator
# ------------------------------------------------------------------------------------------------
class GeneratorSource(PatchSource):
    """``data=generator``: a :class:`PatchPool` of decoded images, read through
    ``tf.data.Dataset.from_generator`` one whole batch per call.

    Keyword args: those of :class:`sr.data.source.PatchSource`, and
        patches_per_image: crops taken from one decoded image before it is replaced (>= 1).
        pool_size: most decoded images held at once (>= 1).
        pool_memory_mb: memory bound of the pool in MB (> 0).
        decode_workers: decode threads (>= 1).

    Raises:
        ValueError: for a value out of range, naming the key.
    """

    mode = "generator"
    schema = GeneratorConfig

    def __init__(
        self,
        *,
        patches_per_image: int,
        pool_size: int,
        pool_memory_mb: float,
        decode_workers: int,
        **common,
    ):
        super().__init__(**common)  # checks the schema's rules (data.service: tfrecord only)
        self.patches_per_image = checked(self.schema, "patches_per_image", patches_per_image)
        self.pool_size = checked(self.schema, "pool_size", pool_size)
        self.pool_memory_mb = checked(self.schema, "pool_memory_mb", pool_memory_mb)
        self.decode_workers = checked(self.schema, "decode_workers", decode_workers)
        self.pool: PatchPool | None = None  # the last pool made, for the benchmarks

    def patch_dataset(
        self, start: int = 0, batch_size: int | None = None, pipeline: tuple[int, int] = (0, 1)
    ) -> tf.data.Dataset:
        """Batches from batch number ``start`` on: those of an uninterrupted stream of the same
        seed, bit for bit (the pool replays its decisions without decoding, :class:`PatchPool`).

        Args:
            start: the first batch's number in this pipeline's stream.
            batch_size: patches per batch (default ``batch_size``; a replica's share under a
                distribution strategy).
            pipeline: ``(index, count)`` of this input pipeline: pipeline ``i`` of ``n`` draws
                from images ``i, i + n, i + 2n, ...`` of the folder with its own seed, so that no
                two workers share an image or a crop. ``image`` indices stay the folder's.

        Raises:
            ValueError: if there are fewer usable images than pipelines.
        """
        index, count = pipeline
        ids = np.arange(len(self.images.files))[index::count]
        if not len(ids):
            raise ValueError(
                f"{count} input pipelines but only {len(self.images.files)} usable image(s) in "
                f"{self.hr_dir}: each worker needs images of its own"
            )
        images = ImageSet(
            self.images.folder,
            tuple(self.images.files[i] for i in ids),
            self.images.skipped,
            tuple(self.images.sizes[i] for i in ids),
        )
        b = batch_size or self.batch_size
        pool = PatchPool(
            images,
            self.crop,
            b,
            self.patches_per_image,
            self.pool_size,
            self.pool_memory_mb,
            self.decode_workers,
            self.stream_seed if index == 0 else [self.stream_seed, index],
            lr_dir=str(self.lr_dir) if self.lr_dir else None,
            scale=self.scale,
            lr_patch=self.lr_patch_size,
            channels=self.hr_channels,
        )
        c, p = self.crop, self.lr_patch_size
        signature = {
            "hr": tf.TensorSpec([b, c, c, self.hr_channels], tf.uint8),
            "image": tf.TensorSpec([b], tf.int32),
        }
        if self.lr_dir:
            signature["lr"] = tf.TensorSpec([b, p, p, 1], tf.uint8)
        if self.hr_channels == 3:
            signature["gray"] = tf.TensorSpec([b], tf.bool)
        self.pool = pool
        folder_ids = ids.astype(np.int32)

        def batches():
            for batch in pool(start):
                batch["image"] = folder_ids[batch["image"]]  # the pipeline's -> the folder's
                yield batch

        return tf.data.Dataset.from_generator(batches, output_signature=signature)

    def stream_identity(self) -> dict:
        return {
            **super().stream_identity(),
            "patches_per_image": self.patches_per_image,
            "pool_size": self.pool_size,
            "pool_memory_mb": self.pool_memory_mb,
        }
