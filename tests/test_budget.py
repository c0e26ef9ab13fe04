"""The time budget's clock (``sr.train.budget``), the workers' collectives (``sr.train.cluster``)
and the run's state (``sr.train.state``), each built alone."""

import tensorflow as tf

from sr.train.budget import TimeBudget
from sr.train.cluster import Cluster
from sr.train.state import RunState

ONE = Cluster(tf.distribute.get_strategy())


def budget(minutes, used_seconds: float) -> TimeBudget:
    state = RunState.create(tf.distribute.get_strategy(), 1, {})
    state.elapsed.assign(used_seconds)
    return TimeBudget(minutes, state.elapsed, state.progress)


def test_the_budget_is_used_up_past_its_minutes_and_sets_the_schedules_progress():
    half = budget(1, 30.0)  # before the clock starts: the checkpoint's seconds
    assert not half.used_up(ONE) and float(half.progress.numpy()) == 0.5
    over = budget(1, 90.0)
    assert over.used_up(ONE) and float(over.progress.numpy()) == 1.0
    none = budget(None, 1e9)
    assert not none.used_up(ONE) and float(none.progress.numpy()) == 0.0


def test_the_clock_goes_on_from_the_checkpoints_seconds_once_started():
    clock = budget(1, 30.0)
    clock.record()  # not started: nothing written
    assert float(clock.elapsed.numpy()) == 30.0
    clock.start()
    clock.restart_after_first_step()
    assert clock.elapsed_seconds() >= 30.0
    clock.record()
    assert float(clock.elapsed.numpy()) >= 30.0


def test_one_process_is_no_cluster_and_its_collectives_are_its_own_values():
    assert not ONE.several
    assert ONE.any(True) and not ONE.any(False)
    assert ONE.max(2.5) == 2.5


def test_a_fresh_run_state():
    state = RunState.create(tf.distribute.get_strategy(), 7, {"mode": "x"})
    assert state.at() == 0 and int(state.first_bad.numpy()) == -1
    assert int(state.skipped.numpy()) == 0 and float(state.elapsed.numpy()) == 0.0
    assert float(state.guard.lr_scale.numpy()) == 1.0 and int(state.guard.rollbacks.numpy()) == 0
    assert int(state.data.seed.numpy()) == 7 and state.saved_steps == []
