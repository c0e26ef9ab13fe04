"""Sequence mode: samples of k consecutive frames at a stride from time-ordered sequences.

``data.hr_dir`` holds one subfolder per sequence (a video clip, a burst, a day of a time-lapse);
its frames are ordered by natural file-name order (``frame2`` before ``frame10``), all of one
size. A sample is a *window* of ``frames`` (k) frames at ``frame_stride`` (s): frames
``t, t + s, ..., t + (k - 1) s`` of one sequence, never crossing a sequence boundary; its target
is the HR of one frame of the window (``target_frame``: ``last``, the choice of
``references/001``, ``center``, or an index 0..k-1).

Shuffling across and within sequences without loading a sequence. The sample index is the list
of every ``(sequence, start frame)`` pair, sorted, ``sum(n_q - (k - 1) s)`` windows over the
sequences q of n_q frames: paths and integers only (8 bytes a window; 10 MB for the 257 days x
5000 frames of ``references/001``). Windows are then served by the generator mode's pool
(:class:`sr.data.generator.PatchPool`, with a window in place of an image): every epoch a fresh
permutation of the whole index decides which window enters the pool next, a window's k frames
are decoded when it enters and serve ``patches_per_window`` crops (the same crop position and
flips for all k frames of a crop) before the next window replaces it, and every batch takes its B
crops from B different pool windows chosen uniformly at random. So a batch's windows are a
uniform draw from the pool, itself a uniform draw of the whole index: with Q sequences of equal
length the expected number of distinct sequences in a batch of B is ``Q (1 - (1 - 1/Q)^B)``
(about B when Q >> B); draw order is unbiased (``benchmarks/shuffle_report.py`` measures it).

Memory is bounded whatever the sequence length: at most ``pool_frames`` decoded frames and
``pool_memory_mb`` megabytes are held at once, counting the frames being decoded ahead
(``2 decode_workers`` windows): the pool holds ``min(pool_frames / k, pool_memory_mb /
(k x the largest frame)) - 2 decode_workers`` windows. Frames shared by two windows of the pool
(overlapping starts) are decoded once and held once (a weak cache), which only lowers use.

LR: the project's operator on each frame's HR crop (``sr.data.pairs.make_window_pairs``): frame j
of ``lr`` is exactly the LR of frame j's HR crop; pre-made LR (``lr_dir``) is refused."""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from sr.core.errors import ConfigError
from sr.core.frames import SequenceFolder, list_sequences, sequence_size, target_index
from sr.core.images import ImageFolderError, ImageSet, load_y
from sr.data.generator import PatchPool
from sr.data.pairs import make_window_pairs
from sr.data.schemas import SequenceConfig, rule_error
from sr.data.source import PatchSource, checked

log = logging.getLogger(__name__)

GOLDEN = 0.6180339887498949  # 1 / phi: frac(i / phi) spreads any run of i evenly over [0, 1)


@dataclass(frozen=True)
class SequenceSet:
    """The usable sequences of a folder and the sorted sample index.

    Attributes:
        folder: the folder.
        names: sequence names (subfolder names), natural order.
        files: every frame of every usable sequence, flat, sequence after sequence.
        first: int64 ``[Q + 1]``, offset of each sequence's first frame in ``files`` (and the
            total at the end).
        sizes: ``(height, width)`` of each sequence's frames.
        skipped: ``"name (N frames)"`` or ``"name (WxH)"`` of sequences too short or too small.
        window_seq, window_start: int32 ``[W]``, the sequence and start frame of each window,
            sorted by (sequence, start).
    """

    folder: Path
    names: tuple[str, ...]
    files: tuple[Path, ...]
    first: np.ndarray
    sizes: tuple[tuple[int, int], ...]
    skipped: tuple[str, ...]
    window_seq: np.ndarray
    window_start: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.first)


