"""What the :class:`sr.train.loop.Trainer` does on the divergence guard's verdicts
(:mod:`sr.train.guard`): roll back to the last good checkpoint with a lower learning rate, and
keep ``checkpoints/best`` (the best validated checkpoint) outside the rotation."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import tensorflow as tf

from sr.loading.checkpoints import BEST_RECORD, best_dir, checkpoint_step, read_best
from sr.train import distribute
from sr.train.best import PSNR, BestRule
from sr.train.guard import DivergenceError
from sr.train.validation import ValidationError

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log


class GuardPolicy:
    """The divergence guard's actions and the best checkpoint; mixed into the Trainer, whose
    ``__init__`` sets the attributes used here (``cfg``, ``guard``, ``guard_state``,
    ``window``, ``manager``, ``saved_steps``, ``best_manager``, ``restore_dir``, ``run_dir``,
    ``chief``, ``writer``, ``first_bad``, ``ema``, ``step``, ``resume_dir``) and whose
    :class:`sr.train.saving.CheckpointPolicy` gives ``restore_state``, ``data_checkpoint``,
    ``check_finite`` and ``save``, and ``data_iterator``."""

    def guard_begin(self, step: int, loss) -> None:
        """After the run's first step (``step``, counted after it; ``loss`` its loss, a scalar
        tensor): the guard counts ``train.guard_from`` from the step the run started from and
        takes the loss of the weights it started from as the explosion rule's reference."""
        self.guard.begin(step - 1, float(loss))

    def measure_stage_start(self) -> None:
        """The GAN stage's start (``psnr_reference`` ``start``), for a fresh run from
        ``train.init_from`` with validation data: the validation PSNR (dB) of the weights it
        starts from, measured once before its first step (logged as step 0) and kept in the
        guard's checkpointed memory; the validation rule judges against it. A stage from random
        weights takes its first validation instead (:meth:`DivergenceGuard.validation`).

        Raises:
            ValidationError: a validation image failed (nothing trained yet).
        """
        guard = self.guard
        if not (
            guard.reference_rule == "start"
            and guard.settings.enabled
            and self.val_files
            and self.cfg.train.get("init_from")
            and int(self.step.numpy()) == 0
        ):
            return
        try:
            res = self.validator.evaluate(0, "val", " of the train.init_from weights")
        except ValueError as e:
            raise ValidationError(
                f"validation of the train.init_from weights failed: {e}. Fix or remove the "
                f"image in data.val_dir={self.loader.val_dir} (or set data.val_dir=null)"
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
        step = int(self.step.numpy())
        return self.guard.window(step, total, count, peak) or self.part.judge(step)

    def judge_validation(self, res: dict, cluster: bool) -> str | None:
        """Judge a validation result (its ``psnr``, dB, of the trained weights; only the chief
        validates, so with several workers the verdict is agreed with a collective); on an
        accepted one, keep ``checkpoints/best`` if it is the best so far."""
        # against the best so far, or for a GAN (which lowers PSNR on purpose) the stage's start
        verdict = self.guard.validation(int(self.step.numpy()), res["psnr"]) if res else None
        if cluster:
            verdict = verdict or ("validation collapse (on the chief)" if self._any_worker(
                verdict is not None) else None)  # fmt: skip
        if verdict is None:
            self.keep_best(res, cluster)
        return verdict

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
        step, t = int(self.step.numpy()), self.cfg.train
        done = int(self.guard_state.rollbacks.numpy())
        paths = {s: str(self.restore_dir / f"ckpt-{s}") for s in self.saved_steps}
        paths = dict(sorted(paths.items())[-int(t.max_to_keep) :])  # the rotation's
        record = read_best(self.resume_dir)
        if record is not None:  # the best, when the rotation dropped every good one
            paths.setdefault(
                int(record["step"]), str(best_dir(self.resume_dir) / record["checkpoint"])
            )
        target = self.guard.target(sorted(paths))
        give_up = done >= int(t.guard_max_rollbacks) or target is None
        if target is not None:
            scale = 1.0 if give_up else float(t.guard_lr_factor)
            self.restore_good(paths[target], target, scale)
        if give_up:
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
            raise DivergenceError(
                f"the run diverged at step {step} ({reason}) {why}; "
                + (f"the best weights are in {best}" if best else "no checkpoints/best yet")
                + f". {advice}",
                step,
                done,
                best,
            )
        scale = float(self.guard_state.lr_scale.numpy())
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

    def restore_good(self, path: str, target: int, scale: float) -> None:
        """Restore the checkpoint ``path`` (of step ``target``: the rotation's, or
        ``checkpoints/best``) and its data position, multiply the learning-rate factor by
        ``scale`` (counting a rollback when below 1), delete the checkpoints of the rotation
        saved after it and save the restored state as the newest."""
        # the factor and the count go on from the run's, not from the (older) checkpoint's
        lr_scale = float(self.guard_state.lr_scale.numpy())
        rollbacks = int(self.guard_state.rollbacks.numpy())
        self.restore_state(path, elapsed=False)  # the time spent stays spent
        self.guard_state.lr_scale.assign(lr_scale * scale)
        self.guard_state.rollbacks.assign(rollbacks + (scale < 1))
        self.first_bad.assign(-1)
        self.window.read()  # forget the diverged steps' losses
        self.part.forget()
        self.guard.rolled_back(target)
        self.saved_steps = [s for s in self.saved_steps if s <= target]
        self.stream_checkpoint = self.data_checkpoint(path)
        self.iterator = self.take_batch = None
        self.iterator = self.data_iterator()  # at the restored step, from its data position
        if self.chief:
            self.delete_checkpoints_after(target)
        self.save()

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

    def keep_best(self, res: dict, cluster: bool) -> None:
        """Save ``checkpoints/best`` when this validation is the best so far by the part's rule
        (``self.part.best``, a ``sr.train.best.BestRule``: the highest PSNR, or the lowest NIQE; of
        the averaged weights with ``train.ema``, as evaluate.py scores by default), with
        ``best.json`` beside it; every worker saves (a collective), the chief keeps it."""
        rule = self.part.best
        metric = rule.monitor
        key = f"ema_{metric}" if self.ema is not None else metric
        value = res.get(key, math.nan) if res else math.nan
        score = rule.score(value)  # higher is better
        better = score > self.best_score  # False for NaN
        if cluster:
            better = self._any_worker(better)
        if not better:
            return
        self.check_finite(weights=True)
        step = int(self.step.numpy())
        path = self.best_manager.save(checkpoint_number=step)
        distribute.discard(self.best_manager.directory)
        if not self.chief:
            return
        self.best_score = score
        psnr_key = "ema_psnr" if self.ema is not None else "psnr"
        record = {
            "step": step,
            "metric": metric,
            "mode": rule.mode,
            metric: value,
            "psnr": res[psnr_key],
            "weights": "ema" if self.ema is not None else "live",
            "live_psnr": res["psnr"],
            "checkpoint": Path(path).name,
        }
        tmp = Path(self.best_manager.directory) / (BEST_RECORD + ".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(Path(self.best_manager.directory) / BEST_RECORD)  # atomic
        unit = " dB" if metric == "psnr" else ""
        log.info("best checkpoint so far: %s (%s %.3f%s, %s weights)", path, metric.upper(),
                 value, unit, record["weights"])  # fmt: skip

    def restore_best_record(self) -> None:
        """On a resume: the best score so far (``checkpoints/best/best.json``), so that only a
        better validation replaces ``checkpoints/best``, and the guard's reference."""
        record = read_best(self.resume_dir)
        if record is not None:
            metric = record.get("metric", "psnr")  # runs saved before GAN runs: PSNR
            value = float(record.get(metric, record["psnr"]))
            # the record's own rule (saved since the mode was), else the part's of its metric
            mode = record.get("mode") or (self.part.best.mode if metric == self.part.best.monitor
                                          else PSNR.mode)  # fmt: skip
            self.best_score = BestRule(metric, mode).score(value)
            self.guard.best_psnr = float(record.get("live_psnr", record["psnr"]))
