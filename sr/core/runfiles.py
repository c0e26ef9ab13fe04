"""Reading back the files that runs and exports write: the one reader of each kind, and the one
error for a file that is truncated or corrupt.

Kinds: a run's config (``.hydra/config.yaml``, :func:`load_run_config`: read without TensorFlow, so
that the scripts check a run before they import it), JSON records (``checkpoints/best/best.json``,
``export.json``, a shard folder's ``manifest.json``), TensorFlow checkpoints
(``checkpoints/ckpt-N`` and ``checkpoints/best``: an ``.index`` file and a ``.data-*`` file per
prefix, and the ``checkpoint`` state file of the folder), LiteRT flatbuffers (``model.tflite``) and
ONNX models (``model.onnx``). Each reader turns whatever its library raises on a damaged file
(``JSONDecodeError``, TensorFlow's ``IndexError: Read less bytes than requested`` or
``DataLossError``, LiteRT's "not a valid Flatbuffer", ONNX Runtime's ``InvalidProtobuf``) into
:class:`RunFileError`, which names the file, what is wrong with it and the fix the caller gives
(``--checkpoint last``, export again, ...). Callers that have a documented fallback (the shard
manifest: the set is rebuilt) catch it.

A checkpoint is checked by reading every tensor of it once (:func:`check_checkpoint`; the index
holds a CRC32C of each, so truncation and flipped bytes are both found) before it is restored, so
that a restore that fails afterwards is a mismatch of structure (another model), never taken for
a damaged file.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from sr.core.errors import RunDirError
from sr.core.weightfiles import is_weight_file

WEIGHTS = ("auto", "ema", "live")  # the ``weights`` choices of a run's checkpoint

log = logging.getLogger(__name__)

CHECKPOINT_STATE = "checkpoint"  # tf.train.CheckpointManager's record of a folder's checkpoints

# Classes a run's config names by a module they have since left, and their names today.
MOVED_TARGETS = {
    "sr.core.degrade.Bicubic": "sr.degradations.Bicubic",
    "sr.core.realesrgan.RealESRGAN": "sr.degradations.realesrgan.RealESRGAN",
}


class RunFileError(ValueError):
    """A file written by a run or an export that cannot be read back (missing, truncated,
    corrupt, or of the wrong content). The message names the file, the problem and the fix;
    the scripts exit with code 2 on it (a ``ValueError``), ``train.py`` too.

    Attributes:
        path: the file (or checkpoint prefix) at fault.
        problem: what is wrong with it (the library's exception, ``<type>: <first line>``).
        fix: what to do about it.
    """

    def __init__(self, path, problem: str, fix: str):
        super().__init__(f"{path} is unreadable ({problem}): {fix}")
        self.path, self.problem, self.fix = Path(path), problem, fix


def describe(e: BaseException) -> str:
    """``<type>: <first line>`` of a library's exception, for a :class:`RunFileError`."""
    text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", str(e).strip())  # a TF op's name
    first = text.splitlines()[0][:300] if text else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


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
    target = OmegaConf.select(cfg, "degradation._target_")
    if target in MOVED_TARGETS:  # a run saved before its class moved: the class's name today
        cfg.degradation._target_ = MOVED_TARGETS[target]
    return cfg


def read_json(path, fix: str, keys: tuple[str, ...] = ()) -> dict:
    """A JSON object written by a run or an export.

    Args:
        path: the file.
        fix: what to do if it is unreadable (names a command, a file to restore, ...).
        keys: keys it must hold.

    Returns:
        The object (a dict).

    Raises:
        RunFileError: if the file is missing, not UTF-8, not JSON (truncated: ``Expecting ...
            line 1 column 40``), not an object, or lacks one of ``keys``.
    """
    path = Path(path)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFileError(path, "missing", fix) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RunFileError(path, describe(e), fix) from e
    if not isinstance(value, dict):
        raise RunFileError(path, f"a JSON {type(value).__name__}, not an object", fix)
    missing = [k for k in keys if k not in value]
    if missing:
        raise RunFileError(path, f"it lacks {', '.join(missing)}", fix)
    return value


def checkpoint_files(prefix) -> str:
    """The files of the checkpoint ``prefix``, by name (``ckpt-5.index, ckpt-5.data-00000-of-
    00001``), as present on disk."""
    prefix = Path(prefix)
    names = sorted(p.name for p in prefix.parent.glob(prefix.name + ".*"))
    return ", ".join(names) or "no files"


def check_checkpoint(prefix, fix: str) -> None:
    """Read every tensor of the checkpoint ``prefix`` once, checking each against the CRC32C of
    its index (``tf.train.load_checkpoint``); the variant tensors of a tf.data iterator's state
    (``data=tfrecord``), which that reader cannot convert, are left to the iterator's restore.

    Raises:
        RunFileError: naming the prefix and its files, if the index or a data file is missing,
            truncated or corrupt.
    """
    import tensorflow as tf

    try:
        reader = tf.train.load_checkpoint(str(prefix))
        for name, dtype in reader.get_variable_to_dtype_map().items():
            if dtype != tf.variant:  # a tf.data iterator's state: read by its restore only
                reader.get_tensor(name)
    except (tf.errors.OpError, IndexError, ValueError, OSError) as e:
        where = f"checkpoint {prefix} ({checkpoint_files(prefix)})"
        raise RunFileError(where, describe(e), fix) from e


def restore_checkpoint(checkpoint, prefix, fix: str):
    """Restore ``checkpoint`` (a ``tf.train.Checkpoint``) from ``prefix`` once
    :func:`check_checkpoint` has found it whole; the parts ``checkpoint`` has must all be in the
    file (``assert_existing_objects_matched``), the file's others are ignored.

    Returns:
        The restore status.

    Raises:
        RunFileError: for a damaged checkpoint (:func:`check_checkpoint`).
        AssertionError, ValueError: from TensorFlow, if the file holds another structure (another
            model, shapes or optimizer): the file is whole, the config differs.
    """
    check_checkpoint(prefix, fix)
    return checkpoint.restore(str(prefix)).expect_partial().assert_existing_objects_matched()


def checkpoint_state(directory) -> tuple[str | None, list[str]]:
    """``(latest, all)`` checkpoint prefixes of a ``tf.train.CheckpointManager`` folder, from its
    ``checkpoint`` state file (``tf.train.get_checkpoint_state``).

    Fallback: a state file that TensorFlow cannot parse (truncated, overwritten) is replaced by
    the ``ckpt-N.index`` files of the folder, newest step last, with a warning naming it
    (TensorFlow alone would say the folder holds no checkpoint). ``(None, [])`` for a folder
    without state file and checkpoint.
    """
    import tensorflow as tf

    directory = Path(directory)
    state_file = directory / CHECKPOINT_STATE
    state = tf.train.get_checkpoint_state(str(directory)) if state_file.is_file() else None
    if state is not None and state.model_checkpoint_path:
        return state.model_checkpoint_path, list(state.all_model_checkpoint_paths)
    found = sorted(directory.glob("ckpt-*.index"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    paths = [str(p.with_suffix("")) for p in found if p.stem.rsplit("-", 1)[1].isdigit()]
    if state_file.is_file() and paths:
        log.warning(
            "%s is unreadable (TensorFlow cannot parse it): using the checkpoint files of the "
            "folder instead, the newest %s",
            state_file,
            Path(paths[-1]).name,
        )
    return (paths[-1] if paths else None), paths


def latest_checkpoint(directory) -> str | None:
    """The newest checkpoint prefix of a ``tf.train.CheckpointManager`` folder
    (:func:`checkpoint_state`), or None."""
    return checkpoint_state(directory)[0]


def check_file_choices(source, checkpoint: str | None, weights: str) -> None:
    """Refuse a checkpoint or weights choice (``--checkpoint``, ``--weights``) given with a
    PyTorch weight file, which holds one set of weights.

    Raises:
        ValueError: if ``source`` is a weight file and either is given (naming the fix).
    """
    if is_weight_file(source) and (checkpoint is not None or weights != "auto"):
        raise ValueError(
            f"--checkpoint and --weights choose within a run folder; {source} is a weight file "
            "(one set of weights): drop them"
        )
