"""A trained model, wherever it comes from: built from a config (:func:`build_model`), restored
from a run folder of ``train.py`` (:func:`load_model_from_run`: its config and a checkpoint of
``sr.loading.checkpoints``), or read from a PyTorch weight file (``.pth``, ``.safetensors``:
``sr.models.state_dicts``), and labelled for results. :func:`load_model` is the one place that
tells a run folder from a weight file, for every command that takes either (``scripts/``,
``train.py``'s ``train.init_from``).

A weight file has no ``.hydra/config.yaml``; its config is what the tensors say: ``model``
(``arch`` and the hyperparameters read from the shapes), ``data.scale`` (4) and ``data.channels``
(``rgb`` for a 3-channel model), and ``weights_file`` (the file and its architecture).
"""

from __future__ import annotations

import logging
from pathlib import Path

import keras
import tensorflow as tf
from omegaconf import DictConfig, OmegaConf

from sr.core.errors import RunDirError
from sr.core.runfiles import WEIGHTS, check_file_choices, load_run_config, restore_checkpoint
from sr.core.weightfiles import is_weight_file
from sr.loading.checkpoints import (
    checkpoint_label,
    damaged_fix,
    find_checkpoint,
    has_averages,
    make_checkpoint,
)
from sr.models import registry
from sr.models.state_dicts import Found, Loaded, load_file

log = logging.getLogger(__name__)


def build_model(cfg: DictConfig) -> keras.Model:
    """The model of a run's config: ``cfg.model`` (``arch`` and its keys, or a run's legacy
    ``_target_``) at ``cfg.data.scale``, with the channels of ``cfg.data.channels`` (1 for ``y``,
    3 for ``rgb``; runs saved before the key existed are Y), the ``plugins`` it names imported.

    Raises:
        ConfigError: an unregistered architecture, a key or value its schema or rules refuse
            (``sr.models.registry.build_model``).
    """
    registry.import_plugins(cfg.get("plugins") or ())
    channels = 3 if cfg.data.get("channels", "y") == "rgb" else 1
    return registry.build_model(cfg.model, cfg.data.scale, channels)


def load_model_from_run(
    run_dir, checkpoint: str | None = None, weights: str = "auto", fix=damaged_fix
) -> tuple[keras.Model, DictConfig, int]:
    """Rebuild a run's model and restore its weights.

    Args:
        run_dir: output directory of a ``train.py`` run.
        checkpoint: ``best``, ``last``, ``ckpt-N`` or a prefix (:func:`find_checkpoint`); None:
            ``best`` where the run has one, else ``last``.
        weights: ``ema``: the moving averages of the weights (a run with ``train.ema``);
            ``live``: the trained weights themselves; ``auto``: the averages when the checkpoint
            has them, else the trained weights. Which was loaded is logged and set as
            ``model.sr_weights`` (``ema`` or ``live``).
        fix: ``(run_dir, path) -> str``, the advice for a damaged checkpoint in the command in
            use: :func:`damaged_fix` (the scripts' ``--checkpoint``), :func:`init_from_fix`
            (``train.py``'s ``train.init_from``).

    Returns:
        ``(model, cfg, step)``: the Keras model with restored weights, the run's config, and the
        training step the checkpoint was saved at.

    Raises:
        RunDirError: if the run directory has no config or no checkpoint, or ``weights=ema`` and
            the checkpoint holds no averages (the run had no ``train.ema``).
        RunFileError: if the checkpoint is truncated or corrupt (names its files and another
            checkpoint to choose: ``--checkpoint last`` for a damaged ``checkpoints/best``).
        ValueError: if ``weights`` is not one of :data:`WEIGHTS`.
    """
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    cfg = load_run_config(run_dir)
    model = build_model(cfg)
    step = tf.Variable(0, dtype=tf.int64)
    path = find_checkpoint(run_dir, checkpoint)
    restore_checkpoint(make_checkpoint(model, step=step), path, fix(run_dir, path))
    has_ema = has_averages(path)
    if weights == "ema" and not has_ema:
        raise RunDirError(
            f"{path} holds no averaged weights: the run was trained without train.ema; use the "
            "trained weights (--weights live or auto)"
        )
    chosen = "ema" if has_ema and weights != "live" else "live"
    if chosen == "ema":
        tf.train.Checkpoint(ema=list(model.trainable_variables)).restore(
            path
        ).expect_partial().assert_existing_objects_matched()
    model.sr_weights = chosen
    model.sr_checkpoint = checkpoint_label(run_dir, path)
    log.info(
        "restored %s: %s (step %d), %s weights",
        model.sr_checkpoint,
        path,
        int(step),
        "averaged (train.ema)" if chosen == "ema" else "trained",
    )
    return model, cfg, int(step)


