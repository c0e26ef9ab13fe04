"""What a checkpoint of a run holds, and where a run's checkpoints are: the one structure of
``tf.train.Checkpoint`` of the project (:func:`make_checkpoint`), the choice of a run's checkpoint
(``best``, ``last``, ``ckpt-N``: :func:`find_checkpoint`), ``checkpoints/best`` and its record,
and what to do when one is damaged. Training (``sr.train``) writes them; every command that reads
a run (``scripts/``, ``sr.deploy``, ``sr.results``) reads them through here.

A run directory (Hydra's output directory of ``train.py``) holds:
- ``.hydra/config.yaml``: the composed config (``model.arch`` and its keys, ``data.scale``) of
  the run's first start, never overwritten: each ``resume=`` writes its own config and overrides
  into ``.hydra/resume-<DATE>_<TIME>`` (``sr.train.rundir``);
- ``checkpoints/``: ``tf.train.CheckpointManager`` files of :func:`make_checkpoint`: the
  weights, the optimizer's moments and iteration count, the step, the data position;
  ``checkpoints/best``: the best validated checkpoint, outside the rotation, and ``best.json``;
- ``tb/``: TensorBoard event files; ``train.log``: the console log.
"""

from __future__ import annotations

from pathlib import Path

import keras
import tensorflow as tf

from sr.core.errors import RunDirError
from sr.core.runfiles import checkpoint_state, latest_checkpoint, read_json

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


def has_part(path: str, part: str) -> bool:
    """Whether the checkpoint ``path`` holds a variable under the root's ``part`` (e.g. ``ema``,
    ``guard``: the first component of the keys of ``tf.train.list_variables``)."""
    return any(name.split("/", 1)[0] == part for name, _ in tf.train.list_variables(path))


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


def checkpoint_label(run_dir, path: str) -> str:
    """How results name the checkpoint ``path`` of a run: ``best (ckpt-4000)``, ``last
    (ckpt-8000)`` or ``ckpt-6000``."""
    name = Path(path).name
    if Path(path).parent == best_dir(run_dir):
        return f"best ({name})"
    if path == latest_checkpoint(Path(run_dir) / CHECKPOINT_DIR):
        return f"last ({name})"
    return name


def has_averages(path: str) -> bool:
    """Whether the checkpoint ``path`` holds moving averages of the weights (``train.ema``): a
    variable under the root's ``ema`` (``ema/0/.ATTRIBUTES/VARIABLE_VALUE``)."""
    return has_part(path, "ema")
