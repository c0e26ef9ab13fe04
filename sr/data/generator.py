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

import logging
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from sr.data.images import ImageSet, load_y_pair
from sr.data.source import DataConfig, PatchSource, at_least

log = logging.getLogger(__name__)


class PatchPool:
    """Endless source of batches of uint8 Y crops drawn from a pool of decoded images.

    Args:
        images: usable images (``scan_folder``).
        crop: HR crop size in pixels (patch + 2 margin).
        batch_size: B, patches per batch.
        patches_per_image: crops taken from one decoded image before it is replaced.
        pool_size: most images held at once.
        pool_memory_mb: most megabytes of decoded images held at once (bounds ``pool_size``).
        decode_workers: decode threads.
        seed: random seed (None: fresh entropy).
        lr_dir, scale, lr_patch: pre-made LR folder (or None), the scale, and the LR patch size.
    """

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
    ):
        if patches_per_image < 1 or pool_size < 1 or batch_size < 1:
            raise ValueError(
                f"patches_per_image ({patches_per_image}), pool_size ({pool_size}) and "
                f"batch_size ({batch_size}) must be >= 1"
            )
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
        self.decodes = 0  # images decoded so far, for benchmarks

    def _decode(self, i: int):
        hr, lr = load_y_pair(self.images.files[i], self.lr_dir, self.scale)
        return i, hr, lr

    def __call__(self) -> Iterator[dict[str, np.ndarray]]:
        """Yield ``{"hr": uint8 [B, crop, crop, 1], "image": int32 [B]}`` (plus ``"lr"`` uint8
        ``[B, p, p, 1]`` with pre-made LR) forever."""
        rng = np.random.default_rng(self.seed)
        n = len(self.images.files)
        ahead = 2 * self.decode_workers
        with ThreadPoolExecutor(self.decode_workers, thread_name_prefix="decode") as ex:
            queue: deque = deque()

            pending: deque = deque()  # file indices in epoch order, reshuffled every epoch
            active: dict[int, int] = {}  # file index -> copies in the pool or being decoded

            def next_file() -> int:
                # the first pending file not already in the pool, so that a batch's patches come
                # from distinct images even when the pool holds most of the folder
                if len(pending) < n:
                    pending.extend(int(i) for i in rng.permutation(n))
                for _ in range(len(pending)):
                    i = pending.popleft()
                    if not active.get(i):
                        return i
                    pending.append(i)
                return pending.popleft()  # every file is in the pool already

            def next_image():
                while len(queue) < ahead + 1:
                    i = next_file()
                    active[i] = active.get(i, 0) + 1
                    queue.append(ex.submit(self._decode, i))
                self.decodes += 1
                return queue.popleft().result()

            def release(item):
                active[item[0]] -= 1

            pool, budget, used = [], [], 0
            keep_all = n <= self.pool_size
            while len(pool) < min(n, self.pool_size):
                item = next_image()
                size = item[1].nbytes + (0 if item[2] is None else item[2].nbytes)
                if pool and used + size > self.pool_bytes:
                    keep_all = False
                    release(item)
                    break
                pool.append(item)
                used += size
            if keep_all:
                queue.clear()  # decoded ahead but not needed: the whole folder is in the pool
                log.info(
                    "generator: all %d images decoded once and kept (%.0f MB)", n, used / 2**20
                )
            else:
                k = len(pool)
                budget = [max(1, (self.patches_per_image * (j + 1)) // k) for j in range(k)]
                log.info(
                    "generator: pool of %d images (%.0f MB, bound %d images / %.0f MB), "
                    "%d patches per decoded image",
                    k,
                    used / 2**20,
                    self.pool_size,
                    self.pool_bytes / 2**20,
                    self.patches_per_image,
                )
                if k < self.batch_size:
                    log.warning(
                        "generator pool holds %d images < batch size %d: batches repeat images; "
                        "raise data.pool_memory_mb or data.pool_size",
                        k,
                        self.batch_size,
                    )
            while True:
                yield self._batch(pool, rng)
                if keep_all:
                    continue
                for j in self._last_picks:
                    budget[j] -= 1
                for j in [j for j in set(self._last_picks) if budget[j] <= 0]:
                    release(pool[j])
                    pool[j] = next_image()
                    budget[j] = self.patches_per_image

    def _batch(self, pool, rng) -> dict[str, np.ndarray]:
        k, b, c = len(pool), self.batch_size, self.crop
        picks = rng.choice(k, size=b, replace=k < b)
        self._last_picks = picks
        s = self.scale if self.lr_dir is not None else 1
        hr = np.empty((b, c, c, 1), np.uint8)
        lr = np.empty((b, self.lr_patch, self.lr_patch, 1), np.uint8) if self.lr_dir else None
        index = np.empty(b, np.int32)
        for out, j in enumerate(picks):
            i, img, lr_img = pool[j]
            y = rng.integers((img.shape[0] - c) // s + 1) * s
            x = rng.integers((img.shape[1] - c) // s + 1) * s
            hr[out, ..., 0] = img[y : y + c, x : x + c]
            if lr is not None:
                p = self.lr_patch
                lr[out, ..., 0] = lr_img[y // s : y // s + p, x // s : x // s + p]
            index[out] = i
        batch = {"hr": hr, "image": index}
        if lr is not None:
            batch["lr"] = lr
        return batch


# ------------------------------------------------------------------------------------------------
# The source: data=generator
# ------------------------------------------------------------------------------------------------
@dataclass
class GeneratorConfig(DataConfig):
    """Keys of ``data=generator`` (schema; defaults written here only)."""

    patches_per_image: int = 64  # crops from one decoded image before it leaves the pool
    pool_size: int = 128  # decoded images held at once
    # (a DIV2K image's Y is about 2.9 MB, 2040 x 1400 x 1 B: 128 images take about 370 MB)
    pool_memory_mb: float = 1024.0  # memory bound of the pool (MB), never exceeded
    decode_workers: int = 2  # decode threads


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
        super().__init__(**common)
        self.patches_per_image = at_least("patches_per_image", patches_per_image)
        self.pool_size = at_least("pool_size", pool_size)
        self.pool_memory_mb = at_least("pool_memory_mb", pool_memory_mb, minimum=1e-3)
        self.decode_workers = at_least("decode_workers", decode_workers)
        self.pool: PatchPool | None = None  # the last pool made, for the benchmarks

    def patch_dataset(self) -> tf.data.Dataset:
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
