"""What ``python train.py`` does, as a function of the composed config (testable without a
subprocess)."""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
import keras
from omegaconf import DictConfig, OmegaConf

from sr.data.demo import ensure_demo
from sr.data.images import list_images
from sr.train.checkpoint import build_model
from sr.train.loop import Trainer, setup_precision

log = logging.getLogger(__name__)


def _uses_demo(cfg: DictConfig) -> bool:
    demo = Path(cfg.demo_dir).resolve()
    paths = [cfg.data.hr_dir, cfg.data.val_dir]
    return any(p and Path(p).resolve().is_relative_to(demo) for p in paths)


def run(cfg: DictConfig, run_dir: str | Path) -> dict:
    """Build data, model and trainer from ``cfg`` and train; returns ``Trainer.fit``'s result.

    The data folders are checked (and TFRecord shards built) before any model is built, so that
    a bad path fails in seconds.

    Raises:
        ImageFolderError: for a missing or empty image folder.
        FileNotFoundError: for ``resume=`` pointing at a run without checkpoints.
    """
    run_dir = Path(run_dir)
    if _uses_demo(cfg):
        ensure_demo(cfg.demo_dir)
    if cfg.seed is not None:
        keras.utils.set_random_seed(int(cfg.seed))
    loader = hydra.utils.instantiate(cfg.data)
    loader.prepare()
    if cfg.data.val_dir:
        list_images(cfg.data.val_dir)
    mixed = setup_precision(cfg.train.mixed_precision)
    model = build_model(cfg)
    log.info("model %s: %d parameters", model.name, model.count_params())
    trainer = Trainer(cfg, loader, model, run_dir, mixed=mixed)
    if cfg.resume:
        trainer.restore()
    return trainer.fit()


def describe(cfg: DictConfig) -> str:
    """The config as YAML with interpolations resolved (logged at start)."""
    return OmegaConf.to_yaml(cfg, resolve=True)
