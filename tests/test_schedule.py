"""sr.train.schedule.make_schedule: the learning rate per step of the cosine (with linear warm-up),
step and constant schedules, against their closed forms."""

from __future__ import annotations

import math

import pytest

from sr.train.schedule import make_schedule

ALPHA = 0.01  # the cosine ends at 1 % of the learning rate


def lr_at(schedule, step: int) -> float:
    return float(schedule(step)) if callable(schedule) else float(schedule)


def cosine(step: int, lr: float, steps: int, warmup: int) -> float:
    """Linear warm-up from 0 to ``lr`` over ``warmup`` steps, then a half cosine from ``lr`` to
    ``ALPHA lr`` at ``steps`` (Loshchilov & Hutter, SGDR, ICLR 2017, without restarts)."""
    if step < warmup:
        return lr * step / warmup
    t = min(step - warmup, steps - warmup) / (steps - warmup)
    return lr * ((1 - ALPHA) * 0.5 * (1 + math.cos(math.pi * t)) + ALPHA)


def test_cosine_with_warmup_follows_the_closed_form(compose):
    cfg = compose(
        "train.lr_schedule=cosine",
        "train.lr=2e-3",
        "train.steps=1100",
        "train.lr_warmup_steps=100",
    )
    schedule = make_schedule(cfg)
    assert lr_at(schedule, 0) == 0.0
    assert lr_at(schedule, 50) == pytest.approx(1e-3, rel=1e-5)  # half-way up
    assert lr_at(schedule, 100) == pytest.approx(2e-3, rel=1e-5)  # the peak at the warm-up's end
    assert lr_at(schedule, 600) == pytest.approx(2e-3 * (0.5 + ALPHA / 2), rel=1e-5)  # half-way
    assert lr_at(schedule, 1100) == pytest.approx(2e-5, rel=1e-4)  # 1 % of lr at train.steps
    assert lr_at(schedule, 5000) == pytest.approx(2e-5, rel=1e-4)  # and after it
    for step in (0, 1, 37, 99, 100, 101, 350, 777, 1099, 1100):
        assert lr_at(schedule, step) == pytest.approx(
            cosine(step, 2e-3, 1100, 100), rel=1e-5, abs=1e-12
        ), step


def test_cosine_without_warmup_starts_at_lr(compose):
    cfg = compose("train.lr_schedule=cosine", "train.lr=1e-3", "train.steps=400")
    assert cfg.train.lr_warmup_steps == 0
    schedule = make_schedule(cfg)
    for step in (0, 1, 100, 200, 399, 400):
        assert lr_at(schedule, step) == pytest.approx(cosine(step, 1e-3, 400, 0), rel=1e-5), step
    assert lr_at(schedule, 0) == pytest.approx(1e-3, rel=1e-6)
    assert lr_at(schedule, 400) == pytest.approx(1e-5, rel=1e-4)


def test_step_schedule_halves_every_decay_steps(compose):
    cfg = compose("train.lr_schedule=step", "train.lr=1e-3", "train.lr_decay_steps=30")
    schedule = make_schedule(cfg)
    expected = {0: 1e-3, 29: 1e-3, 30: 5e-4, 59: 5e-4, 60: 2.5e-4, 95: 1.25e-4}
    for step, lr in expected.items():
        assert lr_at(schedule, step) == pytest.approx(lr, rel=1e-6), step


def test_constant_schedule(compose):
    schedule = make_schedule(compose("train.lr_schedule=constant", "train.lr=3e-4"))
    assert [lr_at(schedule, s) for s in (0, 1, 10**6)] == [pytest.approx(3e-4)] * 3


def test_unknown_schedule_is_named(compose):
    cfg = compose()
    cfg.train.lr_schedule = "linear"
    with pytest.raises(ValueError, match="cosine, step or constant, got 'linear'"):
        make_schedule(cfg)


def test_the_budget_schedule_runs_the_step_schedule_over_elapsed_time(compose):
    """BudgetSchedule: the step schedule at max(step, progress x steps); at progress 0 the step
    schedule itself, at progress 1 its final value, whatever the step."""
    import tensorflow as tf

    from sr.train.schedule import BudgetSchedule

    for extra in (
        ["train.lr_warmup_steps=100"],
        ["train.lr_schedule=step", "train.lr_decay_steps=300"],
    ):
        cfg = compose("train.lr=2e-3", "train.steps=1100", *extra)
        inner = make_schedule(cfg)
        progress = tf.Variable(0.0)
        budget = BudgetSchedule(inner, 1100, progress)
        for step in (0, 50, 100, 600, 1100):
            assert lr_at(budget, step) == pytest.approx(lr_at(inner, step), rel=1e-6)
        progress.assign(0.5)  # half the time used at step 10: the schedule is half-way
        assert lr_at(budget, 10) == pytest.approx(lr_at(inner, 550), rel=1e-6)
        assert lr_at(budget, 800) == pytest.approx(lr_at(inner, 800), rel=1e-6)  # steps lead
        progress.assign(1.0)
        assert lr_at(budget, 3) == pytest.approx(lr_at(inner, 1100), rel=1e-6)


def test_without_a_budget_the_optimizer_keeps_the_step_schedule(compose):
    from sr.train.optimizers import make_optimizer
    from sr.train.schedule import BudgetSchedule, current_lr, train_schedule

    cfg = compose("train.steps=1100", "train.lr_warmup_steps=100")
    schedule = train_schedule(cfg)  # what the Trainer builds its optimizer on without a budget
    assert not isinstance(schedule, BudgetSchedule)
    optimizer = make_optimizer(cfg, mixed=False)
    for step in (0, 100, 600, 1100):
        want = cosine(step, 1e-3, 1100, 100)
        assert lr_at(schedule, step) == pytest.approx(want, rel=1e-5)
        optimizer.iterations.assign(step)  # Keras 3's learning_rate: the schedule there
        assert current_lr(optimizer) == pytest.approx(want, rel=1e-5, abs=1e-12)


def test_current_lr_reads_the_schedule_at_the_asked_step_not_the_current_value(compose):
    """The non-finite error names the learning rate of the bad step (``lr_at`` of the
    Trainer's schedule), not of the step at which the loop noticed it (``current_lr``: Keras 3's
    ``optimizer.learning_rate`` is the current value)."""
    from sr.train import schedule as sched
    from sr.train.optimizers import make_optimizer

    cfg = compose("train.lr=8e-3", "train.steps=600", "train.lr_warmup_steps=17")
    schedule = sched.train_schedule(cfg)
    optimizer = make_optimizer(cfg, mixed=False, schedule=schedule)
    optimizer.iterations.assign(450)
    assert sched.current_lr(optimizer) == pytest.approx(cosine(450, 8e-3, 600, 17), rel=1e-5)
    assert sched.lr_at(schedule, 300) == pytest.approx(cosine(300, 8e-3, 600, 17), rel=1e-5)
    mixed = make_optimizer(cfg, mixed=True, schedule=schedule)  # loss scaling wraps it
    mixed.inner_optimizer.iterations.assign(300)
    assert sched.current_lr(mixed) == pytest.approx(cosine(300, 8e-3, 600, 17), rel=1e-5)
