"""The divergence guard's judgement (``sr.train.guard``, pure Python: no TensorFlow here): loss
spikes, loss explosions, validation collapses, when each rule starts (a resumed run's own warm-up),
and the rollback target."""

from __future__ import annotations

import math

import numpy as np

from sr.train.guard import MIN_WINDOW, DivergenceGuard, GuardSettings


def guard(**kw) -> DivergenceGuard:
    return DivergenceGuard(GuardSettings(warmup=0, **kw))


def test_a_window_mean_above_the_factor_times_the_lowest_is_a_spike():
    g = guard(loss_factor=2.0, step_factor=1e9)
    assert g.window(500, 0.03 * 500, 500, 0.05) is None  # first: the reference
    assert g.window(1000, 0.02 * 500, 500, 0.04) is None
    assert g.window(1500, 0.039 * 500, 500, 0.05) is None  # 1.95 x the lowest
    verdict = g.window(2000, 0.041 * 500, 500, 0.05)
    assert "loss spike" in verdict and "guard_loss_factor=2" in verdict and "0.02" in verdict
    assert g.accepted_step == 1500 and g.target([1000, 1500]) == 1500


def test_one_step_above_the_factor_times_the_previous_mean_is_a_spike():
    g = guard(loss_factor=1e9, step_factor=5.0)
    assert g.window(500, 0.02 * 500, 500, 0.09) is None  # no previous window yet
    assert g.window(1000, 0.02 * 500, 500, 0.099) is None  # 4.95 x
    assert "guard_step_factor=5" in g.window(1100, 0.02 * 100, 100, 0.101)