def model_label(model: keras.Model) -> str:
    """A loaded model's name for results: ``<model.name>+ema`` for averaged weights
    (:func:`load_model_from_run`), else ``model.name``."""
    return f"{model.name}+ema" if getattr(model, "sr_weights", "live") == "ema" else model.name


def file_config(found: Found, path) -> DictConfig:
    """The config of a model read from a weight file: ``model``, ``data.scale``,
    ``data.channels`` (``rgb`` for 3 channels, ``y`` for 1) and ``weights_file``."""
    return OmegaConf.create(
        {
            "model": dict(found.model),
            "data": {"scale": found.scale, "channels": "rgb" if found.channels == 3 else "y"},
            "weights_file": {"path": str(Path(path).resolve()), "arch": found.arch},
        }
    )


def load_model(
    source, checkpoint: str | None = None, weights: str = "auto", say=None
) -> tuple[keras.Model, DictConfig, int]:
    """The model of a run folder (:func:`load_model_from_run`) or of a
    PyTorch weight file (``sr.models.state_dicts.load_file``: a generator, x4).

    Args:
        source: a run directory of ``train.py``, or a ``.pth`` / ``.safetensors`` file.
        checkpoint, weights: a run's choices; a weight file takes neither.
        say: called with each line describing a weight file (architecture, hyperparameters,
            parameter count, then the reader's notes: the wrapper taken, tensors cast); None:
            logged.

    Returns:
        ``(model, cfg, step)``; for a file, ``cfg`` is :func:`file_config`, ``step`` 0, and
        ``model.sr_weights`` / ``model.sr_checkpoint`` are ``pretrained`` and the file's name.

    Raises:
        RunDirError, RunFileError: a run that cannot be loaded.
        WeightFileError, StateDictError: a file that cannot be read or is not a supported x4
            generator (naming the file and the fix).
        ValueError: ``checkpoint`` or ``weights`` given with a file.
    """
    if not is_weight_file(source):
        return load_model_from_run(source, checkpoint, weights)
    check_file_choices(source, checkpoint, weights)
    loaded = load_file(source, kind="generator")
    for line in describe_loaded(loaded):
        (say or log.info)(line)
    model = loaded.model
    model.sr_weights, model.sr_checkpoint = "pretrained", Path(source).name
    return model, file_config(loaded.found, source), 0


def source_checkpoint(source, checkpoint: str | None = None) -> str:
    """What results name as the checkpoint of ``source``: a run's chosen checkpoint prefix
    (:func:`sr.loading.checkpoints.find_checkpoint`), or the weight file itself."""
    return str(source) if is_weight_file(source) else find_checkpoint(source, checkpoint)


def source_home(source) -> Path:
    """Where results of ``source`` go by default: the run folder, or ``outputs/<file stem>``
    for a weight file (which has no run folder)."""
    return Path("outputs") / Path(source).stem if is_weight_file(source) else Path(source)


def describe_loaded(loaded: Loaded) -> list[str]:
    """``<file>: span generator x4 RGB: features=52 ...; N parameters`` and the notes."""
    return [f"{loaded.file.path}: {loaded.describe()}", *(f"  {n}" for n in loaded.notes)]
