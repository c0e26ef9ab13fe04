"""A fake ``train.py`` run directory for the evaluate / upscale / export tests: the real composed
config, a tiny model and its checkpoints, laid out as ``sr.train.checkpoint`` documents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf
from omegaconf import OmegaConf

from sr.config import PROJECT_ROOT
from sr.loading.checkpoints import make_checkpoint
from sr.loading.models import build_model
from sr.train.checkpoint import make_manager

TINY = ("model=espcn", "model.features=[8,8]")


def make_run(compose, run_dir: Path, steps=(5,), scale: int = 4, overrides=TINY) -> Path:
    """Write ``<run_dir>/.hydra/config.yaml`` and one checkpoint per entry of ``steps`` (the
    weights are perturbed between checkpoints so that they differ); returns ``run_dir``."""
    cfg = compose(*overrides, f"data.scale={scale}")
    (run_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    model = build_model(cfg)
    step = tf.Variable(0, dtype=tf.int64)
    manager = make_manager(make_checkpoint(model, step=step), run_dir)
    rng = np.random.default_rng(0)
    for k, s in enumerate(steps):
        if k:
            for v in model.trainable_variables:
                v.assign(v + rng.normal(0, 0.05, v.shape).astype(np.float32))
        step.assign(s)
        manager.save(checkpoint_number=s)
    return run_dir


def load_script(name: str, folder: str = "scripts"):
    """Import ``<folder>/<name>.py`` as a module (``scripts/``, the user commands, or
    ``benchmarks/``, the studies: neither is a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"{folder}_{name}", PROJECT_ROOT / folder / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_scalars(tb_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` of every scalar in the event files of ``tb_dir``."""
    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(tb_dir).glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name != "scalars":
                    continue  # images, hparams
                number = float(tf.make_ndarray(value.tensor))
                scalars.setdefault(value.tag, []).append((event.step, number))
    return scalars
