"""sr.train.timing.StepTimer's arithmetic on a fake clock, and the wall-time budget of the
training loop (``train.max_minutes``) in a real in-process run."""

from __future__ import annotations

import logging
import re
import time
from types import SimpleNamespace

import pytest

from sr.train import timing
from sr.train.timing import StepTimer, WindowStats

BATCH = 16


class FakeClock:
    """``time.perf_counter`` that moves only when told; binary fractions keep sums exact."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=fake))
    return fake


class Waited:
    """The loop's data-wait clock (``Trainer.waited``): seconds waited so far."""

    def __init__(self):
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


def run_steps(timer: StepTimer, clock: FakeClock, n: int, wait: float, compute: float) -> None:
    """n steps, each waiting ``wait`` s for its batch, then computing for ``compute`` s."""
    for _ in range(n):
        clock.now += wait
        timer.waited.seconds += wait
        clock.now += compute
        timer.step_done()


def test_window_means_wait_share_and_patches_per_second(clock):
    timer = StepTimer(BATCH, waited=Waited(), start=clock())
    run_steps(timer, clock, 4, wait=0.03125, compute=0.09375)  # 0.125 s a step
    stats = timer.close_window()
    assert stats == WindowStats(
        steps=4, step_time_ms=125.0, data_wait_ms=31.25, patches_per_sec=4 * BATCH / 0.5
    )
    assert stats.data_wait_share == 0.25
    assert timer.elapsed() == "0:00:00.500000"


def test_summary_is_the_mean_over_windows_weighted_by_steps(clock):
    timer = StepTimer(BATCH, waited=Waited(), start=clock())
    run_steps(timer, clock, 4, wait=0.0, compute=0.125)  # 0.5 s, no wait
    first = timer.close_window()
    run_steps(timer, clock, 4, wait=0.125, compute=0.25)  # 1.5 s, 0.5 s of it waiting
    second = timer.close_window()
    assert (first.step_time_ms, first.data_wait_share) == (125.0, 0.0)
    assert (second.step_time_ms, second.data_wait_ms) == (375.0, 125.0)
    # 8 steps in 2 s, 0.5 s of wait: not the mean of the two windows' shares (0 and 1/3)
    assert timer.summary() == WindowStats(
        steps=8, step_time_ms=250.0, data_wait_ms=62.5, patches_per_sec=8 * BATCH / 2.0
    )
    assert timer.summary().data_wait_share == 0.25


def test_resume_leaves_out_the_time_between_windows(clock):
    timer = StepTimer(BATCH, waited=Waited(), start=clock())
    run_steps(timer, clock, 2, wait=0.0, compute=0.25)
    timer.close_window()
    clock.now += 30.0  # validation and a checkpoint
    timer.waited.seconds += 7.0  # a clock that moved between windows: not this window's wait
    timer.resume()
    run_steps(timer, clock, 2, wait=0.0, compute=0.25)
    assert timer.close_window().step_time_ms == 250.0  # not (30 + 0.5) / 2 s
    assert timer.summary().data_wait_ms == 0.0
    assert timer.summary().step_time_ms == 250.0
    assert timer.summary().steps == 4
    assert timer.elapsed() == "0:00:31"  # wall time since start includes it


def test_empty_window_is_none_and_counts_nothing(clock):
    timer = StepTimer(BATCH, waited=Waited(), start=clock())
    assert timer.summary() is None
    clock.now += 2.0
    assert timer.close_window() is None
    assert timer.summary() is None and timer.total_wall == 0.0
    run_steps(timer, clock, 2, wait=0.0, compute=0.5)
    assert timer.close_window().step_time_ms == 500.0  # the empty window's 2 s are not in it
    assert WindowStats(0, 0.0, 0.0, 0.0).data_wait_share == 0.0


def budget_run(folders) -> list[str]:
    """Overrides of a tiny run whose steps only a time budget ends, logging every step."""
    return [
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data=generator",
        "data.batch_size=4",
        "data.patch_size=32",
        "model.features=[8,8]",
        "train.steps=1000000",
        "train.lr=1e-3",
        "train.log_every=1",
        "train.ckpt_every=1000000",
    ]


