"""Structured config schema (Hydra ConfigStore): a typo or a wrong type in an override is an error
at start-up, not a silent default.

The YAML files of ``conf/`` extend these schemas through their defaults lists
(``- base_data``, ``- base_train``). ``${sr_root:}`` resolves to the project's root folder (the
parent of the ``sr`` package), so that default paths work from any working directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

PROJECT_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class DataConfig:
    """Arguments of :class:`sr.data.DataLoader` (see its docstring for each key)."""

    _target_: str = "sr.data.DataLoader"
    mode: str = "tfrecord"
    hr_dir: str = "${sr_root:}/data/demo/train"
    val_dir: str | None = "${sr_root:}/data/demo/val"
    lr_dir: str | None = None
    batch_size: int = 64
    patch_size: int = 96
    scale: int = 4
    flip: bool = True
    rot90: bool = False
    seed: int | None = "${seed}"  # type: ignore[assignment]
    tfrecord_dir: str | None = None
    data_root: str = "${sr_root:}/data"
    num_shards: int = 10
    stride: int = 64
    shuffle_buffer: int = 2048
    write_workers: int = 2
    deterministic: bool = False
    patches_per_image: int = 64
    pool_size: int = 128
    pool_memory_mb: float = 1024.0
    decode_workers: int = 2


@dataclass
class TrainConfig:
    steps: int = 5000
    lr: float = 1e-3  # initial learning rate
    lr_schedule: str = "cosine"  # cosine | step | constant
    lr_decay_steps: int = 200_000  # step schedule: halve every this many steps
    lr_warmup_steps: int = 0
    beta_1: float = 0.9
    beta_2: float = 0.999
    loss: str = "l1"  # l1 | l2
    log_every: int = 100
    val_every: int = 1000
    ckpt_every: int = 1000
    max_to_keep: int = 3
    val_images: int = 3  # validation images shown in TensorBoard
    xla: bool = False
    mixed_precision: bool = False
    max_minutes: float | None = None  # stop (checkpoint, validate) after this much training time


@dataclass
class Config:
    data: Any = MISSING
    model: Any = MISSING
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int | None = 0
    resume: str | None = None
    demo_dir: str = "${sr_root:}/data/demo"


def register() -> None:
    """Register the ``sr_root`` resolver and the schemas (idempotent)."""
    if not OmegaConf.has_resolver("sr_root"):
        OmegaConf.register_new_resolver("sr_root", lambda: str(PROJECT_ROOT))
    if not OmegaConf.has_resolver("sr_or"):  # first argument that is not null
        OmegaConf.register_new_resolver("sr_or", lambda *args: next((a for a in args if a), None))
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    cs.store(group="data", name="base_data", node=DataConfig)
    cs.store(group="train", name="base_train", node=TrainConfig)


register()
