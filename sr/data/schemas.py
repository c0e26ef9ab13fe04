"""The keys of the ``data`` group: one schema per mode (``conf/data/<mode>.yaml`` extends
``base_<mode>``), their defaults and bounds, importing no TensorFlow.

``sr.config`` registers :data:`SCHEMAS` with Hydra's ConfigStore and checks a command line against
them before anything imports TensorFlow (``python train.py data.pach=64`` is refused without
TensorFlow's start-up); each source class (``sr.data.source.PatchSource`` and its modes) names
its schema here and checks its values with the same bounds (``sr.data.source.checked``).
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from sr.core.schema import bounded

FLIPS = ("hv", "h", "none")
"""``data.flips``: random vertical and horizontal flips (``hv``, the default), horizontal only
(``h``: left-right, BasicSR's ``use_hflip``, the Real-ESRGAN recipes' augmentation), or none."""

LR_FROM = ("y", "rgb")  # data.lr_from: the LR from the Y of the HR, or from its RGB
CHANNELS = ("y", "rgb")  # data.channels: what the model sees and makes, Y or RGB


@dataclass
class DataConfig:
    """Keys of every data source (the ``data`` group's schema; defaults are written here only).

    ``_target_`` comes from the mode's YAML. A key that a source does not take is an error at
    start-up that names the source's schema (``TFRecordConfig``, ``GeneratorConfig``).
    """

    _target_: str = MISSING
    hr_dir: str = "${sr_root:}/data/demo/train"  # HR training images (PNG/JPEG)
    val_dir: str | None = "${sr_root:}/data/demo/val"  # full validation images; null: none
    # hold out N images of hr_dir (spread over name order) as the validation images, never
    # trained on: a validation set from the training photos (then data.val_dir must be null)
    val_holdout: int = bounded(0, minimum=0, integer=True)
    lr_dir: str | None = None  # pre-made LR images (DIV2K X4 layout), null: bicubic LR
    batch_size: int = bounded(64, minimum=1, integer=True)  # B, patches per batch
    # HR patch P in pixels (LR patch is P / scale)
    patch_size: int = bounded(96, minimum=1, integer=True)
    scale: int = bounded(4, minimum=1, integer=True)  # s
    # random flips: hv, vertical and horizontal; h, horizontal only (Real-ESRGAN's use_hflip); none
    flips: str = bounded("hv", choices=FLIPS)
    rot90: bool = False  # also random transposes (all 8 rotations and reflections)
    seed: int | None = "${seed}"  # type: ignore[assignment]  # seed of shuffles, crops, flips
    deterministic: bool = False  # deterministic tf.data order: the same batches in every run
    service: str | None = None  # grpc://HOST:PORT of a tf.data service dispatcher (tfrecord)
    # how the LR is made: y, from the rounded Y of the HR (1 channel held); rgb, from the RGB HR
    # then Y, as evaluation makes it (3 channels held: 3x the memory, shards and LR work)
    lr_from: str = bounded("y", choices=LR_FROM)
    # the pairs' channels: y, Y of BT.601 (the literature's protocol); rgb, R, G, B (models then
    # take and give 3 channels; the LR is the operator of each channel, or the degradation's)
    channels: str = "y"
    # the input pipeline's threads: null, a pool of its own of 1 per 4 cores (at least 1) where no
    # GPU is visible, else TensorFlow's shared pools; N >= 1: N of its own; 0: the shared pools
    threads: int | None = bounded(None, minimum=0, integer=True)


@dataclass
class TFRecordConfig(DataConfig):
    """Keys of ``data=tfrecord`` (schema; defaults written here only)."""

    # shard folder; null: <data_root>/tfrecords/<hr_dir>-<hash>, plus -sub<S> for sub-images and
    # -rgb for RGB records, so that runs of different layouts never rebuild each other's shards
    tfrecord_dir: str | None = None
    data_root: str = "${sr_root:}/data"  # the dataset root (default shard location)
    # shard files, interleaved in parallel when read
    num_shards: int = bounded(10, minimum=1, integer=True)
    # grid step between record corners when writing (HR pixels); null: 64 for patches, and for
    # sub-images the largest step that leaves no crop position out (subimage_size - crop + 1)
    stride: int | None = bounded(None, minimum=1, integer=True)
    # records: 0, the crops themselves (patches on the grid); S > 0, S x S sub-images with one
    # crop cut at a random position inside each when read (BasicSR's layout)
    subimage_size: int = bounded(0, minimum=0, integer=True)
    # read-time shuffle buffer, in Y patches' worth of memory (2048 x 112 x 112 B = 26 MB); with
    # sub-images or RGB records it holds as many records as fit in that memory
    shuffle_buffer: int = bounded(2048, minimum=0, integer=True)
    write_workers: int = bounded(2, minimum=1, integer=True)  # decode threads while writing shards


@dataclass
class GeneratorConfig(DataConfig):
    """Keys of ``data=generator`` (schema; defaults written here only)."""

    # crops from one decoded image before it leaves the pool
    patches_per_image: int = bounded(64, minimum=1, integer=True)
    pool_size: int = bounded(128, minimum=1, integer=True)  # decoded images held at once
    # memory bound of the pool (MB), never exceeded (a DIV2K image's Y is about 2.9 MB,
    # 2040 x 1400 x 1 B: 128 images take about 370 MB)
    pool_memory_mb: float = bounded(1024.0, minimum=1e-3)
    decode_workers: int = bounded(2, minimum=1, integer=True)  # decode threads


@dataclass
class SequenceConfig(DataConfig):
    """Keys of ``data=sequence`` (schema; defaults written here only)."""

    hr_dir: str = "${sr_root:}/data/demo/sequences/train"  # one subfolder of frames per sequence
    val_dir: str | None = "${sr_root:}/data/demo/sequences/val"  # validation sequences; null: none
    frames: int = bounded(3, minimum=1, integer=True)  # k, frames per sample (1: single images)
    frame_stride: int = bounded(1, minimum=1, integer=True)  # s: frames t, t + s, .., t + (k-1) s
    target_frame: str = "last"  # the frame whose HR is the target: last, center, or 0..k-1
    patches_per_window: int = bounded(32, minimum=1, integer=True)  # crops of a decoded window
    pool_frames: int = 384  # most decoded frames held at once, decoding ahead included
    pool_memory_mb: float = bounded(1024.0, minimum=1e-3)  # most MB of decoded frames held
    decode_workers: int = bounded(2, minimum=1, integer=True)  # decode threads


SCHEMAS = {"tfrecord": TFRecordConfig, "generator": GeneratorConfig, "sequence": SequenceConfig}
"""The schema of each ``data=<mode>``, by mode (``sr.data.SOURCES``: each source's ``mode`` and
``schema``); ``sr.config`` registers each as ``base_<mode>``."""