@pytest.mark.slow
def test_a_time_budget_ends_the_run_at_the_schedules_final_lr_and_resume_keeps_it(
    folders, tmp_path, compose, caplog
):
    """``train.max_minutes`` stops the run before its steps, saved at the step it reached and
    validated as a finished run. The cosine runs over the budget: the run's last step has the
    final learning rate (1 % of train.lr) within 1 % of train.lr, when a step takes well under a
    twentieth of the budget; the used budget is checkpointed, so a resume with the same budget
    trains no further step, and one with a larger budget goes on."""
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sr.train.app import run

    common = [*budget_run(folders), f"data.val_dir={folders / 'val'}"]
    run_dir = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        final = run(compose(*common, "train.max_minutes=0.05"), run_dir)  # 3 s
    step = final["step"]
    assert 20 < step < 1_000_000 and final["budget_minutes_used"] >= 0.05
    assert final["interrupted"] is None
    assert re.search(rf"time budget of 0\.05 minutes reached at step {step}\b", caplog.text)
    assert (run_dir / "checkpoints" / f"ckpt-{step}.index").is_file()
    assert final["val/psnr"] > 0  # validated at the end, as a finished run
    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    lrs = [float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors("train/lr")]
    # the cosine went down with the time used (the first step, with tracing, takes part of it)
    assert lrs == sorted(lrs, reverse=True) and lrs[0] > 10 * lrs[-1]
    assert abs(lrs[-1] - 1e-5) <= 1e-5  # and ended at its final value, 1e-5, within 1 % of lr
    assert re.search(rf"steps reached: {step} of train.steps=1000000", caplog.text)
    saved = tf.train.load_checkpoint(str(run_dir / "checkpoints" / f"ckpt-{step}"))
    assert saved.get_tensor("elapsed/.ATTRIBUTES/VARIABLE_VALUE") >= 3.0

    again = run(compose(*common, "train.max_minutes=0.05", f"resume={run_dir}"), run_dir)
    assert again["step"] == step  # the budget was used up: no further step
    more = run(compose(*common, "train.max_minutes=0.075", f"resume={run_dir}"), run_dir)
    assert more["step"] > step and more["budget_minutes_used"] >= 0.075


@pytest.mark.slow
def test_the_first_step_is_start_up_not_budget(folders, tmp_path, compose, caplog, monkeypatch):
    """The first step traces and compiles the step function and fills the input pipeline: with
    a time budget its seconds are not charged, so the schedule's warm-up (a fraction of the
    budget) is not eaten by them. The first step is made to take 2 s here, a third of a
    6-second budget whose warm-up is its first fifth: charged, it would have put the schedule
    past the warm-up before the second step, so that the peak rate was never reached."""
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sr.train.app import run
    from sr.train.loop import Trainer

    take_step, calls = Trainer.take_step, []

    def slow_first(self):
        calls.append(1)
        if len(calls) == 1:
            time.sleep(2.0)
        return take_step(self)

    monkeypatch.setattr(Trainer, "take_step", slow_first)
    cfg = compose(
        *budget_run(folders),
        "train.lr_warmup_steps=200000",  # a fifth of the schedule: 1.2 s of the budget
        "train.max_minutes=0.1",
    )
    with caplog.at_level(logging.INFO):
        final = run(cfg, tmp_path / "run")
    acc = EventAccumulator(str(tmp_path / "run" / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    lrs = {e.step: float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors("train/lr")}
    assert lrs[2] < 0.5e-3  # still warming up
    assert max(lrs.values()) > 0.9e-3  # the warm-up's peak was reached (charged: never)
    assert abs(lrs[final["step"]] - 1e-5) <= 1e-5  # and the cosine its end at the budget's
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("first step")]
    assert float(re.search(r": ([\d.]+) s, not charged", line).group(1)) >= 2.0
