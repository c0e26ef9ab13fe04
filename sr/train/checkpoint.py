"""What the trainer adds to a run's checkpoints: the divergence guard's part (beside the weights,
the optimizer and the step of :func:`sr.loading.checkpoints.make_checkpoint`) and the manager of
the rotation. The data position is :mod:`sr.train.data_state`'s; ``train.init_from``'s choice of
a checkpoint :mod:`sr.train.init_from`'s; the checkpoint's structure and lookup, for every
command, ``sr.loading.checkpoints``'."""

from __future__ import annotations

import math
from pathlib import Path

import tensorflow as tf

from sr.loading.checkpoints import CHECKPOINT_DIR


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


def make_manager(checkpoint: tf.train.Checkpoint, run_dir, max_to_keep: int = 3, directory=None):
    """``tf.train.CheckpointManager`` over ``<run_dir>/checkpoints`` (or ``directory``: a
    non-chief worker's temporary folder, ``sr.train.distribute.checkpoint_dir``). Writes are
    atomic: a checkpoint is listed only once all its files are written."""
    directory = directory or Path(run_dir) / CHECKPOINT_DIR
    return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=max_to_keep)
