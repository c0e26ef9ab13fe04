"""Per-step timing: the split between waiting for input and computing.

Over each logging window of n steps: ``step_time_ms`` = window wall time / n (the host blocks on
the loss at the window's end, so queued device work is included); ``data_wait_ms`` = time spent
inside ``next(iterator)`` / n (the training loop blocked on the input pipeline); ``patches/s`` =
n B / window wall time.
"""

from __future__ import annotations

import datetime
import time
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
    """Accumulates data-wait and wall time per logging window and over the whole run."""

    batch_size: int
    start: float = field(default_factory=time.perf_counter)
    _window_start: float = field(default=0.0, init=False)
    _window_wait: float = field(default=0.0, init=False)
    _window_steps: int = field(default=0, init=False)
    total_steps: int = field(default=0, init=False)
    total_wall: float = field(default=0.0, init=False)
    total_wait: float = field(default=0.0, init=False)

    def __post_init__(self):
        self._window_start = time.perf_counter()

    def add_wait(self, seconds: float) -> None:
        self._window_wait += seconds
        self._window_steps += 1

    def close_window(self) -> WindowStats | None:
        """End the window (call after blocking on the step's result); None if it was empty."""
        now = time.perf_counter()
        n, wall, wait = self._window_steps, now - self._window_start, self._window_wait
        self._window_start, self._window_wait, self._window_steps = now, 0.0, 0
        if n == 0:
            return None
        self.total_steps += n
        self.total_wall += wall
        self.total_wait += wait
        return WindowStats(n, 1e3 * wall / n, 1e3 * wait / n, n * self.batch_size / wall)

    def resume(self) -> None:
        """Start a new window, leaving out what ran since the last close (validation, saving)."""
        self._window_start = time.perf_counter()
        self._window_wait, self._window_steps = 0.0, 0

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