def scan_sequences(
    folder: str | Path, frames: int, stride: int, min_size: int, key: str = "data.hr_dir"
) -> SequenceSet:
    """List a folder's sequences (:func:`list_sequences`), check that each one's frames share a
    size, drop (with one warning naming them) sequences shorter than a window,
    ``(frames - 1) stride + 1`` frames, or smaller than ``min_size`` pixels on a side, and index
    the windows.

    Raises:
        ImageFolderError: for a missing folder or wrong layout, frames of different sizes in a
            sequence, or when no sequence is long and large enough (names the need).
    """
    folder = Path(folder).expanduser()
    span = (frames - 1) * stride + 1
    keep, short, small = [], [], []
    for seq in list_sequences(folder, key):
        h, w = sequence_size(seq, folder)
        if len(seq.files) < span:
            short.append(f"{seq.name} ({len(seq.files)} frames)")
        elif min(h, w) < min_size:
            small.append(f"{seq.name} ({w}x{h})")
        else:
            keep.append((seq, (h, w)))
    if short:
        log.warning(
            "skipped %d sequence(s) of %s shorter than a window of %d frames "
            "(data.frames=%d at data.frame_stride=%d): %s",
            len(short),
            folder,
            span,
            frames,
            stride,
            ", ".join(short),
        )
    if small:
        log.warning(
            "skipped %d sequence(s) of %s whose frames are smaller than the %dx%d crop: %s",
            len(small),
            folder,
            min_size,
            min_size,
            ", ".join(small),
        )
    if not keep:
        raise ImageFolderError(
            f"no sequence of {folder} has {span} frames of at least {min_size}x{min_size} pixels "
            f"(data.frames={frames} at data.frame_stride={stride} need (k - 1) s + 1 = {span} "
            f"frames; skipped: {', '.join(short + small)}); add longer sequences, or lower "
            "data.frames, data.frame_stride or data.patch_size"
        )
    lengths = np.array([len(seq.files) for seq, _ in keep], np.int64)
    counts = lengths - (span - 1)
    window_seq = np.repeat(np.arange(len(keep), dtype=np.int32), counts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    window_start = (np.arange(offsets[-1]) - np.repeat(offsets[:-1], counts)).astype(np.int32)
    return SequenceSet(
        folder,
        tuple(seq.name for seq, _ in keep),
        tuple(p for seq, _ in keep for p in seq.files),
        np.concatenate([[0], np.cumsum(lengths)]),
        tuple(hw for _, hw in keep),
        tuple(short + small),
        window_seq,
        window_start,
    )


@dataclass(frozen=True)
class _Windows:
    """The pool's view of a window list: ``files`` (one entry per window) and ``sizes``."""

    files: np.ndarray  # int64 [W], the windows' indices in the SequenceSet
    sizes: np.ndarray  # int64 [W, 2], (height, width) of each window's frames


class WindowPool(PatchPool):
    """:class:`sr.data.generator.PatchPool` over windows: an item is a window of k frames,
    decoded to k uint8 Y frames, and a crop takes the same position in all k.

    Frames are decoded through a weak cache, so a frame shared by two windows in the pool is
    decoded and held once. :attr:`frames_held` counts the decoded frames alive (pool, decodes
    under way and decoded ahead), :attr:`peak_frames` its maximum: the memory bound's measure.

    Args:
        sequences: the indexed sequences.
        windows: int64 ``[W]``, the windows (indices into ``sequences.window_seq``) this pool
            draws from.
        frames, stride: k and s.
        crop, batch_size, patches_per_window, pool_windows, decode_workers, seed: as
            :class:`PatchPool`'s (an image there is a window here).
    """

    def __init__(
        self,
        sequences: SequenceSet,
        windows: np.ndarray,
        frames: int,
        stride: int,
        crop: int,
        batch_size: int,
        patches_per_window: int,
        pool_windows: int,
        decode_workers: int,
        seed,
    ):
        seq = sequences.window_seq[windows]
        sizes = np.asarray(sequences.sizes, np.int64).reshape(-1, 2)[seq]
        super().__init__(
            _Windows(np.asarray(windows, np.int64), sizes),  # type: ignore[arg-type]
            crop,
            batch_size,
            patches_per_window,
            pool_windows,
            1e12,  # MB: no bound here; the window count binds (SequenceSource.pool_windows)
            decode_workers,
            seed,
        )
        self.sequences, self.frames, self.stride = sequences, frames, stride
        self._cache: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self._decoding: dict[int, threading.Event] = {}  # frames being decoded
        self.frames_held = 0
        self.peak_frames = 0
        self.frame_decodes = 0

    def epoch_order(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """One epoch's order of the windows, a stratified shuffle: the sorted index is cut into
        ``pool_size`` strata of consecutive windows; within a stratum the windows are ranked by
        the golden-ratio sequence from a random start (``frac(p / phi + u)`` of position p, u
        uniform per stratum and epoch), so that its first ranks are spread evenly over it; the
        epoch goes round by round (rank 0 of every stratum, then rank 1, ...), the strata of a
        round in golden-ratio order from a random start of their own. Every window enters once
        an epoch, in a different order every epoch, consecutive entries far apart in the index
        (other sequences); and any stretch of the order covers the whole index evenly, so that
        the draw order does not correlate with (sequence, frame) even over the few hundred
        windows of a run's first batches: Spearman rho of draw order against window rank over
        the first 10,000 draws has an sd of 0.007 over seeds, against about 0.035 with a plain
        permutation (``benchmarks/shuffle_report.py``, ``docs/performance.md``).
        """
        m = max(1, min(n, self.pool_size))
        stratum = np.arange(n) * m // n  # nondecreasing: strata of consecutive windows
        position = np.arange(n) - np.searchsorted(stratum, stratum)  # within its stratum
        spread = np.mod(position * GOLDEN + rng.random(m)[stratum], 1.0)
        grouped = np.lexsort((spread, stratum))  # by stratum, then by rank in it
        rank = np.empty(n, np.int64)
        rank[grouped] = np.arange(n) - np.searchsorted(stratum, stratum[grouped])
        # by round; within a round the strata by the golden-ratio sequence from a random start
        # (a fresh one every round): any stretch of a round spans the whole index evenly
        turn = np.mod(stratum * GOLDEN + rng.random(int(rank.max()) + 1)[rank], 1.0)
        return np.lexsort((turn, rank))

    def window_frames(self, i: int) -> np.ndarray:
        """Flat indices (into ``sequences.files``) of the frames of pool item ``i``."""
        w = int(self.images.files[i])
        s = self.sequences
        first = s.first[s.window_seq[w]] + s.window_start[w]
        return first + self.stride * np.arange(self.frames)

    def _release(self) -> None:
        with self._lock:
            self.frames_held -= 1

    def _frame(self, f: int) -> np.ndarray:
        """Decoded Y of frame ``f``: the cached array while any window holds it, else decoded
        (once: a thread wanting a frame another thread is decoding waits for it)."""
        with self._lock:
            frame = self._cache.get(f)
            if frame is not None:
                return frame
            busy = self._decoding.get(f)
            if busy is None:
                self._decoding[f] = threading.Event()
        if busy is not None:
            busy.wait()
            return self._frame(f)  # cached now, or freed again (or failed): decode it then
        try:
            frame = self._decode_frame(f)
            with self._lock:
                self._cache[f] = frame
        finally:
            with self._lock:
                self._decoding.pop(f).set()
        return frame

    def _decode_frame(self, f: int) -> np.ndarray:
        path = self.sequences.files[f]
        frame = load_y(path)
        seq = int(np.searchsorted(self.sequences.first, f, side="right") - 1)
        if frame.shape != self.sequences.sizes[seq]:
            h, w = self.sequences.sizes[seq]
            raise ImageFolderError(
                f"{path} is {frame.shape[1]}x{frame.shape[0]} pixels, but its header said "
                f"{w}x{h} when the folder was scanned: the file changed during training; "
                "restore it, or restart the run"
            )
        with self._lock:
            self.frames_held += 1
            self.peak_frames = max(self.peak_frames, self.frames_held)
            self.frame_decodes += 1
        weakref.finalize(frame, self._release)
        return frame

    def _nbytes(self, i: int) -> int:
        h, w = self.images.sizes[i]
        return int(self.frames * h * w)

    def _decode(self, i: int):
        return tuple(self._frame(int(f)) for f in self.window_frames(i)), None

    def _cut(self, pool: dict[int, tuple], plan) -> dict[str, np.ndarray]:
        b, c, k = self.batch_size, self.crop, self.frames
        s = self.sequences
        hr = np.empty((b, k, c, c, 1), np.uint8)
        window = np.empty(b, np.int32)
        for out, (j, y, x) in enumerate(zip(plan.slots, plan.ys, plan.xs)):
            i, frames, _ = pool[j]
            for f, frame in enumerate(frames):
                hr[out, f, ..., 0] = frame[y : y + c, x : x + c]
            window[out] = self.images.files[i]
        seq = s.window_seq[window]
        frame = s.window_start[window][:, None] + self.stride * np.arange(k, dtype=np.int32)
        return {
            "hr": hr,
            "window": window,
            "sequence": seq.astype(np.int32),
            "frame": frame.astype(np.int32),
            "image": (s.first[seq][:, None] + frame).astype(np.int32),
        }

    def _log_pool(self) -> None:
        n = len(self.images.files)
        if self.keep_all:
            log.info(
                "sequence: all %d windows decoded once and kept (at most %d frames)",
                n,
                n * self.frames,
            )
            return
        log.info(
            "sequence: pool of %d windows of %d frames, %d patches per decoded window",
            self.pool_images,
            self.frames,
            self.patches_per_image,
        )
        if self.pool_images < self.batch_size:
            log.warning(
                "sequence pool holds %d windows < batch size %d: batches repeat windows; raise "
                "data.pool_frames and data.pool_memory_mb",
                self.pool_images,
                self.batch_size,
            )


# ------------------------------------------------------------------------------------------------
# The source: data=sequence
# ------------------------------------------------------------------------------------------------
class SequenceSource(PatchSource):
    """``data=sequence``: windows of k frames at a stride from a folder of sequences, served by a
    :class:`WindowPool` through ``tf.data.Dataset.from_generator``, one batch per call.

    :meth:`dataset` yields ``Batch(lq, gt)``: ``lq`` float32 ``[B, k, P/s, P/s, 1]`` (``[B, P/s,
    P/s, 1]`` when k = 1), ``gt`` float32 ``[B, P, P, 1]``, the HR of the target frame, in [0, 1],
    Y of BT.601 as in the other modes; the same crop and flips for every frame of a sample.

    Keyword args: those of :class:`sr.data.source.PatchSource` (``lr_dir`` must be null), and
        frames: k >= 1. frame_stride: s >= 1. target_frame: ``last``, ``center`` or 0..k-1.
        patches_per_window: crops from one decoded window before it is replaced (>= 1).
        pool_frames: most decoded frames held at once (>= k (1 + 2 decode_workers)).
        pool_memory_mb: most megabytes of decoded frames held at once (> 0).
        decode_workers: decode threads (>= 1).

    Raises:
        ValueError: for a value out of range or a target outside the window, naming the key.
    """

    mode = "sequence"
    schema = SequenceConfig

    def __init__(
        self,
        *,
        frames: int,
        frame_stride: int,
        target_frame,
        patches_per_window: int,
        pool_frames: int,
        pool_memory_mb: float,
        decode_workers: int,
        **common,
    ):
        super().__init__(**common)  # checks the schema's rules (no holdout, lr_dir, service)
        self.frames = checked(self.schema, "frames", frames)
        self.frame_stride = checked(self.schema, "frame_stride", frame_stride)
        self.target_frame = checked(self.schema, "target_frame", target_frame)
        self.target = target_index(self.frames, target_frame)
        self.patches_per_window = checked(self.schema, "patches_per_window", patches_per_window)
        self.decode_workers = checked(self.schema, "decode_workers", decode_workers)
        self.pool_memory_mb = checked(self.schema, "pool_memory_mb", pool_memory_mb)
        checked(self.schema, "pool_frames", pool_frames)
        keys = dict(frames=frames, decode_workers=decode_workers, pool_frames=pool_frames)
        why = rule_error(self.schema, keys)  # the pool holds a window and those decoded ahead
        if why:
            raise ConfigError(why)
        self.pool_frames = int(pool_frames)
        self._sequences: SequenceSet | None = None
        self._val_sequences: list[SequenceFolder] | None = None
        self.pool: WindowPool | None = None  # the last pool made, for the benchmarks

    @property
    def span(self) -> int:
        """Frames a window covers: ``(k - 1) s + 1``."""
        return (self.frames - 1) * self.frame_stride + 1

    @property
    def sequences(self) -> SequenceSet:
        """The usable training sequences and their windows (scanned once; see
        :func:`scan_sequences`)."""
        if self._sequences is None:
            self._sequences = scan_sequences(
                self.hr_dir, self.frames, self.frame_stride, self.crop
            )
        return self._sequences

    @property
    def images(self) -> ImageSet:
        """Every frame of the usable sequences, flat (``image`` indices of the batches)."""
        if self._images is None:
            s = self.sequences
            sizes = tuple(hw for hw, n in zip(s.sizes, s.lengths) for _ in range(int(n)))
            self._images = ImageSet(s.folder, s.files, s.skipped, sizes)
        return self._images

    @property
    def val_sequences(self) -> list[SequenceFolder]:
        """The validation sequences of ``val_dir`` (empty without it), each checked like
        :attr:`PatchSource.val_files` (frames readable and large enough) and of one size.

        Raises:
            ImageFolderError: for a wrong layout, an unreadable or too small frame, or frames
                of different sizes (names the file and the fix).
        """
        if self._val_sequences is None:
            seqs = list_sequences(self.val_dir, "data.val_dir") if self.val_dir else []
            for seq in seqs:
                sequence_size(seq, self.val_dir)
            self._val_files = [p for seq in seqs for p in seq.files]
            self._val_sequences = seqs
            self._check_val_files(self._val_files)
        return self._val_sequences

    @property
    def val_files(self) -> list[Path]:
        """Every frame of the validation sequences (the checks of :attr:`val_sequences`)."""
        self.val_sequences  # noqa: B018
        return self._val_files or []

    def prepare(self) -> None:
        self.sequences  # noqa: B018
        self.val_sequences  # noqa: B018
        s = self.sequences
        self.pool_windows(len(s.window_seq))  # pool_memory_mb too small: an error now, not later
        log.info(
            "sequence: %d sequences (%d frames), %d windows of %d frames at stride %d, target %s",
            len(s.names),
            len(s.files),
            len(s.window_seq),
            self.frames,
            self.frame_stride,
            self.target_frame,
        )

    def pool_windows(self, count: int) -> int:
        """Windows the pool may hold so that the decoded frames stay within ``pool_frames`` and
        ``pool_memory_mb`` with ``2 decode_workers`` windows decoded ahead, assuming no frame is
        shared (the largest frames of the folder): at most ``count``, the windows there are.

        Raises:
            ConfigError: if ``pool_memory_mb`` cannot hold one window plus those decoded ahead.
        """
        ahead = 2 * self.decode_workers
        largest = max(h * w for h, w in self.sequences.sizes) * self.frames
        by_frames = self.pool_frames // self.frames - ahead
        by_bytes = int(self.pool_memory_mb * 2**20) // largest - ahead
        if by_bytes < 1:
            raise ConfigError(
                f"data.pool_memory_mb={self.pool_memory_mb} cannot hold {1 + ahead} windows of "
                f"{self.frames} frames of {largest // self.frames / 2**20:.1f} MB: raise it to at "
                f"least {(1 + ahead) * largest / 2**20:.0f}"
            )
        return max(1, min(count, by_frames, by_bytes))

    def patch_dataset(
        self, start: int = 0, batch_size: int | None = None, pipeline: tuple[int, int] = (0, 1)
    ) -> tf.data.Dataset:
        """Batches from batch number ``start`` on, those of an uninterrupted stream bit for bit
        (the pool replays its decisions without decoding): ``{"hr": uint8 [B, k, crop, crop, 1],
        "window": int32 [B] (index into the sorted window list), "sequence": int32 [B],
        "frame": int32 [B, k] (frame index in its sequence, 0-based), "image": int32 [B, k]
        (index into ``images.files``)}``.

        Args:
            start: the first batch's number in this pipeline's stream.
            batch_size: patches per batch (default ``batch_size``).
            pipeline: ``(index, count)``: pipeline i of n draws from windows ``i, i + n, ...`` of
                the sorted index with its own seed (no two workers share a sample).

        Raises:
            ValueError: if there are fewer windows than pipelines.
        """
        index, count = pipeline
        windows = np.arange(len(self.sequences.window_seq), dtype=np.int64)[index::count]
        if not len(windows):
            raise ValueError(
                f"{count} input pipelines but only {len(self.sequences.window_seq)} window(s) in "
                f"{self.hr_dir}: each worker needs windows of its own"
            )
        b, c, k = batch_size or self.batch_size, self.crop, self.frames
        pool = WindowPool(
            self.sequences,
            windows,
            k,
            self.frame_stride,
            c,
            b,
            self.patches_per_window,
            self.pool_windows(len(windows)),
            self.decode_workers,
            self.stream_seed if index == 0 else [self.stream_seed, index],
        )
        signature = {
            "hr": tf.TensorSpec([b, k, c, c, 1], tf.uint8),
            "window": tf.TensorSpec([b], tf.int32),
            "sequence": tf.TensorSpec([b], tf.int32),
            "frame": tf.TensorSpec([b, k], tf.int32),
            "image": tf.TensorSpec([b, k], tf.int32),
        }
        self.pool = pool
        return tf.data.Dataset.from_generator(lambda: pool(start), output_signature=signature)

    def to_pairs(self, batch, index=None, pipeline: int = 0):
        """``sr.core.batch.Batch(lq, gt)`` of a window batch
        (``sr.data.pairs.make_window_pairs``), flips seeded as :meth:`PatchSource.to_pairs`'s."""
        return make_window_pairs(
            batch["hr"],
            self.scale,
            self.margin,
            self.target,
            flips=self.flips,
            rot90=self.rot90,
            seed=self.flip_seed(index, pipeline),
        )

    def share(self, pipeline: tuple[int, int]) -> str:
        index, count = pipeline
        n = len(self.sequences.window_seq)
        return f"windows {index}, {index + count}, ... of {n} (every {count}th)"

    def check_pipelines(self, count: int) -> None:
        if len(self.sequences.window_seq) < count:
            raise ImageFolderError(
                f"{count} workers but only {len(self.sequences.window_seq)} window(s) in "
                f"{self.hr_dir}: each worker reads windows of its own; add frames or use fewer "
                "workers"
            )

    def stream_identity(self) -> dict:
        return {
            **super().stream_identity(),
            "frames": self.frames,
            "frame_stride": self.frame_stride,
            "target": self.target,
            "sequences": len(self.sequences.names),
            "patches_per_window": self.patches_per_window,
            "pool_frames": self.pool_frames,
            "pool_memory_mb": self.pool_memory_mb,
            "decode_workers": self.decode_workers,
        }