def test_short_windows_are_pooled_before_their_mean_is_judged():
    g = guard(loss_factor=2.0, step_factor=1e9)
    assert g.window(100, 0.02 * 100, 100, 0.03) is None
    # ten-step windows with a mean of 10x: pooled until MIN_WINDOW steps, then a spike
    verdicts = [g.window(100 + 10 * k, 0.2 * 10, 10, 0.3) for k in range(1, MIN_WINDOW // 10 + 1)]
    assert verdicts[:-1] == [None] * (len(verdicts) - 1) and "loss spike" in verdicts[-1]
    assert g.target([100, 150]) == 100  # the pooled steps are suspect


def test_a_non_finite_loss_is_a_spike_and_no_spike_is_judged_before_guard_from():
    g = guard()
    assert "non-finite" in g.window(10, 1.0, 9, math.inf)
    early = DivergenceGuard(GuardSettings(warmup=1000))
    early.begin(0, 0.03)
    assert early.window(500, 0.02 * 500, 500, 0.03) is None
    assert early.window(900, 0.03 * 400, 400, math.inf) is None  # NaN: the non-finite check's
    assert early.window(999, 0.03 * 99, 99, 0.5) is None  # 25 x the last mean: warm-up noise
    assert "guard_step_factor" in early.window(1000, 0.03, 1, 0.5)


def test_guard_from_counts_from_the_runs_own_first_step():
    """A run resumed at step 200 (its references from the checkpoint) is watched for loss
    spikes from step 200 + guard_from on, not from the absolute step guard_from."""
    before = guard()
    before.window(200, 0.045 * 200, 200, 0.06)
    g = DivergenceGuard(GuardSettings(warmup=1000))
    g.remember(before.memory())
    g.begin(200, 0.045)
    assert g.accepted_step == g.validated_step == 200
    assert g.window(1100, 0.05 * 100, 100, 0.4) is None  # a step at 9 x: still its warm-up
    assert g.window(1199, 0.05 * 99, 99, 0.05) is None
    verdict = g.window(1200, 0.05, 1, 0.4)
    assert "loss spike" in verdict and "guard_step_factor=5" in verdict
    fresh = DivergenceGuard(GuardSettings(warmup=1000))
    fresh.begin(0, 0.3)
    fresh.window(999, 0.05 * 999, 999, 0.1)
    assert fresh.window(1000, 0.05, 1, 0.4) is not None


def test_an_explosion_is_judged_from_the_first_window_whatever_guard_from():
    """``train.lr=1e9`` on a 20-step run: one window of 20 steps with a mean of 6.9e10 against
    the first step's loss 0.40; a resumed run against its remembered lowest mean. The limit is
    100 x, not less: a window at 100 x passes."""
    g = DivergenceGuard(GuardSettings(warmup=10**6))
    g.begin(0, 0.4)
    verdict = g.window(20, 6.9e10 * 20, 20, 2e11)
    assert "loss explosion" in verdict and "guard_explode_factor=100" in verdict
    assert "0.4" in verdict and g.target([]) is None and g.target([0]) == 0
    at_limit = DivergenceGuard(GuardSettings(warmup=10**6))
    at_limit.begin(0, 0.4)
    assert at_limit.window(20, 40.0 * 20, 20, 1e3) is None  # 100 x: no explosion yet
    assert at_limit.window(40, 40.5 * 20, 20, 1e3) is not None
    resumed = DivergenceGuard(GuardSettings(warmup=1000))
    resumed.remember([0.040, 0.045, 25.72])  # lowest mean, last mean, best PSNR
    resumed.begin(200, 0.0433)
    verdict = resumed.window(300, 10.36 * 100, 100, 60.0)
    assert "loss explosion" in verdict and "0.04" in verdict
    assert resumed.target([100, 200]) == 200  # the step it resumed at was known good
    assert resumed.window(300, 3.9 * 100, 100, 60.0) is None  # 97 x: the spike rules' business
    off = DivergenceGuard(GuardSettings(enabled=False))
    off.begin(0, 0.4)
    assert off.window(20, 1e12, 20, 1e11) is None
    signed = guard()  # a loss that can be negative has no explosion reference
    signed.begin(0, -0.5)
    assert signed.window(20, 1e3, 20, 100.0) is None


def test_a_validation_more_than_val_drop_below_the_best_is_a_collapse():
    g = guard(val_drop=3.0)
    assert g.validation(1000, 28.0) is None and g.validation(2000, 30.2) is None
    assert g.validation(3000, 27.3) is None  # 2.9 dB below
    verdict = g.validation(4000, 4.86)
    assert "validation collapse" in verdict and "30.20" in verdict
    assert g.validation(5000, float("nan")) is not None
    assert g.validated_step == 3000


def test_a_collapse_is_judged_as_soon_as_a_best_exists_and_early_noise_is_not_one():
    """Validations every 100 steps of a fresh run, long before guard_from=1000: the first is the
    best; dips of 2.4 and 2.9 dB are noise (below guard_val_drop=3) and pass; a drop of 3.1 dB
    at step 500 is a collapse. A run resumed with a best of 25.72 dB (checkpoints/best) judges
    its first validation, 11.77 dB, as one."""
    g = DivergenceGuard(GuardSettings())  # guard_from 1000, val_drop 3
    g.begin(0, 0.3)
    assert g.validation(100, 24.0) is None  # the first: the best
    assert g.validation(200, 26.5) is None
    assert g.validation(300, 24.1) is None  # 2.4 dB below: noise
    assert g.validation(400, 23.6) is None  # 2.9 dB below: noise
    verdict = g.validation(500, 23.4)
    assert "validation collapse" in verdict and "26.50" in verdict and "step 500" in verdict
    assert g.target([100, 200, 300, 400]) == 400
    resumed = DivergenceGuard(GuardSettings())
    resumed.remember([0.04, 0.045, -math.inf])
    resumed.best_psnr = 25.72  # as Rollback.resume reads it from best.json
    resumed.begin(200, 0.045)
    assert "25.72 dB" in resumed.validation(400, 11.77)
    assert resumed.target([200]) == 200
    assert DivergenceGuard(GuardSettings()).validation(100, 5.0) is None  # no best: nothing


def test_the_gan_stage_is_judged_against_its_start_with_its_own_margin():
    """The GAN stage (``reference="start"``) from weights at 21.0 dB: it may give up a few dB
    for texture (19.5, then 16.5: 4.5 dB below), a later higher PSNR does not move the start,
    and the issue's collapse to 9.5 dB is a verdict naming train.guard_gan_val_drop; the
    reference is checkpointed (memory) and taken back on a resume."""
    g = DivergenceGuard(GuardSettings(stage_drop=5.0), reference="start")
    g.start_psnr = 21.0  # measured on the train.init_from weights before the first step
    g.begin(0, 0.1)
    assert g.validation(100, 19.5) is None
    assert g.validation(200, 23.0) is None  # the start stays the reference
    assert g.validation(300, 16.5) is None  # 4.5 dB below the start: a GAN's trade
    verdict = g.validation(400, 9.5)
    assert verdict.startswith("validation collapse of the GAN stage: PSNR 9.50 dB at step 400")
    assert "train.guard_gan_val_drop=5 dB below the stage's start, 21.00 dB" in verdict
    assert g.target([100, 200, 300]) == 300
    assert g.validation(500, float("nan")) is not None
    assert g.memory()[2] == 21.0 and g.best_psnr == -math.inf
    resumed = DivergenceGuard(GuardSettings(stage_drop=5.0), reference="start")
    resumed.remember(g.memory())
    resumed.best_psnr = 30.0  # best.json's PSNR (the NIQE rule's checkpoint): not the reference
    assert resumed.start_psnr == 21.0 and resumed.validation(600, 15.5) is not None
    # a stage from random weights: its first validation is the start
    fresh = DivergenceGuard(GuardSettings(stage_drop=5.0), reference="start")
    assert fresh.validation(100, 12.0) is None and fresh.start_psnr == 12.0
    assert fresh.validation(200, 6.5) is not None
    off = DivergenceGuard(GuardSettings(enabled=False), reference="start")
    off.start_psnr = 21.0
    assert off.validation(100, 1.0) is None  # train.guard=false


def test_the_target_is_the_newest_checkpoint_before_the_first_suspect_step():
    g = guard(val_drop=3.0)
    for step in (500, 1000, 1500, 2000):
        g.window(step, 0.02 * 500, 500, 0.03)
    assert g.window(2500, 0.02 * 500, 500, 1.0) is not None  # a step spike after 2000
    assert g.target([1000, 1500, 2000]) == 2000
    g.validation(1000, 30.0)
    assert g.validation(2000, 20.0) is not None  # a collapse: back to the last good validation
    assert g.target([1000, 1500, 2000]) == 1000
    assert g.target([1500, 2000]) is None  # rotated away
    g.rolled_back(1000)
    assert g.accepted_step == 1000
    # a spike of a pooled mean: back to where the pooled steps begin
    p = guard(loss_factor=2.0, step_factor=1e9)
    assert p.window(100, 0.02 * 100, 100, 0.03) is None
    assert p.window(150, 0.02 * 50, 50, 0.03) is None  # pooled, passed the immediate checks
    assert p.window(200, 0.2 * 50, 50, 0.3) is not None
    assert p.target([100, 150]) == 100


def test_the_guard_memory_survives_a_round_trip():
    g = guard()
    g.window(500, 0.02 * 500, 500, 0.03)
    g.validation(500, 29.5)
    h = guard()
    h.remember(np.asarray(g.memory(), np.float64))
    assert h.memory() == g.memory() and h.last_mean == 0.02
    fresh = guard()
    fresh.remember(guard().memory())
    assert fresh.last_mean is None and fresh.lowest_mean == math.inf
