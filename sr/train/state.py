"""The state of a run that the trainer's collaborators share (:mod:`sr.train.loop`): the step and
the other variables a checkpoint holds beside the weights and the optimizer, and the steps saved
so far. Each collaborator is given this object (or the variables of it that it needs) in its
constructor; none of them reads another's fields."""

from __future__ import annotations

from dataclasses import dataclass, field

import tensorflow as tf

from sr.train.checkpoint import make_guard_state
from sr.train.data_state import make_data_state


@dataclass
class RunState:
    """The run's own variables (each a ``tf.Variable`` or a ``tf.train.Checkpoint`` of them).

    Attributes:
        step: int64, the steps trained (checkpointed; a resumed run goes on from it).
        first_bad: int64, the first step whose loss was NaN or inf (-1: none; policy ``stop``);
            device side, not checkpointed.
        skipped: int64, the steps skipped with a non-finite loss (policy ``skip``); not
            checkpointed.
        elapsed: float64, seconds of the time budget used before this process's clock started
            (checkpointed; a plain variable: the host writes it).
        progress: float32 in ``[0, 1]``, the fraction of the time budget used (the LR
            schedule's, :class:`sr.train.schedule.BudgetSchedule`); 0 without a budget.
        guard: the divergence guard's part of a checkpoint (``lr_scale``, ``rollbacks``,
            ``memory``: :func:`sr.train.checkpoint.make_guard_state`).
        data: the data position of a checkpoint (``seed``, ``stream``, and ``iterator`` /
            ``pool`` once attached: :func:`sr.train.data_state.make_data_state`).
        saved_steps: the steps saved in the rotation (the rollback targets; a resumed run's
            earlier ones included, newest first, then this process's in the order saved).
    """

    step: tf.Variable
    first_bad: tf.Variable
    skipped: tf.Variable
    elapsed: tf.Variable
    progress: tf.Variable
    guard: tf.train.Checkpoint
    data: tf.train.Checkpoint
    saved_steps: list[int] = field(default_factory=list)

    @classmethod
    def create(cls, strategy: tf.distribute.Strategy, seed: int, identity: dict) -> RunState:
        """A fresh run's state: step 0, nothing elapsed, the learning-rate factor 1, the data
        position of the stream ``seed`` / ``identity`` (``PatchSource.stream_seed`` and
        ``stream_identity()``). The data position and ``elapsed`` are plain variables (a string
        cannot live on a GPU; the host writes the elapsed time); the others are created in
        ``strategy``'s scope."""
        data = make_data_state(seed, identity)
        elapsed = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="elapsed")
        with strategy.scope():
            progress = tf.Variable(
                0.0,
                dtype=tf.float32,
                trainable=False,
                name="budget_progress",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
            guard = make_guard_state()
            step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            first_bad = tf.Variable(-1, dtype=tf.int64, trainable=False, name="first_bad")
            skipped = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped")
        return cls(step, first_bad, skipped, elapsed, progress, guard, data)

    def at(self) -> int:
        """The current step (a host read of :attr:`step`)."""
        return int(self.step.numpy())
