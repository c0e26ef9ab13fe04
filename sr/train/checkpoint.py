"""The training side of a run's checkpoints: the divergence guard's and the data stream's parts
of a checkpoint (what :func:`sr.loading.checkpoints.make_checkpoint` holds beside the weights),
the checkpoint manager of a run, and ``train.init_from``'s choice of a run's checkpoint. Reading
a run's model back (``sr.loading``) and the checkpoint's structure and lookup
(``sr.loading.checkpoints``) are below the app, for every command.
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path

import tensorflow as tf
from omegaconf import DictConfig, OmegaConf

from sr.core.errors import RunDirError
from sr.core.runfiles import checkpoint_state
from sr.loading.checkpoints import BEST_DIR, CHECKPOINT_DIR, best_dir

log = logging.getLogger(__name__)

# keys of the data state in a checkpoint file (``tf.train.load_checkpoint``)
DATA_SEED_KEY = "data/seed/.ATTRIBUTES/VARIABLE_VALUE"
DATA_STREAM_KEY = "data/stream/.ATTRIBUTES/VARIABLE_VALUE"


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


