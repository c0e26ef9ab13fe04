"""Checkpoints of a run, and loading a trained model back from a run directory.

A run directory (Hydra's output directory of ``train.py``) holds:
- ``.hydra/config.yaml``: the composed config (``model`` instantiable, ``data.scale`` the scale)
  of the run's first start, never overwritten: each ``resume=`` writes its own config and
  overrides into ``.hydra/resume-<DATE>_<TIME>`` (``sr.train.rundir``);
- ``.lock``: the owner of the directory while a run is going (``sr.train.rundir.RunDirLock``);
- ``checkpoints/``: ``tf.train.CheckpointManager`` files of ``tf.train.Checkpoint(model=...,
  optimizer=..., step=..., data=...)`` (:func:`make_checkpoint`): the weights, Adam's moments
  and iteration count, the step, and the data position (:func:`make_data_state`: the stream's
  seed and identity, plus the tf.data iterator's state for ``data=tfrecord``);
- ``tb/``: TensorBoard event files; ``train.log``: the console log.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import hydra
import keras
import tensorflow as tf
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

CHECKPOINT_DIR = "checkpoints"


class RunDirError(ValueError):
    """A run directory without the config or checkpoint it should hold."""


def make_checkpoint(
    model: keras.Model,
    optimizer=None,
    step: tf.Variable | None = None,
    data: tf.train.Checkpoint | None = None,
    elapsed: tf.Variable | None = None,
    ema: list | None = None,
):
    """The one checkpoint structure of the project: ``model``, ``optimizer``, ``step``,
    ``data`` (:func:`make_data_state`), ``elapsed`` (float64 seconds of the time budget
    used, ``train.max_minutes``) and ``ema`` (with ``train.ema``: the moving averages of the
    weights, one per variable of ``model.trainable_variables`` and in its order, so that
    ``Checkpoint(ema=model.trainable_variables)`` restores them into a model); parts left out are
    neither saved nor restored."""
    parts = {"model": model}
    if ema is not None:
        parts["ema"] = list(ema)
    if elapsed is not None:
        parts["elapsed"] = elapsed
    if optimizer is not None:
        parts["optimizer"] = optimizer
    if step is not None:
        parts["step"] = step
    if data is not None:
        parts["data"] = data
    return tf.train.Checkpoint(**parts)


# keys of the data state in a checkpoint file (``tf.train.load_checkpoint``)
DATA_SEED_KEY = "data/seed/.ATTRIBUTES/VARIABLE_VALUE"
DATA_STREAM_KEY = "data/stream/.ATTRIBUTES/VARIABLE_VALUE"


def make_data_state(seed: int, identity: dict) -> tf.train.Checkpoint:
    """The data position of a checkpoint: ``seed`` (int64, the batch stream's seed), ``stream``
    (string, JSON of ``PatchSource.stream_identity()``) and, for a source whose
    ``checkpoint_iterator`` is true, ``iterator`` (the tf.data iterator, attached by the trainer
    once it exists). With the checkpoint's ``step`` they say where the stream continues."""
    return tf.train.Checkpoint(
        seed=tf.Variable(int(seed), dtype=tf.int64, trainable=False, name="data_seed"),
        stream=tf.Variable(
            json.dumps(identity, sort_keys=True), dtype=tf.string, trainable=False, name="stream"
        ),
    )


def read_data_state(path: str) -> tuple[int, dict] | None:
    """``(seed, stream identity)`` saved in the checkpoint ``path``; None if it has none
    (written before checkpoints held the data position)."""
    reader = tf.train.load_checkpoint(path)
    if not reader.has_tensor(DATA_SEED_KEY):
        return None
    stream = reader.get_tensor(DATA_STREAM_KEY)
    return int(reader.get_tensor(DATA_SEED_KEY)), json.loads(
        stream.decode() if isinstance(stream, bytes) else stream
    )


def make_manager(checkpoint: tf.train.Checkpoint, run_dir, max_to_keep: int = 3, directory=None):
    """``tf.train.CheckpointManager`` over ``<run_dir>/checkpoints`` (or ``directory``: a
    non-chief worker's temporary folder, ``sr.train.distribute.checkpoint_dir``). Writes are
    atomic: a checkpoint is listed only once all its files are written."""
    directory = directory or Path(run_dir) / CHECKPOINT_DIR
    return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=max_to_keep)


