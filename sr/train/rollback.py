"""What the trainer does on the divergence guard's verdicts (:mod:`sr.train.guard`): roll back to
the last good checkpoint with a lower learning rate and replay the batches from there
(:class:`Rollback`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from sr.loading.checkpoints import best_dir, checkpoint_step, read_best
from sr.train.best import BestCheckpoint
from sr.train.cluster import Cluster
from sr.train.guard import DivergenceError, DivergenceGuard
from sr.train.saving import Checkpoints
from sr.train.state import RunState
from sr.train.validation import ValidationError
from sr.train.window import LossWindow

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log


class Rollback:
    """The divergence guard's judgements of the run and the actions on them.

    Args:
        guard: the judge (:class:`sr.train.guard.DivergenceGuard`).
        state: the run's state (the step, the guard's checkpointed part, the steps saved).
        checkpoints: the run's checkpoints: a rollback restores one and saves it again as the
            newest.
        best: ``checkpoints/best``, kept on every accepted validation.
        window: the loss window the step fills (:class:`sr.train.window.LossWindow`).
        part: the way of training (``sr.train.parts.TrainingPart``): its own verdicts, advice
            and state to forget.
        writer: the run's summary writer (``train/rollbacks``, ``train/lr_scale``).
        cluster: the run's workers; with several, a verdict is agreed with a collective.
        reopen: ``reopen(path)`` opens the data stream again at the restored step, from the
            data position of the checkpoint ``path`` (:meth:`sr.train.feed.DataFeed.reopen`).
        train: the ``train`` node of the config (``steps``, ``lr``, ``max_to_keep``,
            ``guard_max_rollbacks``, ``guard_lr_factor``, ``init_from``).
    """

    def __init__(self, guard: DivergenceGuard, state: RunState, checkpoints: Checkpoints,
                 best: BestCheckpoint, window: LossWindow, part, writer, cluster: Cluster,
                 reopen: Callable[[str], None], train):  # fmt: skip
        self.guard, self.state, self.checkpoints, self.best = guard, state, checkpoints, best
        self.window, self.part, self.writer, self.cluster = window, part, writer, cluster
        self.reopen, self.train = reopen, train
        self.resume_dir, self.restore_dir = checkpoints.resume_dir, checkpoints.restore_dir

    def begin(self, step: int, loss) -> None:
        """After the run's first step (``step``, counted after it; ``loss`` its loss, a scalar
        tensor): the guard counts ``train.guard_from`` from the step the run started from and
        takes the loss of the weights it started from as the explosion rule's reference."""
        self.guard.begin(step - 1, float(loss))

    def resume(self) -> None:
        """After ``resume=`` restored a checkpoint: the resumed step was judged good when it was
        saved; the guard's references are the checkpoint's, its best PSNR the best record's."""
        guard, step = self.guard, self.state.at()
        guard.accepted_step = guard.pool_start = guard.validated_step = step
        guard.remember(self.state.guard.memory.numpy())
        psnr = self.best.resume(self.resume_dir)
        if psnr is not None:
            guard.best_psnr = psnr

    def measure_stage_start(self, validator, val_dir) -> None:
        """The GAN stage's start (``psnr_reference`` ``start``), for a fresh run from
        ``train.init_from`` with validation data: the validation PSNR (dB) of the weights it
        starts from, measured once before its first step (logged as step 0) with ``validator``
        (a :class:`sr.train.validation.Validator`; None without validation images) and kept in
        the guard's checkpointed memory; the validation rule judges against it. A stage from
        random weights takes its first validation instead (:meth:`DivergenceGuard.validation`).

        Raises:
            ValidationError: a validation image failed (nothing trained yet), naming
                ``data.val_dir`` (``val_dir``).
        """
        guard = self.guard
        if not (
            guard.reference_rule == "start"
            and guard.settings.enabled
            and validator is not None
            and self.train.get("init_from")
            and self.state.at() == 0
        ):
            return
        try:
            res = validator.evaluate(0, "val", " of the train.init_from weights")
        except ValueError as e:
            raise ValidationError(
                f"validation of the train.init_from weights failed: {e}. Fix or remove the "
                f"image in data.val_dir={val_dir} (or set data.val_dir=null)"
            ) from e
        guard.start_psnr = res["psnr"]
        log.info(
            "GAN stage: it starts at %.2f dB on the validation images; a validation more than "
            "train.guard_gan_val_drop=%g dB below that is a collapse",
            res["psnr"], guard.settings.stage_drop,
        )  # fmt: skip

    def judge_window(self) -> str | None:
        """Read the loss window (:class:`sr.train.window.LossWindow`) and judge it; the verdict
        (None: accepted) is the same on every worker (the loss is the global batch's)."""
        total, count, peak = self.window.read()
        step = self.state.at()
        return self.guard.window(step, total, count, peak) or self.part.judge(step)

    def judge_validation(self, res: dict) -> str | None:
        """Judge a validation result (its ``psnr``, dB, of the trained weights; only the chief
        validates, so with several workers the verdict is agreed with a collective); on an
        accepted one, keep ``checkpoints/best`` if it is the best so far."""
        # against the best so far, or for a GAN (which lowers PSNR on purpose) the stage's start
        verdict = self.guard.validation(self.state.at(), res["psnr"]) if res else None
        if self.cluster.several:
            verdict = verdict or ("validation collapse (on the chief)" if self.cluster.any(
                verdict is not None) else None)  # fmt: skip
        if verdict is None:
            self.best.keep(res)
        return verdict

    def targets(self) -> dict[int, str]:
        """The checkpoints a rollback may restore, by step: the rotation's (the last
        ``train.max_to_keep`` saved), and ``checkpoints/best`` when the rotation dropped every
        good one."""
        paths = {s: str(self.restore_dir / f"ckpt-{s}") for s in self.state.saved_steps}
        paths = dict(sorted(paths.items())[-int(self.train.max_to_keep) :])  # the rotation's
        record = read_best(self.resume_dir)
        if record is not None:  # the best, when the rotation dropped every good one
            paths.setdefault(
                int(record["step"]), str(best_dir(self.resume_dir) / record["checkpoint"])
            )
        return paths

    def rollback(self, reason: str, final: bool = False) -> int:
        """Restore the last good checkpoint (weights, optimizer and EMA, step, data position),
        scale the learning rate by ``train.guard_lr_factor``, delete the suspect checkpoints
        saved after it and save the restored state as the newest checkpoint (with the guard's
        new state, so that a resume keeps the lowered rate); log it (console, TensorBoard
        ``train/rollbacks`` and ``train/lr_scale``). Returns the step rolled back to. With
        ``final`` (a verdict on the run's last steps or its final validation) the run ends on
        that checkpoint, and the log says so and how to go on.

        Raises:
            DivergenceError: after ``train.guard_max_rollbacks`` rollbacks (the last good
                checkpoint is restored and saved as the newest first, its rate unchanged), or
                with no good checkpoint to go back to; names ``checkpoints/best``.
        """
        step, t = self.state.at(), self.train
        done = int(self.state.guard.rollbacks.numpy())
        paths = self.targets()
        target = self.guard.target(sorted(paths))
        give_up = done >= int(t.guard_max_rollbacks) or target is None
        if target is not None:
            scale = 1.0 if give_up else float(t.guard_lr_factor)
            self.restore_good(paths[target], target, scale)
        if give_up:
            raise self.give_up(reason, step, done, target)
        scale = float(self.state.guard.lr_scale.numpy())
        then = (
            f"the run ends on it, at step {target} of train.steps={t.steps}: resume="
            f"{self.resume_dir} trains on from there at the lowered rate"
            if final
            else f"the batches from step {target} are replayed"
        )
        log.warning(
            "divergence guard: %s. Rollback %d of train.guard_max_rollbacks=%d: restored "
            "%s (step %d), learning rate x%g (train.guard_lr_factor; now x%.3g of the "
            "schedule); %s",
            reason, done + 1, t.guard_max_rollbacks, Path(paths[target]).relative_to(
                self.resume_dir), target, t.guard_lr_factor, scale, then,
        )  # fmt: skip
        with self.writer.as_default(step=step):
            tf.summary.scalar("train/rollbacks", done + 1)
            tf.summary.scalar("train/lr_scale", scale)
            tf.summary.text("train/rollback", f"step {step}: {reason}; restored step {target}")
        return target

    def give_up(self, reason: str, step: int, done: int, target: int | None) -> DivergenceError:
        """The error that ends a run the guard cannot save: ``done`` rollbacks made, the
        divergence at ``step``, ``target`` the good step restored (None: none left)."""
        t = self.train
        best = tf.train.latest_checkpoint(str(best_dir(self.resume_dir)))
        why = (
            f"after {done} rollback(s) (train.guard_max_rollbacks={t.guard_max_rollbacks}); "
            f"the newest checkpoint is again the good one of step {target}"
            if target is not None
            else "and no checkpoint known to be good is left to roll back to"
        )
        advice = self.part.advice(reason) or (
            f"Start again with a lower train.lr (now {t.lr:g}), train.clip_norm or a longer "
            "train.lr_warmup_steps"
        )
        return DivergenceError(
            f"the run diverged at step {step} ({reason}) {why}; "
            + (f"the best weights are in {best}" if best else "no checkpoints/best yet")
            + f". {advice}",
            step,
            done,
            best,
        )

    def restore_good(self, path: str, target: int, scale: float) -> None:
        """Restore the checkpoint ``path`` (of step ``target``: the rotation's, or
        ``checkpoints/best``) and its data position, multiply the learning-rate factor by
        ``scale`` (counting a rollback when below 1), delete the checkpoints of the rotation
        saved after it and save the restored state as the newest."""
        state = self.state
        # the factor and the count go on from the run's, not from the (older) checkpoint's
        lr_scale = float(state.guard.lr_scale.numpy())
        rollbacks = int(state.guard.rollbacks.numpy())
        self.checkpoints.restore(path, elapsed=False)  # the time spent stays spent
        state.guard.lr_scale.assign(lr_scale * scale)
        state.guard.rollbacks.assign(rollbacks + (scale < 1))
        state.first_bad.assign(-1)
        self.window.read()  # forget the diverged steps' losses
        self.part.forget()
        self.guard.rolled_back(target)
        state.saved_steps = [s for s in state.saved_steps if s <= target]
        self.reopen(path)  # at the restored step, from its data position
        if self.checkpoints.chief:
            self.delete_checkpoints_after(target)
        self.checkpoints.save()

    def delete_checkpoints_after(self, target: int) -> None:
        """Delete the files of the rotation's checkpoints saved after step ``target`` (the
        diverging steps'); the save that follows makes ``ckpt-<target>`` the newest, which
        ``resume=`` and ``--checkpoint last`` then take."""
        for index in self.restore_dir.glob("ckpt-*.index"):
            prefix = index.with_suffix("")
            if checkpoint_step(str(prefix)) > target:
                for f in self.restore_dir.glob(prefix.name + ".*"):
                    f.unlink()
                log.info("divergence guard: deleted the suspect checkpoint %s", prefix)
