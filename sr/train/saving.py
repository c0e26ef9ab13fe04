"""The checkpoint policy of the :class:`sr.train.loop.Trainer`: nothing non-finite is saved, a
failing validation loses no step, and ``resume=`` restores the weights, the optimizer, the step,
the time budget used and the data position."""

from __future__ import annotations

import logging
from pathlib import Path

import tensorflow as tf

from sr.core.errors import ConfigError
from sr.core.runfiles import RunFileError, check_checkpoint, describe, latest_checkpoint
from sr.loading.checkpoints import (
    checkpoint_step,
    has_averages,
    has_part,
    make_checkpoint,
    resume_candidates,
)
from sr.train import distribute
from sr.train.checkpoint import identity_json, read_data_state, stream_changes
from sr.train.schedule import lr_at
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


class CheckpointPolicy:
    """When and what the Trainer saves and restores; mixed into it, whose ``__init__`` sets the
    attributes used here (``cfg``, ``model``, ``optimizer``, ``schedule``, ``step``,
    ``first_bad``, ``skipped``, ``elapsed``, ``checkpoint``, ``manager``, ``data_manager``,
    ``data_state``, ``loader``, ``writer``, ``run_dir``, ``resume_dir``, ``restore_dir``,
    ``checkpoint_dir``, ``chief``, ``ema``, ``skip_nonfinite``)."""

    def restore(self) -> int:
        """Restore the newest readable checkpoint of ``run_dir`` (for ``resume=``); returns its
        step. A checkpoint that cannot be read (truncated, damaged) is skipped with a warning
        naming its files, for the one before it.

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
                self.restore_state(path, elapsed=True)
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
        log.info("resumed from %s at step %d", path, int(self.step.numpy()))
        if self.budget is not None:
            log.info(
                "time budget: %.2f of train.max_minutes=%s minutes used before this resume",
                float(self.elapsed.numpy()) / 60,
                self.cfg.train.max_minutes,
            )
        self.restore_stream(self.data_checkpoint(path))
        step = int(self.step.numpy())
        self.saved_steps = [checkpoint_step(p) for p in candidates if checkpoint_step(p) <= step]
        # the resumed step was judged good when it was saved
        self.guard.accepted_step = self.guard.pool_start = self.guard.validated_step = step
        self.guard.remember(self.guard_state.memory.numpy())
        self.restore_best_record()
        return step

    def restore_state(self, path: str, elapsed: bool) -> None:
        """Restore the weights, the optimizer (its averages too), the step and the guard's state
        of the checkpoint ``path`` (and the time budget used, with ``elapsed``).

        Raises:
            ConfigError: if ``train.ema`` is set in one of the run and this resume only.
            RunFileError: if the checkpoint is truncated or corrupt (``sr.core.runfiles``).
            tf.errors.OpError, ValueError: if the checkpoint holds another structure.
        """
        check_checkpoint(path, "resume= goes on from the checkpoint before it, if one is whole")
        if has_averages(path) != (self.ema is not None):  # the optimizer's slots would not match
            saved = "with" if has_averages(path) else "without"
            raise ConfigError(
                f"resume={self.resume_dir}: {path} was trained {saved} train.ema and this run "
                f"has train.ema={self.cfg.train.get('ema')}; resume with the run's own train.ema"
            )
        guard = self.guard_state if has_part(path, "guard") else None  # older checkpoints: none
        make_checkpoint(
            self.model,
            self.optimizer,
            self.step,
            elapsed=self.elapsed if elapsed else None,
            guard=guard,
            extra=self.part.checkpoint_parts(),
        ).restore(path).expect_partial().assert_existing_objects_matched()

    def data_checkpoint(self, path: str) -> str | None:
        """Where the data position of the checkpoint ``path`` is: the checkpoint itself on the
        chief; a worker's own data checkpoint of the same name (None if it has none)."""
        if self.chief:
            return path
        mine = self.run_dir / "data" / Path(path).name
        return str(mine) if Path(f"{mine}.index").is_file() else None

    def restore_stream(self, path: str | None) -> None:
        """Continue the checkpoint's batch stream if this run's data would make the same one:
        adopt its seed when ``data.seed`` is null, compare the stream identities, and (for a
        source whose iterator is checkpointed) restore the iterator from ``stream_checkpoint``
        in :meth:`data_iterator`. Otherwise log which keys differ and go on with a new stream
        (the resume is then not exact)."""
        saved = read_data_state(path) if path else None
        step = int(self.step.numpy())
        if saved is None:
            log.warning(
                "%s holds no data position (an older checkpoint, or this worker's is missing): "
                "training continues on a new batch stream from step %d",
                path or f"{self.run_dir / 'data'} (this worker's data checkpoints)",
                step,
            )
        else:
            seed, identity = saved
            if self.cfg.data.seed is None:
                self.loader.stream_seed = seed
            diff = stream_changes(identity, self.loader.stream_identity())
            if diff:
                log.warning(
                    "the batch stream of this config differs from the checkpoint's (%s): "
                    "training continues on a new stream from step %d, so this resume is not "
                    "exact",
                    ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in diff.items()),
                    step,
                )
            else:
                self.stream_checkpoint = path
                log.info("data: continuing the checkpoint's batch stream at batch %d", step)
        self.data_state.seed.assign(self.loader.stream_seed)
        self.data_state.stream.assign(identity_json(self.loader.stream_identity()))

    def nonfinite_error(self, step: int, what: str) -> NonFiniteError:
        """The error for a non-finite state found at ``step``: names the step, its learning rate,
        the last (finite) checkpoint on disk and how to resume from it."""
        lr = lr_at(self.schedule, max(0, step - 1))
        last = latest_checkpoint(self.restore_dir)
        if last:
            nxt = (
                f"the last good checkpoint is {last}; resume from it with "
                f"resume={self.resume_dir} and a lower learning rate, e.g. "
                f"train.lr={self.cfg.train.lr / 10:.3g}"
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

    def check_finite(self, weights: bool = False, window: bool = False) -> None:
        """Host side of the non-finite check: read the step's device-side record (one scalar).

        Args:
            weights: also check that every model weight and optimizer slot is finite (one
                reduction per variable; done before every save).
            window: a log line's check; with ``train.on_nonfinite=skip`` it logs the steps
                skipped since the last one and stops if every step since then was skipped.

        Raises:
            NonFiniteError: naming the step, its learning rate and the last good checkpoint.
        """
        step = int(self.step.numpy())
        if self.skip_nonfinite:
            if window:
                self._check_skipped(step)
        else:
            bad = int(self.first_bad.numpy())
            if bad >= 0:
                raise self.nonfinite_error(bad, "non-finite loss (NaN or inf)")
        checked = [*self.model.weights, *self.optimizer.variables, *self.part.variables()]
        if weights and not bool(all_finite(checked)):
            raise self.nonfinite_error(step, "non-finite weights")

    def _check_skipped(self, step: int) -> None:
        """``on_nonfinite=skip``: log the steps skipped since the last log line; stop if every
        one of them was."""
        skipped = int(self.skipped.numpy())
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
            raise self.nonfinite_error(
                step, f"every one of the last {new} steps was non-finite and skipped"
            )

    def save(self) -> str:
        """Save a checkpoint of the current step (``ckpt-<step>``), once the state is known to be
        finite (:meth:`check_finite` with ``weights=True``).

        Returns:
            The checkpoint's path prefix.

        Raises:
            NonFiniteError: if the loss since the last check or any weight is NaN or inf; nothing
                is written, so the checkpoints on disk stay the finite ones.
        """
        self.check_finite(weights=True)
        if self._clock is not None:
            self.elapsed.assign(self.elapsed_seconds())
        self.guard_state.memory.assign(self.guard.memory())
        path = self.manager.save(checkpoint_number=int(self.step.numpy()))
        self.saved_steps.append(int(self.step.numpy()))
        distribute.discard(self.checkpoint_dir)  # a non-chief worker's copy is temporary
        if self.data_manager is not None:
            self.data_manager.save(checkpoint_number=int(self.step.numpy()))
        if self.chief:
            log.info("checkpoint %s", path)
        return path

    def validate_safely(self, saved: bool) -> dict:
        """:meth:`validate`, with the trained steps safe whatever happens to it.

        Args:
            saved: the current step's checkpoint is already written; if not, a failing
                validation writes it before the error propagates.

        Raises:
            NonFiniteError: if the state is non-finite (not validated, not saved).
            ValidationError: if a validation image cannot be read or is too small (names the
                file, the saved checkpoint and ``resume=``).
        """
        self.check_finite()
        try:
            return self.validate()
        except Exception as e:
            path = self.manager.latest_checkpoint if saved else self.save()
            if not isinstance(e, ValueError):
                log.error(
                    "validation failed at step %d; the step is saved in %s",
                    int(self.step.numpy()),
                    path,
                )
                raise
            raise ValidationError(
                f"validation failed at step {int(self.step.numpy())}: {e}. The step is saved "
                f"in {path}: fix or remove the image in data.val_dir={self.loader.val_dir} (or "
                f"set data.val_dir=null), then continue with resume={self.resume_dir}"
            ) from e
