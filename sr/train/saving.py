"""The checkpoints of a run (:class:`Checkpoints`): nothing non-finite is saved
(:class:`FiniteCheck`), a failing validation loses no step, and ``resume=`` restores the
weights, the optimizer, the step and the time budget used (the data position:
:class:`sr.train.feed.DataFeed`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import keras
import tensorflow as tf

from sr.core.errors import ConfigError
from sr.core.runfiles import RunFileError, check_checkpoint, describe, latest_checkpoint
from sr.loading.checkpoints import (
    CHECKPOINT_DIR,
    checkpoint_step,
    has_averages,
    has_part,
    make_checkpoint,
    resume_candidates,
)
from sr.train import distribute
from sr.train.budget import TimeBudget
from sr.train.checkpoint import make_manager
from sr.train.guard import DivergenceGuard
from sr.train.schedule import lr_at
from sr.train.state import RunState
from sr.train.step import all_finite
from sr.train.validation import ValidationError

log = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
    """The loss (or the weights) became NaN or infinite; nothing non-finite was saved.

    Attributes:
        step: the first step whose loss was non-finite (1-based, as in the timing line), or the
            step at which non-finite weights were found before a save.
        lr: the learning rate of that step.
        last_checkpoint: path prefix of the last (finite) checkpoint of the run, or None.
    """

    def __init__(self, message: str, step: int, lr: float, last_checkpoint: str | None):
        super().__init__(message)
        self.step, self.lr, self.last_checkpoint = step, lr, last_checkpoint


class FiniteCheck:
    """The host side of the non-finite check: reads the step's device-side record and, before a
    save, the weights.

    Args:
        state: the run's state (``step``, ``first_bad``, ``skipped``).
        variables: the variables checked finite before a save: a callable returning them (the
            model's weights, the optimizer's slots, the part's, as they are at the check).
        schedule: the learning-rate schedule (the error names the rate of the step).
        writer: the run's summary writer (``train/skipped_steps``).
        skip: ``train.on_nonfinite=skip`` (the step skips a non-finite update and counts it).
        lr: ``train.lr`` (the error's advice: a tenth of it).
        resume_dir: the run whose checkpoints ``resume=`` reads (the chief's).
    """

    def __init__(self, state: RunState, variables, schedule, writer, *, skip: bool, lr: float,
                 resume_dir: Path):  # fmt: skip
        self.state, self.variables, self.schedule, self.writer = state, variables, schedule, writer
        self.skip, self.lr, self.resume_dir = skip, lr, Path(resume_dir)
        self._skip_mark = (0, 0)  # (step, skipped) at the last log line

    def error(self, step: int, what: str) -> NonFiniteError:
        """The error for a non-finite state found at ``step``: names the step, its learning rate,
        the last (finite) checkpoint on disk and how to resume from it."""
        lr = lr_at(self.schedule, max(0, step - 1))
        last = latest_checkpoint(self.resume_dir / CHECKPOINT_DIR)
        if last:
            nxt = (
                f"the last good checkpoint is {last}; resume from it with "
                f"resume={self.resume_dir} and a lower learning rate, e.g. "
                f"train.lr={self.lr / 10:.3g}"
            )
        else:
            nxt = (
                f"no checkpoint was saved before it; start again with a lower train.lr ({lr:.3g})"
            )
        return NonFiniteError(
            f"{what} at step {step} (lr {lr:.3g}): stopped without saving it; {nxt}",
            step,
            lr,
            last,
        )

    def check(self, weights: bool = False, window: bool = False) -> None:
        """Read the step's device-side record (one scalar).

        Args:
            weights: also check that every variable of :attr:`variables` is finite (one
                reduction per variable; done before every save).
            window: a log line's check; with ``train.on_nonfinite=skip`` it logs the steps
                skipped since the last one and stops if every step since then was skipped.

        Raises:
            NonFiniteError: naming the step, its learning rate and the last good checkpoint.
        """
        step = self.state.at()
        if self.skip:
            if window:
                self._check_skipped(step)
        else:
            bad = int(self.state.first_bad.numpy())
            if bad >= 0:
                raise self.error(bad, "non-finite loss (NaN or inf)")
        if weights and not bool(all_finite(self.variables())):
            raise self.error(step, "non-finite weights")

    def _check_skipped(self, step: int) -> None:
        """``on_nonfinite=skip``: log the steps skipped since the last log line; stop if every
        one of them was."""
        skipped = int(self.state.skipped.numpy())
        mark_step, mark_skipped = self._skip_mark
        new = skipped - mark_skipped
        self._skip_mark = (step, skipped)
        if new:
            log.warning(
                "skipped %d step(s) with a non-finite loss or gradient (%d in all)", new, skipped
            )
            with self.writer.as_default(step=step):
                tf.summary.scalar("train/skipped_steps", skipped)
        if new and new >= step - mark_step:
            raise self.error(step, f"every one of the last {new} steps was non-finite and skipped")


class Checkpoints:
    """Where the run's checkpoints go and what they restore.

    Args:
        checkpoint: the run's whole checkpoint (``sr.loading.checkpoints.make_checkpoint``).
        state: the run's state (the step, the elapsed time, the guard's part, the data
            position, the steps saved).
        model: the Keras model trained.
        optimizer: its optimizer, built.
        extra: the way of training's trackables (``part.checkpoint_parts()``).
        finite: the non-finite check made before every save.
        budget: the time budget (its clock is written into the checkpoint).
        guard: the divergence guard (its references are written into the checkpoint).
        run_dir: the run's output directory.
        keep: ``train.max_to_keep``, the checkpoints of the rotation.
        chief: this process is the chief (a worker's checkpoints are temporary; its data
            position is kept in ``<run_dir>/data``).
        averaged: the optimizer keeps moving averages (``train.ema``, whose value ``ema`` the
            refusal of a checkpoint trained otherwise names).

    Attributes:
        manager: the rotation (``<run_dir>/checkpoints``, or a worker's temporary folder).
        directory: its folder.
        resume_dir: the run ``resume=`` names (the chief's).
        restore_dir: the checkpoints ``resume=`` reads (the chief's).
    """

    def __init__(self, checkpoint, state: RunState, model: keras.Model, optimizer, extra: dict,
                 finite: FiniteCheck, budget: TimeBudget, guard: DivergenceGuard, *, run_dir,
                 keep: int, chief: bool, averaged: bool, ema):  # fmt: skip
        self.state, self.model, self.optimizer = state, model, optimizer
        self.extra, self.finite, self.budget, self.guard = extra, finite, budget, guard
        self.chief, self.averaged, self.ema = chief, averaged, ema
        run_dir = Path(run_dir)
        # a non-chief worker's model checkpoints are temporary; its own data position (its
        # iterator reads its own shards) is kept in <its dir>/data, saved at the same steps
        self.data_manager = (
            None
            if chief
            else tf.train.CheckpointManager(
                tf.train.Checkpoint(data=state.data), str(run_dir / "data"), max_to_keep=keep
            )
        )
        self.directory = distribute.checkpoint_dir(run_dir)
        self.manager = make_manager(checkpoint, run_dir, keep, directory=self.directory)
        self.resume_dir = distribute.chief_run_dir(run_dir)  # what resume= names
        self.restore_dir = self.resume_dir / CHECKPOINT_DIR

    def save(self) -> str:
        """Save a checkpoint of the current step (``ckpt-<step>``), once the state is known to be
        finite (:meth:`FiniteCheck.check` with ``weights=True``).

        Returns:
            The checkpoint's path prefix.

        Raises:
            NonFiniteError: if the loss since the last check or any weight is NaN or inf; nothing
                is written, so the checkpoints on disk stay the finite ones.
        """
        self.finite.check(weights=True)
        self.budget.record()
        self.state.guard.memory.assign(self.guard.memory())
        step = self.state.at()
        path = self.manager.save(checkpoint_number=step)
        self.state.saved_steps.append(step)
        distribute.discard(self.directory)  # a non-chief worker's copy is temporary
        if self.data_manager is not None:
            self.data_manager.save(checkpoint_number=step)
        if self.chief:
            log.info("checkpoint %s", path)
        return path

    def resume(self) -> str:
        """Restore the newest readable checkpoint of :attr:`restore_dir` (for ``resume=``) with
        the time budget used; returns its path prefix and records the rotation's steps up to it
        in ``state.saved_steps``. A checkpoint that cannot be read (truncated, damaged) is
        skipped with a warning naming its files, for the one before it.

        Raises:
            FileNotFoundError: if the run has no checkpoint, or none is readable.
            ConfigError: if ``train.ema`` is set in one of the run and this resume only, or a
                whole checkpoint does not restore into this config's model or optimizer.
        """
        candidates = resume_candidates(self.restore_dir)
        if not candidates:
            raise FileNotFoundError(
                f"resume={self.resume_dir}: no checkpoint in {self.restore_dir}; "
                "pass the output directory of an earlier train.py run"
            )
        for path in candidates:
            try:
                self.restore(path, elapsed=True)
                break
            except RunFileError as e:  # truncated or corrupt: the checkpoint before it
                log.warning(
                    "resume=%s: %s is unreadable (%s); trying the checkpoint before it",
                    self.resume_dir,
                    ", ".join(
                        sorted(p.name for p in Path(path).parent.glob(Path(path).name + ".*"))
                    ),
                    e.problem,
                )
            except (tf.errors.OpError, ValueError, AssertionError, KeyError) as e:
                if isinstance(e, ConfigError):
                    raise
                raise ConfigError(  # the file is whole (runfiles.check_checkpoint)
                    f"resume={self.resume_dir}: {path} is whole but does not fit this config's "
                    f"model or optimizer ({describe(e)}); resume with the run's own config"
                ) from e
        else:
            raise FileNotFoundError(
                f"resume={self.resume_dir}: none of the checkpoints in {self.restore_dir} is "
                f"readable ({', '.join(Path(p).name for p in candidates)})"
            )
        step = self.state.at()
        log.info("resumed from %s at step %d", path, step)
        if self.budget.seconds is not None:
            log.info(
                "time budget: %.2f of train.max_minutes=%s minutes used before this resume",
                float(self.state.elapsed.numpy()) / 60,
                self.budget.minutes,
            )
        self.state.saved_steps = [
            checkpoint_step(p) for p in candidates if checkpoint_step(p) <= step
        ]
        return path

    def restore(self, path: str, elapsed: bool) -> None:
        """Restore the weights, the optimizer (its averages too), the step and the guard's state
        of the checkpoint ``path`` (and the time budget used, with ``elapsed``).

        Raises:
            ConfigError: if ``train.ema`` is set in one of the run and this resume only.
            RunFileError: if the checkpoint is truncated or corrupt (``sr.core.runfiles``).
            tf.errors.OpError, ValueError: if the checkpoint holds another structure.
        """
        check_checkpoint(path, "resume= goes on from the checkpoint before it, if one is whole")
        if has_averages(path) != self.averaged:  # the optimizer's slots would not match
            saved = "with" if has_averages(path) else "without"
            raise ConfigError(
                f"resume={self.resume_dir}: {path} was trained {saved} train.ema and this run "
                f"has train.ema={self.ema}; resume with the run's own train.ema"
            )
        state = self.state
        guard = state.guard if has_part(path, "guard") else None  # older checkpoints: none
        make_checkpoint(
            self.model,
            self.optimizer,
            state.step,
            elapsed=state.elapsed if elapsed else None,
            guard=guard,
            extra=self.extra,
        ).restore(path).expect_partial().assert_existing_objects_matched()

    def validate_safely(self, validate: Callable[[], dict], saved: bool, val_dir) -> dict:
        """``validate()`` (the trainer's validation: its results, ``{}`` without validation
        images), with the trained steps safe whatever happens to it.

        Args:
            validate: the validation to run.
            saved: the current step's checkpoint is already written; if not, a failing
                validation writes it before the error propagates.

        Raises:
            NonFiniteError: if the state is non-finite (not validated, not saved).
            ValidationError: if a validation image cannot be read or is too small (names the
                file, the saved checkpoint, ``data.val_dir`` (``val_dir``) and ``resume=``).
        """
        self.finite.check()
        try:
            return validate()
        except Exception as e:
            path = self.manager.latest_checkpoint if saved else self.save()
            if not isinstance(e, ValueError):
                log.error(
                    "validation failed at step %d; the step is saved in %s",
                    self.state.at(),
                    path,
                )
                raise
            raise ValidationError(
                f"validation failed at step {self.state.at()}: {e}. The step is saved "
                f"in {path}: fix or remove the image in data.val_dir={val_dir} (or "
                f"set data.val_dir=null), then continue with resume={self.resume_dir}"
            ) from e
