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
import math
import re
from pathlib import Path

import hydra
import keras
import tensorflow as tf
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf

from sr.cli import WEIGHTS
from sr.core.errors import ConfigError, RunDirError
from sr.core.runfiles import (  # noqa: F401  (load_run_config: imported from here too)
    checkpoint_state,
    latest_checkpoint,
    load_run_config,
    read_json,
    restore_checkpoint,
)

log = logging.getLogger(__name__)

CHECKPOINT_DIR = "checkpoints"


def make_checkpoint(
    model: keras.Model,
    optimizer=None,
    step: tf.Variable | None = None,
    data: tf.train.Checkpoint | None = None,
    elapsed: tf.Variable | None = None,
    ema: list | None = None,
    guard: tf.train.Checkpoint | None = None,
    extra: dict | None = None,
):
    """The one checkpoint structure of the project: ``model``, ``optimizer``, ``step``,
    ``data`` (:func:`make_data_state`), ``elapsed`` (float64 seconds of the time budget
    used, ``train.max_minutes``), ``ema`` (with ``train.ema``: the moving averages of the
    weights, one per variable of ``model.trainable_variables`` and in its order, so that
    ``Checkpoint(ema=model.trainable_variables)`` restores them into a model) and ``guard``
    (:func:`make_guard_state`), and ``extra``: the parts of the trainer's training part (the GAN
    stage's ``discriminator`` and ``d_optimizer``, ``sr.train.gan``); parts left out are neither
    saved nor restored."""
    parts = {"model": model, **(extra or {})}
    if guard is not None:
        parts["guard"] = guard
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


def make_guard_state() -> tf.train.Checkpoint:
    """The divergence guard's part of a checkpoint (:mod:`sr.train.guard`): ``lr_scale``
    (float32, the factor the guard's rollbacks put on the learning rate; 1 before any),
    ``rollbacks`` (int64, how many the run made) and ``memory`` (float64 ``[3]``: the guard's
    references, :meth:`sr.train.guard.DivergenceGuard.memory`, so that a resumed run judges
    against them). Create it in the strategy's scope."""
    return tf.train.Checkpoint(
        lr_scale=tf.Variable(
            1.0,
            trainable=False,
            name="lr_scale",
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        ),
        rollbacks=tf.Variable(0, dtype=tf.int64, trainable=False, name="rollbacks"),
        memory=tf.Variable(  # the guard's references: lowest mean loss, last mean, PSNR reference
            [math.inf, math.nan, -math.inf], dtype=tf.float64, trainable=False, name="memory"
        ),
    )


def has_part(path: str, part: str) -> bool:
    """Whether the checkpoint ``path`` holds a variable under the root's ``part`` (e.g. ``ema``,
    ``guard``: the first component of the keys of ``tf.train.list_variables``)."""
    return any(name.split("/", 1)[0] == part for name, _ in tf.train.list_variables(path))


# keys of the data state in a checkpoint file (``tf.train.load_checkpoint``)
DATA_SEED_KEY = "data/seed/.ATTRIBUTES/VARIABLE_VALUE"
DATA_STREAM_KEY = "data/stream/.ATTRIBUTES/VARIABLE_VALUE"


def identity_json(value) -> str:
    """The one serialised form of a stream identity (``PatchSource.stream_identity()``) or of
    one of its values: JSON with sorted keys, in which a tuple and a list are the same array.
    What a checkpoint stores, and what every comparison of identities compares (a tuple of
    the config's dataclass against the list JSON gives back are equal here)."""
    return json.dumps(value, sort_keys=True)


def stream_changes(saved: dict, now: dict) -> dict[str, tuple]:
    """The keys whose values differ between a checkpoint's stream identity ``saved`` (as
    :func:`read_data_state` gives it back) and this run's ``now``, each compared in the form
    of :func:`identity_json`; ``{key: (saved value, value now)}``, a missing key None. Empty:
    the same batch stream."""
    return {
        k: (saved.get(k), now.get(k))
        for k in sorted(set(saved) | set(now))
        if identity_json(saved.get(k)) != identity_json(now.get(k))
    }


