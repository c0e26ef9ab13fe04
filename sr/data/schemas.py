"""The keys of the ``data`` group: one schema per mode (``conf/data/<mode>.yaml`` extends
``base_<mode>``), their defaults and bounds, importing no TensorFlow.

``sr.config`` registers :data:`SCHEMAS` with Hydra's ConfigStore and checks a command line against
them before anything imports TensorFlow (``python train.py data.pach=64`` is refused without
TensorFlow's start-up); each source class (``sr.data.source.PatchSource`` and its modes) names
its schema here and checks its values with the same bounds (``sr.data.source.checked``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from omegaconf import MISSING

from sr.core.errors import ConfigError
from sr.core.schema import bounded, check_node
from sr.core.target_frame import target_index
from sr.degradations import registry as degradation_registry

FLIPS = ("hv", "h", "none")
"""``data.flips``: random vertical and horizontal flips (``hv``, the default), horizontal only
(``h``: left-right, BasicSR's ``use_hflip``, the Real-ESRGAN recipes' augmentation), or none."""

LR_FROM = ("y", "rgb")  # data.lr_from: the LR from the Y of the HR, or from its RGB
CHANNELS = ("y", "rgb")  # data.channels: what the model sees and makes, Y or RGB
TARGET_NAMES = ("last", "center")  # data.target_frame's names; an index 0..k-1 is the third


def _target_frame(value) -> str | None:
    """Why ``value`` names no frame of a window (``last``, ``center`` or an index >= 0)."""
    index = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if index or value in TARGET_NAMES or (isinstance(value, str) and value.isdigit()):
        return None
    return "must be last, center or a frame index 0..data.frames - 1"


@dataclass
class DataConfig:
    """Keys of every data source (the ``data`` group's schema; defaults are written here only).

    ``_target_`` comes from the mode's YAML. A key that a source does not take is an error at
    start-up that names the source's schema (``TFRecordConfig``, ``GeneratorConfig``).
    """

    makes_rgb: ClassVar[bool] = True  # its sources can give RGB crops (channels=rgb, degradations)

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
    channels: str = bounded("y", choices=CHANNELS)
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

    makes_rgb: ClassVar[bool] = False  # frames are decoded to Y

    hr_dir: str = "${sr_root:}/data/demo/sequences/train"  # one subfolder of frames per sequence
    val_dir: str | None = "${sr_root:}/data/demo/sequences/val"  # validation sequences; null: none
    frames: int = bounded(3, minimum=1, integer=True)  # k, frames per sample (1: single images)
    frame_stride: int = bounded(1, minimum=1, integer=True)  # s: frames t, t + s, .., t + (k-1) s
    # the frame whose HR is the target: last, center, or 0..k-1
    target_frame: str = bounded("last", check=_target_frame)
    patches_per_window: int = bounded(32, minimum=1, integer=True)  # crops of a decoded window
    # most decoded frames held at once, decoding ahead included (>= k (1 + 2 decode_workers))
    pool_frames: int = bounded(384, minimum=1, integer=True)
    pool_memory_mb: float = bounded(1024.0, minimum=1e-3)  # most MB of decoded frames held
    decode_workers: int = bounded(2, minimum=1, integer=True)  # decode threads


SCHEMAS = {"tfrecord": TFRecordConfig, "generator": GeneratorConfig, "sequence": SequenceConfig}
"""The schema of each ``data=<mode>``, by mode (``sr.data.SOURCES``: each source's ``mode`` and
``schema``); ``sr.config`` registers each as ``base_<mode>``."""


# ------------------------------------------------------------------------------------------------
# Cross-key rules: what the keys of a mode cannot be together, checked when the config is
# (``sr.config.validate``, before TensorFlow) and by each source when it is built
# ------------------------------------------------------------------------------------------------
def every_mode_rules(d: Mapping) -> str | None:
    """Why the keys of every mode cannot work together (``data.patch_size`` a multiple of
    ``data.scale``, one validation set, one way of making the LR), or None."""
    patch, scale = d.get("patch_size"), d.get("scale")
    if "hr_dir" in d and not d["hr_dir"]:
        return "data.hr_dir is empty: set it to a folder of PNG or JPEG images"
    if isinstance(patch, int) and isinstance(scale, int) and scale > 0 and patch % scale:
        return (
            f"data.patch_size {patch} is not a multiple of data.scale {scale}: use "
            f"{patch // scale * scale or scale}"
        )
    if d.get("val_holdout") and d.get("val_dir"):
        return (
            f"data.val_holdout={d['val_holdout']} validates on images held out of data.hr_dir, "
            f"and data.val_dir={d['val_dir']} on another folder: set data.val_dir=null (or "
            "data.val_holdout=0)"
        )
    if d.get("lr_from") == "rgb" and d.get("lr_dir"):
        return (
            f"data.lr_from=rgb makes the LR from the RGB HR, but data.lr_dir={d['lr_dir']} "
            "gives it: drop one of them"
        )
    if d.get("channels") == "rgb" and d.get("lr_from", "y") != "y":
        return (
            "data.lr_from only orders the Y pairs' LR; with data.channels=rgb the LR is made "
            "from RGB already: drop data.lr_from"
        )
    return None


def generator_rules(d: Mapping) -> str | None:
    """Why the keys of ``data=generator`` cannot work together, or None."""
    if d.get("service"):
        return (
            f"data.service={d['service']} needs data=tfrecord: data=generator decodes and "
            "crops in Python inside the training process, which cannot be sent to tf.data "
            "service workers. Use data=tfrecord with data.service, or drop data.service"
        )
    return None


def sequence_rules(d: Mapping) -> str | None:
    """Why the keys of ``data=sequence`` cannot work together (whole sequences, Y frames, the
    pool holding a window and those decoded ahead), or None."""
    if d.get("val_holdout"):  # hold out whole sequences instead
        return (
            f"data.val_holdout={d['val_holdout']} is not supported by data=sequence: move "
            "whole sequences to a folder of their own, data.val_dir"
        )
    if d.get("lr_dir"):
        return (
            f"data.lr_dir={d['lr_dir']} is not supported by data=sequence: every LR frame is "
            "made by the project's LR operator from its HR crop; set data.lr_dir=null"
        )
    if d.get("lr_from", "y") != "y":
        return (
            f"data.lr_from={d['lr_from']} is not supported by data=sequence: its frames are "
            "decoded to Y and every LR frame is made from the Y; set data.lr_from=y"
        )
    if d.get("service"):
        return (
            f"data.service={d['service']} needs data=tfrecord: data=sequence decodes and "
            "crops in Python inside the training process; drop data.service"
        )
    frames, workers, pool = d.get("frames"), d.get("decode_workers"), d.get("pool_frames")
    if isinstance(frames, int) and frames > 0 and "target_frame" in d:
        try:  # a frame of the window (center: an odd window)
            target_index(frames, d["target_frame"])
        except ValueError as e:
            return str(e)
    if isinstance(frames, int) and isinstance(workers, int) and "pool_frames" in d:
        need = frames * (1 + 2 * workers)
        if pool is None or isinstance(pool, bool) or pool < need:
            return (
                f"data.pool_frames must be >= {need} (one window of data.frames={frames} "
                f"plus {2 * workers} decoded ahead by data.decode_workers={workers}), "
                f"got {pool!r}"
            )
    return None


def degradation_rules(d: Mapping, name: str, margin: int, least: int, pool: int) -> str | None:
    """Why the data keys cannot work with the degradation, or None: its crop margin (HR pixels,
    ``margin``) a multiple of ``data.scale``, the crop (``data.patch_size`` + 2 margin) at least
    the ``least`` side it degrades, its training-pair pool of ``pool`` pairs (0: none) at least
    a batch. The numbers are a ``sr.degradations.protocol.Degradation``'s (``crop_margin``,
    ``least_crop``, ``pool_size``), or at config time its declaration's
    (``sr.degradations.registry.DegradationSpec.geometry``)."""
    scale, patch, batch = d.get("scale"), d.get("patch_size"), d.get("batch_size")
    if not all(isinstance(v, int) and v > 0 for v in (scale, patch, batch)):
        return None
    if margin % scale:
        return (
            f"degradation.margin={margin} is not a multiple of data.scale {scale}: "
            f"use {margin // scale * scale} or {(margin // scale + 1) * scale}"
        )
    if patch + 2 * margin < least:
        return (
            f"degradation={name} needs crops of at least {least} pixels at x{scale}; "
            f"data.patch_size={patch} gives {patch + 2 * margin}: raise data.patch_size"
        )
    if 0 < pool < batch:
        return (
            f"degradation.pool_size={pool} holds fewer pairs than a batch (data.batch_size="
            f"{batch}): use 0 (no pool) or at least {batch}"
        )
    return None


RULES: dict[type, Callable[[Mapping], str | None]] = {
    DataConfig: every_mode_rules,
    GeneratorConfig: generator_rules,
    SequenceConfig: sequence_rules,
}
"""The cross-key rules of each schema (a mode's schema has its base's too)."""


def rule_error(schema: type, values: Mapping) -> str | None:
    """Why ``values`` (``data.*`` plain values, any subset) break a rule of ``schema`` or of its
    bases (base first), or None."""
    for cls in reversed(schema.__mro__):
        rule = RULES.get(cls)
        why = rule(values) if rule else None
        if why:
            return why
    return None


def unknown_key(schema: type, values: Mapping) -> str | None:
    """Why a key of ``values`` is not one of ``schema`` (naming the mode that has it), or None."""
    mode = next((m for m, s in SCHEMAS.items() if s is schema), schema.__name__)
    for key in values:
        if key not in fields_of(schema):
            owners = [m for m, s in SCHEMAS.items() if key in fields_of(s)]
            where = f"a key of data={owners[0]}" if owners else "not a data key"
            return f"data.{key} is {where}, not of data={mode}: remove it" + (
                f" or choose data={owners[0]}" if owners else ""
            )
    return None


def check(schema: type, values: Mapping) -> None:
    """Check ``data.*`` values (plain, interpolations resolved) against ``schema``: each key its
    schema's (:func:`unknown_key`), within its bounds (``sr.core.schema.check_node``), then the
    cross-key rules (:func:`rule_error`).

    Raises:
        ConfigError: for a key of another mode, the first value out of bounds or rule broken,
            naming the keys and the fix (``data.patch_size 90 is not a multiple of data.scale 4:
            use 88``).
    """
    why = unknown_key(schema, values)
    if why:
        raise ConfigError(why)
    check_node(values, schema, "data")
    why = rule_error(schema, values)
    if why:
        raise ConfigError(why)


def fields_of(schema: type) -> set[str]:
    """The keys of a data schema."""
    return {f.name for f in dataclasses.fields(schema)}


def made_rules(d: Mapping, schema: type, protocol_lr: bool, name: str) -> str | None:
    """Why a mode's keys cannot work with the degradation ``name`` (``protocol_lr``: the
    protocol's own bicubic), or None: RGB pairs or a degradation's own pairs need a mode that
    gives RGB crops (:attr:`DataConfig.makes_rgb`) and no pre-made Y LR (``data.lr_dir``)."""
    channels = d.get("channels", "y")
    if channels != "rgb" and protocol_lr:
        return None
    if not schema.makes_rgb:
        mode = next((m for m, s in SCHEMAS.items() if s is schema), schema.__name__)
        return (
            f"data={mode} decodes to Y only: data.channels={channels} with "
            f"degradation={name} needs data=tfrecord or data=generator; "
            "or set data.channels=y and degradation=bicubic"
        )
    if d.get("lr_dir"):
        return (
            f"data.lr_dir={d['lr_dir']} gives pre-made Y LR patches, which data.channels="
            f"{channels} with degradation={name} cannot use: set "
            "data.lr_dir=null, or use data.channels=y with degradation=bicubic"
        )
    return None


def check_degradation_fit(schema: type, values: Mapping, target: str | None, keys: Mapping):
    """Check ``data.*`` values of ``schema`` against the degradation ``target``
    (``degradation._target_``) with its ``keys`` at config time: :func:`made_rules` and
    :func:`degradation_rules` on its declaration (``sr.degradations.registry``: ``protocol_lr``
    and ``geometry``); nothing for a class of one's own (built and checked by the source).

    Raises:
        ConfigError: naming the keys and the fix.
    """
    spec = degradation_registry.spec_of(target)
    if spec is None:
        return
    why = made_rules(values, schema, spec.protocol_lr, spec.name)
    if not why and spec.geometry is not None and not values.get("lr_dir"):
        why = degradation_rules(values, spec.name, *spec.geometry(dict(keys), values["scale"]))
    if why:
        raise ConfigError(why)
