"""The time budget of a run (``train.max_minutes``): its clock, which a resumed run continues, and
the fraction used that drives the learning-rate schedule (:class:`sr.train.schedule.
BudgetSchedule`)."""

from __future__ import annotations

import logging
import math
import time

import tensorflow as tf

from sr.train.cluster import Cluster

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log


class TimeBudget:
    """The clock of the time budget.

    Args:
        minutes: ``train.max_minutes`` as configured (None or 0: no budget); logged as given.
        elapsed: float64 variable, the seconds used before this process's clock started
            (checkpointed: :attr:`sr.train.state.RunState.elapsed`).
        progress: float32 variable, set to ``min(1, elapsed / budget)`` before each step with a
            budget (:attr:`sr.train.state.RunState.progress`).

    The clock counts wall time inside the training loop (steps, saves and validations in it),
    summed over the pieces of a resumed run; start-up, the first step of each process (it
    traces and compiles the step function) and the time between a stop and its resume do not
    count.
    """

    def __init__(self, minutes, elapsed: tf.Variable, progress: tf.Variable):
        self.minutes = minutes
        self.seconds = 60.0 * minutes if minutes else None  # None: no budget
        self.elapsed, self.progress = elapsed, progress
        self._clock: tuple[float, float] | None = None  # (perf_counter at start, elapsed then)

    def start(self) -> None:
        """Start the clock (the loop's start), going on from :attr:`elapsed`."""
        self._clock = (time.perf_counter(), float(self.elapsed.numpy()))
        if self.seconds is not None:
            log.info(
                "time budget %s minutes (%.2f used): the LR schedule runs over it, at "
                "max(elapsed / budget, step / train.steps)",
                self.minutes,
                self._clock[1] / 60,
            )

    def restart_after_first_step(self) -> None:
        """The first step of a process traces and compiles the step function and fills the input
        pipeline: start-up, not training. Charged to the budget, it ate the warm-up of a short
        one (docs/results.md: 0.5 dB lost at a 4.875-minute budget); the budget's clock starts
        after it."""
        if self.seconds is not None:
            log.info(
                "first step (tracing, compiling, filling the input pipeline): "
                "%.1f s, not charged to the time budget",
                time.perf_counter() - self._clock[0],
            )
        self._clock = (time.perf_counter(), self._clock[1])

    def elapsed_seconds(self) -> float:
        """Seconds of the time budget used (see the class); :attr:`elapsed` before the clock
        starts."""
        if self._clock is None:
            return float(self.elapsed.numpy())
        start, before = self._clock
        return before + time.perf_counter() - start

    def record(self) -> None:
        """Write the seconds used into :attr:`elapsed` (before a save), once the clock runs."""
        if self._clock is not None:
            self.elapsed.assign(self.elapsed_seconds())

    def used_up(self, cluster: Cluster) -> bool:
        """Whether the budget is used up (on the slowest worker's clock, a collective with
        several workers); sets :attr:`progress`. False without a budget."""
        budget = self.seconds if self.seconds is not None else math.inf
        elapsed = self.elapsed_seconds()
        if cluster.several and self.seconds is not None:  # one clock: the slowest's
            elapsed = cluster.max(elapsed)
        if self.seconds is not None:
            self.progress.assign(min(1.0, elapsed / budget))
        return elapsed > budget