def make_data_state(seed: int, identity: dict) -> tf.train.Checkpoint:
    """The data position of a checkpoint: ``seed`` (int64, the batch stream's seed), ``stream``
    (string, :func:`identity_json` of ``PatchSource.stream_identity()``) and, for a source
    whose ``checkpoint_iterator`` is true, ``iterator`` (the tf.data iterator, attached by the
    trainer once it exists). With the checkpoint's ``step`` they say where the stream
    continues."""
    return tf.train.Checkpoint(
        seed=tf.Variable(int(seed), dtype=tf.int64, trainable=False, name="data_seed"),
        stream=tf.Variable(
            identity_json(identity), dtype=tf.string, trainable=False, name="stream"
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


def checkpoint_step(path: str) -> int:
    """The step of a checkpoint prefix ``.../ckpt-<step>``."""
    return int(Path(path).name.rsplit("-", 1)[-1])


def resume_candidates(directory) -> list[str]:
    """The checkpoints of a ``tf.train.CheckpointManager`` folder that a resume may continue
    from, newest first: the latest, then the older ones of its record (a resume falls back to
    them when the latest is unreadable). Empty if the folder has none."""
    latest, paths = checkpoint_state(directory)  # a damaged state file: the folder's files
    if latest is None:
        return []
    older = [p for p in paths if p != latest and checkpoint_step(p) < checkpoint_step(latest)]
    return [latest, *sorted(older, key=checkpoint_step, reverse=True)]


BEST_DIR = "best"  # checkpoints/best: the best validated checkpoint, outside the rotation
BEST_RECORD = "best.json"  # beside it: {"step", "psnr", "weights", "checkpoint"}


def best_dir(run_dir) -> Path:
    """``<run_dir>/checkpoints/best``: the checkpoint with the best validation PSNR so far."""
    return Path(run_dir) / CHECKPOINT_DIR / BEST_DIR


def read_best(run_dir) -> dict | None:
    """The record of ``checkpoints/best`` (``step``, ``psnr`` in dB, ``weights`` judged:
    ``ema`` or ``live``, ``checkpoint``: its path prefix); None if the run has none.

    Raises:
        RunFileError: if ``best.json`` is truncated or malformed (names it, and how to resume
            without it).
    """
    folder = best_dir(run_dir)
    path = folder / BEST_RECORD
    if not path.is_file():
        return None
    fix = (
        f"restore it from a backup, or move {folder} aside (mv {folder} {folder}.damaged) to "
        "go on without a best checkpoint: the next validation writes a new one"
    )
    return read_json(path, fix, keys=("step", "psnr", "checkpoint"))


def find_checkpoint(run_dir, checkpoint: str | None = None) -> str:
    """Path prefix of the chosen checkpoint of a run.

    Args:
        run_dir: output directory of a ``train.py`` run.
        checkpoint: ``best`` (``checkpoints/best``: the best validation PSNR), ``last`` (the
            newest of the rotation, where ``resume=`` continues), ``ckpt-N`` or a full prefix;
            None: ``best`` if the run has one, else ``last``.

    Raises:
        RunDirError: if there is none (naming the folder and the choices).
    """
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    if checkpoint is None or checkpoint == "best":
        best = latest_checkpoint(best_dir(run_dir))
        if best is not None or checkpoint == "best":
            if best is None:
                raise RunDirError(
                    f"no best checkpoint in {best_dir(run_dir)} (the run had no validation, or "
                    "predates it): use --checkpoint last or ckpt-N"
                )
            return best
    if checkpoint not in (None, "best", "last"):
        prefix = Path(checkpoint) if Path(checkpoint).is_absolute() else ckpt_dir / checkpoint
        if not Path(f"{prefix}.index").is_file():
            raise RunDirError(
                f"no checkpoint {prefix} (expected {prefix}.index): choose best, last or one of "
                f"{', '.join(sorted(p.stem for p in ckpt_dir.glob('ckpt-*.index'))) or 'none'}"
            )
        return str(prefix)
    latest = latest_checkpoint(ckpt_dir)
    if latest is None:
        raise RunDirError(f"no checkpoint in {ckpt_dir}: train first, or pick another run")
    return latest


def damaged_fix(run_dir, path: str) -> str:
    """What to do when the checkpoint ``path`` of a run is damaged: choose another one
    (``--checkpoint last`` for ``checkpoints/best``; ``best`` or another ``ckpt-N`` for one of
    the rotation), the rotation's checkpoints listed."""
    is_best = Path(path).parent == best_dir(run_dir)
    _, rotation = checkpoint_state(Path(run_dir) / CHECKPOINT_DIR)
    others = [Path(p).name for p in rotation if is_best or Path(p).name != Path(path).name]
    listed = f" ({', '.join(others)})" if others else ""
    if is_best:
        return (
            "the best checkpoint is damaged: use the newest checkpoint of the rotation with "
            f"--checkpoint last, or one of them with --checkpoint ckpt-N{listed}"
        )
    best = "best, " if latest_checkpoint(best_dir(run_dir)) else ""
    return f"choose another checkpoint: --checkpoint {best}last or ckpt-N{listed}"


def init_from_choice(value) -> tuple[Path, str | None]:
    """``(run folder, checkpoint)`` of a ``train.init_from`` value: ``RUN`` (its best, else its
    newest: checkpoint None), ``RUN/checkpoints/best`` (``best``), ``RUN/checkpoints/last``
    (``last``: the newest of the rotation, a finished run's final weights, where Real-ESRGAN's
    GAN stage starts) or ``RUN/checkpoints/ckpt-N`` (``ckpt-N``, one of the rotation's: e.g. when
    ``best`` is damaged); ``checkpoint`` as :func:`find_checkpoint` takes it."""
    path = Path(value).expanduser()
    name = path.name
    named = name in (BEST_DIR, "last") or _CKPT.fullmatch(name)
    if path.parent.name == CHECKPOINT_DIR and named:
        return path.parent.parent, name
    return path, None


_CKPT = re.compile(r"ckpt-\d+")


def init_from_fix(run_dir, path: str) -> str:
    """:func:`damaged_fix` for ``train.py``: the other checkpoints of the run as the
    ``train.init_from=RUN/checkpoints/ckpt-N`` values that start from them."""
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    _, rotation = checkpoint_state(ckpt_dir)
    others = [Path(p).name for p in rotation if Path(p) != Path(path)]
    if not others:
        return "the run has no other checkpoint: start from another run, or drop train.init_from"
    what = "the best checkpoint is damaged: " if Path(path).parent == best_dir(run_dir) else ""
    more = f" (or another of {', '.join(others)})" if len(others) > 1 else ""
    return (
        f"{what}start from another of its checkpoints with train.init_from="
        f"{ckpt_dir / others[-1]}{more}"
    )


def check_resume_init_from(cfg: DictConfig, saved: DictConfig) -> None:
    """``resume=`` never loads ``train.init_from``: refuse one other than the run's own start.

    Raises:
        RunDirError: naming both keys, the run's own ``train.init_from`` and the two ways on.
    """
    given = cfg.train.get("init_from")
    own = OmegaConf.select(saved, "train.init_from", default=None)
    same = own and Path(own).expanduser().resolve() == Path(given or "").expanduser().resolve()
    if not given or same:
        return  # the command that started the run, with resume= added: its start, as it was
    started = f"the run started from train.init_from={own}" if own else "the run has none"
    raise RunDirError(
        f"resume={cfg.resume} with train.init_from={given}: a resume continues the run from its "
        f"own checkpoint (weights, optimizer, step) and never loads train.init_from ({started}). "
        f"Drop train.init_from to resume the run, or drop resume= to start a new run from "
        f"{given}'s weights"
    )


def checkpoint_label(run_dir, path: str) -> str:
    """How results name the checkpoint ``path`` of a run: ``best (ckpt-4000)``, ``last
    (ckpt-8000)`` or ``ckpt-6000``."""
    name = Path(path).name
    if Path(path).parent == best_dir(run_dir):
        return f"best ({name})"
    if path == latest_checkpoint(Path(run_dir) / CHECKPOINT_DIR):
        return f"last ({name})"
    return name


def build_model(cfg: DictConfig) -> keras.Model:
    """Instantiate ``cfg.model`` (a builder with ``_target_``) at ``cfg.data.scale``, with the
    channels of ``cfg.data.channels`` (1 for ``y``, 3 for ``rgb``; runs saved before the key
    existed are Y).

    Raises:
        ConfigError: for a value the builder refuses (its ValueError), naming the builder.
    """
    channels = 3 if cfg.data.get("channels", "y") == "rgb" else 1
    try:
        return hydra.utils.instantiate(cfg.model, scale=cfg.data.scale, channels=channels)
    except InstantiationException as e:  # a builder's refusal of a config value: exit code 2
        if isinstance(e.__cause__, ValueError):
            raise ConfigError(f"model ({cfg.model._target_}): {e.__cause__}") from e
        raise


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


def has_averages(path: str) -> bool:
    """Whether the checkpoint ``path`` holds moving averages of the weights (``train.ema``): a
    variable under the root's ``ema`` (``ema/0/.ATTRIBUTES/VARIABLE_VALUE``)."""
    return has_part(path, "ema")
