"""Small real objects to build the trainer's collaborators alone (``tests/test_saving.py``,
``test_rollback.py``, ``test_feed.py``, ``test_budget.py``, ``test_report.py``, ``test_best.py``):
a one-convolution Keras model, its built optimizer, a run state and its checkpoint, with no
config, data source or ``Trainer``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from sr.loading.checkpoints import make_checkpoint
from sr.train.best import PSNR
from sr.train.budget import TimeBudget
from sr.train.guard import DivergenceGuard, GuardSettings
from sr.train.saving import Checkpoints, FiniteCheck
from sr.train.state import RunState

IDENTITY = {"mode": "test", "patch_size": 8}


class PixelPart:
    """The way of training of a pixel loss as the collaborators see it
    (``sr.train.parts.TrainingPart``): nothing in the checkpoint, no verdict, no advice."""

    best = PSNR
    psnr_reference = "best"
    terms: tuple[str, ...] = ()

    def __init__(self):
        self.forgotten = 0

    def checkpoint_parts(self) -> dict:
        return {}

    def variables(self) -> list:
        return []

    def log_window(self, step: int, writer) -> None:
        pass

    def judge(self, step: int) -> str | None:
        return None

    def advice(self, reason: str) -> str | None:
        return None

    def forget(self) -> None:
        self.forgotten += 1

    def describe(self) -> str:
        return "none"


@dataclass
class Parts:
    """One run's collaborators, built as :class:`sr.train.loop.Trainer` builds them."""

    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    state: RunState
    checkpoint: tf.train.Checkpoint
    budget: TimeBudget
    guard: DivergenceGuard
    finite: FiniteCheck
    checkpoints: Checkpoints
    part: PixelPart


def tiny_model() -> keras.Model:
    """``[B, 4, 4, 1] -> [B, 4, 4, 1]``: one 3x3 convolution (10 weights)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4, 4, 1))
    return keras.Model(inputs, keras.layers.Conv2D(1, 3, padding="same")(inputs))


def build_parts(run_dir: Path, keep: int = 3, skip: bool = False, minutes=None) -> Parts:
    """The collaborators of a run in ``run_dir``, on the default strategy, for a pixel loss."""
    model = tiny_model()
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    state = RunState.create(tf.distribute.get_strategy(), 7, IDENTITY)
    checkpoint = make_checkpoint(
        model, optimizer, state.step, state.data, state.elapsed, guard=state.guard
    )
    budget = TimeBudget(minutes, state.elapsed, state.progress)
    guard = DivergenceGuard(GuardSettings())
    part = PixelPart()
    finite = FiniteCheck(
        state,
        lambda: [*model.weights, *optimizer.variables, *part.variables()],
        keras.optimizers.schedules.CosineDecay(1e-3, 100),
        tf.summary.create_noop_writer(),
        skip=skip,
        lr=1e-3,
        resume_dir=run_dir,
    )
    checkpoints = Checkpoints(
        checkpoint, state, model, optimizer, part.checkpoint_parts(), finite, budget, guard,
        run_dir=run_dir, keep=keep, chief=True, averaged=False, ema=None,
    )  # fmt: skip
    return Parts(model, optimizer, state, checkpoint, budget, guard, finite, checkpoints, part)


def set_weights(model: keras.Model, value: float) -> None:
    """Every weight of ``model`` to ``value``."""
    model.set_weights([np.full(w.shape, value, np.float32) for w in model.get_weights()])


def weight(model: keras.Model) -> float:
    """The model's first kernel value (after :func:`set_weights`: the value set)."""
    return float(model.get_weights()[0].flat[0])
