"""Per-step timing: the split between waiting for input and computing.

Over each logging window of n steps: ``step_time_ms`` = window wall time / n (the host blocks on
the loss at the window's end, so queued device work is included); ``data_wait_ms`` = the time the
steps were blocked taking their batch from the input pipeline / n (the ``waited`` clock: measured
inside the step's function with one replica, ``sr.train.step.TrainStep.take_and_train``, around
the host's take with several); ``patches/s`` = n B / window wall time.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class WindowStats:
    steps: int
    step_time_ms: float
    data_wait_ms: float
    patches_per_sec: float

    @property
    def data_wait_share(self) -> float:
        """Data wait as a fraction of step time, in [0, 1]."""
        return self.data_wait_ms / self.step_time_ms if self.step_time_ms > 0 else 0.0


@dataclass
class StepTimer:
    """Accumulates data-wait and wall time per logging window and over the whole run.

    Args:
        batch_size: the global batch (patches per step).
        waited: the seconds the steps have waited for their batches so far, summed since
            any earlier point (a window takes the difference); read when a window starts and
            closes, so a clock on the device is read only then.
        start: the run's start (``time.perf_counter``).
    """

    batch_size: int
    waited: Callable[[], float] = lambda: 0.0
    start: float = field(default_factory=time.perf_counter)
    _window_start: float = field(default=0.0, init=False)
    _wait_mark: float = field(default=0.0, init=False)
    _window_steps: int = field(default=0, init=False)
    total_steps: int = field(default=0, init=False)
    total_wall: float = field(default=0.0, init=False)
    total_wait: float = field(default=0.0, init=False)

    def __post_init__(self):
        self.resume()

    def step_done(self) -> None:
        """Count a step in the window."""
        self._window_steps += 1

    def close_window(self) -> WindowStats | None:
        """End the window (call after blocking on the step's result); None if it was empty."""
        now, waited = time.perf_counter(), self.waited()
        n, wall, wait = self._window_steps, now - self._window_start, waited - self._wait_mark
        self._window_start, self._wait_mark, self._window_steps = now, waited, 0
        if n == 0:
            return None
        self.total_steps += n
        self.total_wall += wall
        self.total_wait += wait
        return WindowStats(n, 1e3 * wall / n, 1e3 * wait / n, n * self.batch_size / wall)

    def resume(self) -> None:
        """Start a new window, leaving out what ran since the last close (validation, saving)."""
        self._window_start, self._wait_mark = time.perf_counter(), self.waited()
        self._window_steps = 0

    def elapsed(self) -> str:
        """Wall time since start as ``H:MM:SS.ffffff``."""
        return str(datetime.timedelta(seconds=time.perf_counter() - self.start))

    def summary(self) -> WindowStats | None:
        """Means over every closed window of the run."""
        if self.total_steps == 0:
            return None
        n = self.total_steps
        return WindowStats(
            n,
            1e3 * self.total_wall / n,
            1e3 * self.total_wait / n,
            n * self.batch_size / self.total_wall,
        )