def load_run_config(run_dir) -> DictConfig:
    """The composed config a run was started with.

    Raises:
        RunDirError: if ``<run_dir>/.hydra/config.yaml`` is missing or is not a readable config.
    """
    path = Path(run_dir) / ".hydra" / "config.yaml"
    if not path.is_file():
        raise RunDirError(f"{run_dir} is not a run directory of train.py: {path} is missing")
    try:
        cfg = OmegaConf.load(path)
    except Exception as e:  # yaml's parser and scanner errors, OmegaConf's, a decode error
        raise RunDirError(
            f"the run's config {path} is damaged ({type(e).__name__}: {e}); restore it from a "
            "backup, or copy it from .hydra/resume-*/config.yaml of the same run"
        ) from e
    if not isinstance(cfg, DictConfig) or "model" not in cfg or "data" not in cfg:
        raise RunDirError(f"the run's config {path} is damaged: it has no model or data section")
    return cfg


def find_checkpoint(run_dir, checkpoint: str | None = None) -> str:
    """Path prefix of the chosen checkpoint (``ckpt-N`` or a full prefix), else the latest.

    Raises:
        RunDirError: if there is none.
    """
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    if checkpoint:
        prefix = Path(checkpoint) if Path(checkpoint).is_absolute() else ckpt_dir / checkpoint
        if not Path(f"{prefix}.index").is_file():
            raise RunDirError(f"no checkpoint {prefix} (expected {prefix}.index)")
        return str(prefix)
    latest = tf.train.latest_checkpoint(str(ckpt_dir))
    if latest is None:
        raise RunDirError(f"no checkpoint in {ckpt_dir}: train first, or pick another run")
    return latest


def build_model(cfg: DictConfig) -> keras.Model:
    """Instantiate ``cfg.model`` (a builder with ``_target_``) at ``cfg.data.scale``."""
    return hydra.utils.instantiate(cfg.model, scale=cfg.data.scale)


WEIGHTS = ("auto", "ema", "live")  # the ``weights`` choices of :func:`load_model_from_run`


def load_model_from_run(
    run_dir, checkpoint: str | None = None, weights: str = "auto"
) -> tuple[keras.Model, DictConfig, int]:
    """Rebuild a run's model and restore its weights.

    Args:
        run_dir: output directory of a ``train.py`` run.
        checkpoint: ``ckpt-N`` (or a checkpoint prefix); None for the latest.
        weights: ``ema``: the moving averages of the weights (a run with ``train.ema``);
            ``live``: the trained weights themselves; ``auto``: the averages when the checkpoint
            has them, else the trained weights. Which was loaded is logged and set as
            ``model.sr_weights`` (``ema`` or ``live``).

    Returns:
        ``(model, cfg, step)``: the Keras model with restored weights, the run's config, and the
        training step the checkpoint was saved at.

    Raises:
        RunDirError: if the run directory has no config or no checkpoint, or ``weights=ema`` and
            the checkpoint holds no averages (the run had no ``train.ema``).
        ValueError: if ``weights`` is not one of :data:`WEIGHTS`.
    """
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    cfg = load_run_config(run_dir)
    model = build_model(cfg)
    step = tf.Variable(0, dtype=tf.int64)
    path = find_checkpoint(run_dir, checkpoint)
    make_checkpoint(model, step=step).restore(
        path
    ).expect_partial().assert_existing_objects_matched()
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
    log.info(
        "restored %s (step %d), %s weights",
        path,
        int(step),
        "averaged (train.ema)" if chosen == "ema" else "trained",
    )
    return model, cfg, int(step)


def add_weights_argument(parser) -> None:
    """Add ``--weights {auto,ema,live}``, for :func:`load_model_from_run`, to a script."""
    parser.add_argument(
        "--weights",
        choices=WEIGHTS,
        default="auto",
        help="ema: the run's averaged weights (train.ema); live: its trained weights; auto "
        "(default): the averaged ones when the checkpoint has them",
    )


def model_label(model: keras.Model) -> str:
    """A loaded model's name for results: ``<model.name>+ema`` for averaged weights
    (:func:`load_model_from_run`), else ``model.name``."""
    return f"{model.name}+ema" if getattr(model, "sr_weights", "live") == "ema" else model.name


def has_averages(path: str) -> bool:
    """Whether the checkpoint ``path`` holds moving averages of the weights (``train.ema``): a
    variable under the root's ``ema`` (``ema/0/.ATTRIBUTES/VARIABLE_VALUE``, the keys of
    ``tf.train.list_variables``)."""
    return any(name.split("/", 1)[0] == "ema" for name, _ in tf.train.list_variables(path))
