"""The divergence guard's judgement: is the run diverging? Pure host-side bookkeeping of the loss
of each log window and of the validation PSNR, with no TensorFlow; the trainer
(:mod:`sr.train.loop`) acts on a verdict by rolling back (:mod:`sr.train.rollback`).

Where the idea comes from: PaLM (Chowdhery et al. 2022, section 5.1) restarted training from a
checkpoint about 100 steps before a loss spike and skipped the batches around it; OPT (Zhang et
al. 2022, section 2.5) restarted from an earlier checkpoint with a lower learning rate when the
loss diverged. Here a spike or a validation collapse restores the last checkpoint known to be
good (weights, optimizer, EMA, data position), scales the learning rate by ``guard_lr_factor`` and
goes on; the batch stream is replayed exactly (``data.deterministic`` resume stays exact).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_WINDOW = 100  # steps: the shortest window whose mean loss is judged


class DivergenceError(RuntimeError):
    """The run diverged once more after ``train.guard_max_rollbacks`` rollbacks (exit code 4).

    Attributes:
        step: the step at which the last divergence was found.
        rollbacks: the rollbacks made in this run (over its resumes).
        best: path prefix of ``checkpoints/best`` (the best validated weights), or None.
    """

    def __init__(self, message: str, step: int, rollbacks: int, best: str | None):
        super().__init__(message)
        self.step, self.rollbacks, self.best = step, rollbacks, best


@dataclass(frozen=True)
class GuardSettings:
    """The ``train.guard*`` keys (defaults and ranges: ``sr.config.TrainConfig``)."""

    enabled: bool = True
    warmup: int = 1000  # guard_from: steps after the run's own first step
    loss_factor: float = 2.0
    step_factor: float = 5.0
    explode_factor: float = 100.0
    val_drop: float = 3.0  # dB
    stage_drop: float = 5.0  # dB, the GAN stage's margin below its start (guard_gan_val_drop)
    lr_factor: float = 0.5
    max_rollbacks: int = 3

    @classmethod
    def from_config(cls, t) -> GuardSettings:
        """From the ``train`` node of the config."""
        return cls(
            enabled=bool(t.guard),
            warmup=int(t.guard_from),
            loss_factor=float(t.guard_loss_factor),
            step_factor=float(t.guard_step_factor),
            explode_factor=float(t.guard_explode_factor),
            val_drop=float(t.guard_val_drop),
            stage_drop=float(t.get("guard_gan_val_drop", cls.stage_drop)),
            lr_factor=float(t.guard_lr_factor),
            max_rollbacks=int(t.guard_max_rollbacks),
        )


class DivergenceGuard:
    """Judges each log window's loss and each validation, and remembers the steps whose
    checkpoints are known to be good. Three rules, each with its own start:

    - An **explosion**, judged from the run's first window on: a log window (unpooled) whose
      mean loss exceeds ``explode_factor`` x the reference, the lowest of the loss of the run's
      own first step (the loss of the weights it started from, before any update) and of every
      window mean so far (a resumed run's included, :meth:`remember`). A loss that grows by
      orders of magnitude is no warm-up noise, so ``train.guard_from`` does not delay it.
    - A **validation collapse**, judged as soon as a best exists (a resumed run's best from
      ``checkpoints/best``): a validation PSNR (of the trained weights, dB) more than
      ``val_drop`` dB below the best so far, or NaN. ``val_drop`` is the margin for noise: a
      smaller drop, early or late, is accepted. With ``reference="start"`` (the GAN stage,
      which lowers PSNR on purpose, by a dB or two) the reference is instead the stage's
      start (:attr:`start_psnr`: the PSNR of its ``train.init_from`` weights, measured before
      its first step, else its first validation), and the margin ``stage_drop``.
    - A **loss spike**, judged from ``warmup`` (``train.guard_from``) steps after the run's own
      first step (:meth:`begin`; for a resumed run, the step it resumed at): a window (the
      ``train.log_every`` steps since the last timing line, or several, to at least
      :data:`MIN_WINDOW` steps) whose mean loss exceeds ``loss_factor`` x the lowest window mean
      so far, or a step whose loss exceeds ``step_factor`` x the mean of the previous accepted
      window, or a non-finite loss (before then, the trainer's non-finite check stops the run).

    The rollback target of a verdict is the newest checkpoint at or before the last step known
    good: for an explosion, a step spike or a non-finite loss, the end of the last window that
    passed; for a spike of a pooled mean, where the pooled steps begin; for a collapse, the last
    accepted validation (:meth:`target`).
    """

    def __init__(self, settings: GuardSettings, reference: str = "best"):
        self.settings = settings
        self.reference_rule = reference  # the validation rule's reference: "best" or "start"
        self.start_psnr = -math.inf  # the stage's start (reference "start"), dB; -inf: unknown
        self.origin = 0  # the step the run (this process) started from
        self.reference = math.inf  # the first step's loss (the explosion rule's, with the means)
        self.lowest_mean = math.inf
        self.last_mean: float | None = None  # the previous accepted window's mean loss
        self.best_psnr = -math.inf
        self.accepted_step = 0  # the end of the last window that passed the immediate checks
        self.pool_start = 0  # where the steps pooled for the mean check begin
        self.limit = 0  # the last step known good when the latest verdict was given
        self.validated_step = 0  # the last validation that did not collapse
        self._pool = (0.0, 0, 0.0)  # (sum, count, largest) of the losses not yet judged

    def begin(self, origin: int, loss: float) -> None:
        """The run's own first step: ``origin`` is the step it started from (0, or the step a
        resumed run resumed at) and ``loss`` that step's loss (of the weights it started from).
        ``train.guard_from`` counts from ``origin``; ``loss`` joins the explosion reference."""
        self.origin = origin
        self.accepted_step = self.pool_start = self.validated_step = origin
        if math.isfinite(loss) and loss > 0:
            self.reference = min(self.reference, loss)

    def window(self, step: int, total: float, count: int, peak: float) -> str | None:
        """Judge the loss of the steps up to ``step`` since the last call: ``total`` (the sum of
        their ``count`` finite losses) and ``peak`` (the largest). The explosion rule judges
        this window alone; for the loss-spike rules, log windows shorter than
        :data:`MIN_WINDOW` steps are pooled until they reach it, so that the mean is not one
        batch's noise, while a step spike and a non-finite loss are judged at once.

        Returns:
            None if accepted (or pooled), else the reason (for the log), e.g. ``"loss spike:
            the mean loss of the 500 steps to step 4000 is 0.91, above
            train.guard_loss_factor=2 x the lowest mean 0.018"``.
        """
        self.limit = self.accepted_step  # for a verdict on the steps since the last window
        verdict = self._explosion(step, total, count)
        if verdict is not None:
            return verdict
        s = self.settings
        judged = s.enabled and step >= self.origin + s.warmup
        self._pool = (self._pool[0] + total, self._pool[1] + count, max(self._pool[2], peak))
        total, count, peak = self._pool
        mean = total / count if count else math.nan
        if judged and not (math.isfinite(total) and math.isfinite(peak)):
            return f"non-finite loss in the steps to step {step}"
        if judged and self.last_mean is not None and peak > s.step_factor * self.last_mean:
            return (
                f"loss spike: a step before step {step} has loss {peak:.4g}, above "
                f"train.guard_step_factor={s.step_factor:g} x the previous mean "
                f"{self.last_mean:.4g}"
            )
        if count < MIN_WINDOW:
            self.accepted_step = step
            return None
        self.limit = self.pool_start  # for a verdict on the pool's mean
        if judged and mean > s.loss_factor * self.lowest_mean:
            return (
                f"loss spike: the mean loss of the {count} steps to step {step} is {mean:.4g}, "
                f"above train.guard_loss_factor={s.loss_factor:g} x the lowest mean "
                f"{self.lowest_mean:.4g}"
            )
        self._pool = (0.0, 0, 0.0)
        self.lowest_mean, self.last_mean = min(self.lowest_mean, mean), mean
        self.accepted_step = self.pool_start = step
        return None

    def _explosion(self, step: int, total: float, count: int) -> str | None:
        """The explosion rule on one log window (``total`` of ``count`` finite losses); None
        if it passes (or there is no reference yet). A window with no finite loss is left to
        the other rules and to the non-finite check."""
        s, ref = self.settings, min(self.reference, self.lowest_mean)
        if not (s.enabled and count and 0 < ref < math.inf):  # a loss that can be <= 0: off
            return None
        mean = total / count
        if not (math.isfinite(mean) and mean <= s.explode_factor * ref):  # inf and NaN too
            return (
                f"loss explosion: the mean loss of the {count} steps to step {step} is "
                f"{mean:.4g}, above train.guard_explode_factor={s.explode_factor:g} x the "
                f"reference {ref:.4g} (the lowest of the run's first step and its window means)"
            )
        return None

    def validation(self, step: int, psnr: float) -> str | None:
        """Judge the validation PSNR (dB, trained weights) at ``step``; None if accepted. Judged
        whenever a reference exists (the best so far; with ``reference="start"`` the stage's
        start, else taken from this first validation), at any step."""
        if self.reference_rule == "start":
            return self._stage_validation(step, psnr)
        s = self.settings
        self.limit = self.validated_step  # a verdict's rollback: the last accepted validation
        if self._collapsed(psnr, self.best_psnr, s.val_drop):
            return (
                f"validation collapse: PSNR {psnr:.2f} dB at step {step} is more than "
                f"train.guard_val_drop={s.val_drop:g} dB below the best so far, "
                f"{self.best_psnr:.2f} dB"
            )
        if math.isfinite(psnr):
            self.best_psnr = max(self.best_psnr, psnr)
        self.validated_step = step
        return None

    def _stage_validation(self, step: int, psnr: float) -> str | None:
        """The GAN stage's rule: a PSNR more than ``stage_drop`` dB below :attr:`start_psnr`,
        or NaN, is a collapse; a stage whose start was not measured takes its first finite
        validation as the start."""
        s = self.settings
        self.limit = self.validated_step  # a verdict's rollback: the last accepted validation
        if self._collapsed(psnr, self.start_psnr, s.stage_drop):
            return (
                f"validation collapse of the GAN stage: PSNR {psnr:.2f} dB at step {step} is "
                f"more than train.guard_gan_val_drop={s.stage_drop:g} dB below the stage's "
                f"start, {self.start_psnr:.2f} dB (a GAN trades a dB or two of PSNR for "
                "texture, not more)"
            )
        if not math.isfinite(self.start_psnr) and math.isfinite(psnr):
            self.start_psnr = psnr
        self.validated_step = step
        return None

    def _collapsed(self, psnr: float, reference: float, drop: float) -> bool:
        """The collapse rule of both references: judged once ``reference`` (dB) is known (and
        the guard on), a ``psnr`` (dB) more than ``drop`` dB below it, or NaN, is a collapse."""
        judged = self.settings.enabled and math.isfinite(reference)
        return judged and not (psnr >= reference - drop)  # NaN included

    def memory(self) -> list[float]:
        """The references a resumed run judges against: ``[lowest window mean, last window mean
        (NaN: none), the validation rule's reference]`` (checkpointed, ``make_guard_state``): the
        best validation PSNR, or with ``reference="start"`` the stage's start PSNR."""
        last = math.nan if self.last_mean is None else self.last_mean
        psnr = self.start_psnr if self.reference_rule == "start" else self.best_psnr
        return [self.lowest_mean, last, psnr]

    def remember(self, values) -> None:
        """Take the references of :meth:`memory` back (after a resume)."""
        lowest, last, psnr = (float(v) for v in values)
        self.lowest_mean = lowest
        if self.reference_rule == "start":
            self.start_psnr = psnr
        else:
            self.best_psnr = psnr
        self.last_mean = None if math.isnan(last) else last

    def target(self, on_disk: list[int]) -> int | None:
        """The step to roll back to after a verdict: the newest step of ``on_disk`` (the steps
        whose checkpoints exist) not after the last step known good when the verdict was given
        (the end of the last accepted window for a step spike; the start of the pooled steps
        for a spike of their mean; the last accepted validation for a collapse); None if there
        is none."""
        good = [s for s in on_disk if s <= self.limit]
        return max(good) if good else None

    def rolled_back(self, step: int) -> None:
        """After restoring the checkpoint of ``step``: the windows and validations after it are
        forgotten (their steps will be trained again)."""
        self._pool = (0.0, 0, 0.0)
        self.accepted_step = min(self.accepted_step, step)
        self.pool_start = min(self.pool_start, step)
        self.validated_step = min(self.validated_step, step)
