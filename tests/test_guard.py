"""The divergence guard in the trainer (its judgement alone: ``tests/test_guard_judgement.py``):
the rollback (the state of the good checkpoint, the replayed batches, an exact resume after it),
every run watched (a resume at a diverging rate, an exploding fresh run), ``checkpoints/best``
and ``train.clip_norm``."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from sr.config import ConfigError, validate_train
from sr.loading.checkpoints import make_checkpoint, read_best
from sr.loading.models import build_model
from sr.train.guard import DivergenceGuard
from sr.train.schedule import ScaledSchedule, make_schedule
from sr.train.step import clip_by_global_norm
from tests.conftest import stopped_at
from tests.test_faults import checkpoint_steps
from tests.test_resume import assert_same_state


@pytest.mark.parametrize(
    "key, value, names",
    [
        ("clip_norm", 0.0, "train.clip_norm must be a number > 0"),
        ("clip_norm", -1.0, "train.clip_norm must be a number > 0"),
        ("guard_lr_factor", 1.0, "train.guard_lr_factor must be a number in (0, 1)"),
        ("guard_loss_factor", 1.0, "train.guard_loss_factor must be a number > 1"),
        ("guard_explode_factor", 0.5, "train.guard_explode_factor must be a number > 1"),
        ("guard_val_drop", 0.0, "train.guard_val_drop must be a number > 0"),
        ("guard_gan_val_drop", -1.0, "train.guard_gan_val_drop must be a number > 0"),
        ("guard_max_rollbacks", -1, "train.guard_max_rollbacks must be an integer >= 0"),
    ],
)
@pytest.mark.slow
def test_bad_clip_and_guard_values_are_refused_naming_the_key(compose, key, value, names):
    with pytest.raises(ConfigError, match=names.replace("(", r"\(").replace(")", r"\)")):
        validate_train(compose(f"train.{key}={value}"))
    validate_train(compose("train.clip_norm=0.5"))  # and a good one passes


# ------------------------------------------------------------------------------------------------
# Clipping and the learning-rate factor
# ------------------------------------------------------------------------------------------------
def test_clipping_matches_tf_clip_by_global_norm_and_leaves_small_gradients_alone():
    rng = np.random.default_rng(0)
    grads = [tf.constant(rng.normal(size=s).astype(np.float32)) for s in [(3, 3), (5,), (2, 4)]]
    norm = float(tf.linalg.global_norm(grads))
    clipped = clip_by_global_norm(grads, norm / 4, tf.constant(1.0))
    want, _ = tf.clip_by_global_norm(grads, norm / 4)
    for a, b in zip(clipped, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert float(tf.linalg.global_norm(clipped)) == pytest.approx(norm / 4, rel=1e-5)
    same = clip_by_global_norm(grads, norm * 2, tf.constant(1.0))
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(same, grads))
    # under loss scaling the norm is the unscaled gradient's: x1024 gradients, same factor
    scaled = clip_by_global_norm([g * 1024 for g in grads], norm / 4, tf.constant(1024.0))
    for a, b in zip(scaled, want):
        np.testing.assert_allclose(a.numpy() / 1024, b.numpy(), rtol=1e-6)


# the same clipping under two replicas (the summed gradient's factor): tests/test_distribute.py
# ::test_clipping_under_two_replicas_clips_the_summed_gradient


def test_the_rollback_factor_scales_the_schedule_and_is_exact_at_one(compose):
    cfg = compose("train.lr=2e-3", "train.lr_warmup_steps=10", "train.steps=100")
    inner, scale = make_schedule(cfg), tf.Variable(1.0)
    scaled = ScaledSchedule(inner, scale)
    for step in (0, 5, 10, 57, 100):
        assert float(scaled(step)) == float(inner(step))
    scale.assign(0.25)
    assert float(scaled(57)) == pytest.approx(float(inner(57)) * 0.25, rel=1e-7)


# ------------------------------------------------------------------------------------------------
# The trainer's rollback, in process
# ------------------------------------------------------------------------------------------------
def base(folders, tmp_path) -> list[str]:
    return [
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data=tfrecord",
        f"data.data_root={tmp_path / 'root'}",
        "data.num_shards=2",
        "data.batch_size=4",
        "data.deterministic=true",
        "train.lr_schedule=step",
        "train.log_every=2",
        "train.ckpt_every=4",
        "train.max_to_keep=5",
        "model.features=[16,8]",
    ]


def logged_losses(run_dir) -> list[tuple[int, float]]:
    """``train/loss`` of the run's TensorBoard events, ``(step, value)`` in the order written."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    events = sorted(acc.Tensors("train/loss"), key=lambda e: e.wall_time)
    return [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in events]


def force_a_spike_at(monkeypatch, step: int) -> None:
    """The guard finds a spike in the window ending at ``step``, once."""
    judge, fired = DivergenceGuard.window, []

    def window(self, at, total, count, peak):
        verdict = judge(self, at, total, count, peak)
        if at == step and not fired:
            fired.append(at)
            return f"test spike at step {at}"
        return verdict

    monkeypatch.setattr(DivergenceGuard, "window", window)


@pytest.mark.slow
def test_a_rollback_restores_the_good_state_replays_its_batches_and_resumes_exactly(
    folders, tmp_path, compose, monkeypatch, caplog
):
    """A spike found at step 10 rolls back to ckpt-8, halves the learning rate and replays the
    batches from step 9: the loss of step 9 (before any update at the new rate) is the one
    logged the first time; a run stopped after the rollback and resumed ends bit-identical to
    the uninterrupted one, with the same losses."""
    from sr.train.app import run

    force_a_spike_at(monkeypatch, 10)
    common = [*base(folders, tmp_path), "train.guard_lr_factor=0.5"]
    final = run(compose(*common, "train.steps=16"), tmp_path / "one")
    assert final["rollbacks"] == 1
    assert "test spike at step 10. Rollback 1 of train.guard_max_rollbacks=3" in caplog.text
    assert "restored checkpoints/ckpt-8 (step 8), learning rate x0.5" in caplog.text
    reader = tf.train.load_checkpoint(str(tmp_path / "one" / "checkpoints" / "ckpt-16"))
    assert reader.get_tensor("guard/lr_scale/.ATTRIBUTES/VARIABLE_VALUE") == 0.5
    assert reader.get_tensor("guard/rollbacks/.ATTRIBUTES/VARIABLE_VALUE") == 1
    assert checkpoint_steps(tmp_path / "one") == [4, 8, 12, 16]

    monkeypatch.undo()  # the resumed run finds no spike of its own
    # the run stopped after the rollback: a copy of this one as if killed after its ckpt-12
    two = stopped_at(tmp_path / "one", 12, tmp_path / "two")
    run(compose(*common, "train.steps=16", f"resume={two}"), two)
    assert_same_state(tmp_path / "one", tmp_path / "two")
    one, two = logged_losses(tmp_path / "one"), logged_losses(tmp_path / "two")
    assert [s for s, _ in one] == [2, 4, 6, 8, 10, 10, 12, 14, 16]  # 10 again after the rollback
    assert one[4][1] != one[5][1]  # step 10 at half the rate
    # the latest value per step (two: 14 and 16 logged by the copied run, then resumed)
    assert [s for s, _ in two] == [s for s, _ in one] + [14, 16]
    assert dict(one) == dict(two)


@pytest.mark.slow
def test_a_collapse_rolls_back_to_the_best_when_the_rotation_dropped_the_good_one(
    folders, tmp_path, compose, monkeypatch, caplog
):
    """Validation every 4 steps, one checkpoint kept: a collapse found at step 8 (its checkpoint,
    saved just before, is suspect) goes back to step 4, which only checkpoints/best still
    holds."""
    from sr.train.app import run

    judge, fired = DivergenceGuard.validation, []

    def validation(self, step, psnr):
        verdict = judge(self, step, psnr)
        if step == 8 and not fired:
            fired.append(step)
            return f"test collapse at step {step}"
        return verdict

    monkeypatch.setattr(DivergenceGuard, "validation", validation)
    common = [*base(folders, tmp_path), f"data.val_dir={folders / 'val'}", "train.val_every=4"]
    cfg = compose(*common, "train.max_to_keep=1", "train.steps=12")
    final = run(cfg, tmp_path / "run")
    assert final["rollbacks"] == 1 and final["step"] == 12
    assert "restored checkpoints/best/ckpt-4 (step 4)" in caplog.text
    assert checkpoint_steps(tmp_path / "run") == [12]


@pytest.mark.slow
def test_a_verdict_on_the_last_steps_ends_the_run_on_the_good_checkpoint_and_says_so(
    folders, tmp_path, compose, monkeypatch, caplog
):
    """A spike in the run's last, partial window (steps 11-11 of 11): the run ends on ckpt-8,
    the newest checkpoint before it, and the warning says so and how to go on."""
    from sr.train.app import run

    force_a_spike_at(monkeypatch, 11)
    final = run(compose(*base(folders, tmp_path), "train.steps=11"), tmp_path / "run")
    assert final["rollbacks"] == 1 and final["step"] == 8
    said = caplog.text.split("test spike at step 11. Rollback 1 of train.guard_max_rollbacks=3: ")
    assert said[1].startswith(
        "restored checkpoints/ckpt-8 (step 8), learning rate x0.5 (train.guard_lr_factor; now "
        f"x0.5 of the schedule); the run ends on it, at step 8 of train.steps=11: resume="
        f"{tmp_path / 'run'} trains on from there at the lowered rate"
    )
    assert checkpoint_steps(tmp_path / "run") == [4, 8]


@pytest.mark.slow
def test_a_second_rollback_to_an_older_checkpoint_keeps_counting_and_lowering(
    folders, tmp_path, compose, monkeypatch
):
    """A spike at step 14 goes back to ckpt-12 (x0.5); a collapse at the validation of step 16
    goes back further, to ckpt-8 (the last good validation), saved before the first rollback:
    the factor and the count go on from the run's (x0.25, 2), not from that checkpoint's."""
    from sr.train.app import run

    force_a_spike_at(monkeypatch, 14)
    judge, fired = DivergenceGuard.validation, []

    def validation(self, step, psnr):
        verdict = judge(self, step, psnr)
        if step == 16 and not fired:
            fired.append(step)
            return "test collapse"
        return verdict

    monkeypatch.setattr(DivergenceGuard, "validation", validation)
    common = [*base(folders, tmp_path), f"data.val_dir={folders / 'val'}", "train.val_every=8"]
    final = run(compose(*common, "train.steps=18"), tmp_path / "run")
    assert final["rollbacks"] == 2 and final["step"] == 18
    reader = tf.train.load_checkpoint(str(tmp_path / "run" / "checkpoints" / "ckpt-18"))
    assert reader.get_tensor("guard/lr_scale/.ATTRIBUTES/VARIABLE_VALUE") == 0.25
    assert reader.get_tensor("guard/rollbacks/.ATTRIBUTES/VARIABLE_VALUE") == 2


@pytest.mark.slow
def test_clip_norm_reaches_the_update_and_is_recorded_in_hparams(folders, tmp_path, compose):
    """Adam divides the gradient by its own scale, so clipping to 1e-12 (far below Adam's
    epsilon, 1e-7) leaves steps a millionth of the unclipped ones: the key reaches the step.
    HParams record it (0: off)."""
    from sr.train.app import run
    from tests.test_losses import recorded_hparams

    base = [
        "data=generator",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data.batch_size=4",
        "train.steps=3",
        "model.features=[16,8]",
    ]
    start = tmp_path / "start"
    cfg = compose(*base, "train.steps=1", "train.lr=1e-30")
    run(cfg, start)  # the initial weights (seeded), saved
    initial = final_weights(start, cfg)
    moved = {}
    for name, extra in (("free", []), ("clipped", ["train.clip_norm=1e-12"])):
        run(compose(*base, *extra), tmp_path / name)
        after = final_weights(tmp_path / name, cfg)
        moved[name] = max(float(np.abs(a - b).max()) for a, b in zip(after, initial))
    assert moved["free"] > 1e-4 and moved["clipped"] < 1e-6 * moved["free"] * 100
    assert recorded_hparams(tmp_path / "clipped" / "tb")["clip_norm"] == pytest.approx(1e-12)
    assert recorded_hparams(tmp_path / "free" / "tb")["clip_norm"] == 0.0


def final_weights(run_dir, cfg) -> list[np.ndarray]:
    """The model weights of the run's newest checkpoint."""
    model = build_model(cfg)
    path = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    make_checkpoint(model).restore(path).expect_partial()
    return [w.numpy() for w in model.weights]


# ------------------------------------------------------------------------------------------------
# Every run watched: a resumed run at a diverging rate, a fresh run that explodes (in process)
# ------------------------------------------------------------------------------------------------
EDSR_TINY = ("model=edsr_lite", "model.blocks=2", "model.features=16")  # its bicubic skip: good
ESPCN_TINY = ("model=espcn", "model.features=[16,8]")  # its loss stays finite at lr 1e9


def watched(folders, model=EDSR_TINY) -> list[str]:
    """A tiny run with the guard's defaults (guard_from 1000, far beyond its steps)."""
    return [
        *model,
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        "data=generator",
        "data.batch_size=4",
        "train.log_every=5",
        "train.val_every=10",
        "train.ckpt_every=10",
    ]


def diverging_start(folders) -> list[str]:
    """Overrides of a good start for a diverging resume, the guard watching from step 0."""
    return [*watched(folders), "train.guard_from=0"]


# a diverging resume on 2 replicas, through train.py (exit code 4, checkpoints/best unchanged
# and loadable, every checkpoint left finite): tests/test_distribute.py's
# test_a_diverging_resume_on_two_replicas_rolls_back_keeps_best_and_exits_4


@pytest.mark.slow
def test_a_resume_at_a_diverging_rate_is_caught_before_guard_from(
    folders, tmp_path, compose, caplog
):
    """The issue's case in small: a good 20-step run resumed with ``train.lr=0.5`` to step 40,
    ``train.guard_from`` at its default (1000): the first window of the resumed run explodes
    (a mean loss of about 2,600 against 0.026 here); the guard rolls back to step 20 at half the
    rate, where it explodes again (about 170), and with ``train.guard_max_rollbacks=1`` the run
    stops (exit code 4 in train.py) on the good checkpoint of step 20, ``checkpoints/best``
    untouched."""
    from sr.train.app import run
    from sr.train.guard import DivergenceError

    run_dir = tmp_path / "run"
    run(compose(*watched(folders), "train.steps=20"), run_dir)
    best = read_best(run_dir)
    assert best["step"] == 20
    caplog.clear()
    cfg = compose(
        *watched(folders), "train.steps=40", "train.lr=0.5", "train.guard_max_rollbacks=1",
        f"resume={run_dir}",
    )  # fmt: skip
    with pytest.raises(DivergenceError, match="loss explosion") as info:
        run(cfg, run_dir)
    assert "after 1 rollback(s)" in str(info.value) and "checkpoints/best" in str(info.value)
    first = caplog.text.split("Rollback 1 of train.guard_max_rollbacks=1: ")
    assert "divergence guard: loss explosion: the mean loss of the 5 steps to step 25" in first[0]
    assert first[1].startswith("restored checkpoints/ckpt-20 (step 20), learning rate x0.5")
    assert checkpoint_steps(run_dir) == [10, 20]  # the diverged ones are gone
    assert read_best(run_dir) == best


def test_an_exploding_fresh_run_stops_before_guard_from(folders, tmp_path, compose):
    """``train.lr=1e9`` on a fresh 20-step run (one log window of 100 steps, a checkpoint and a
    validation due at step 10): the loss explodes by ten orders of magnitude; the steps are
    judged before the save of step 10, and with no good checkpoint to go back to the run stops
    there (exit code 4 in train.py) naming the explosion: no checkpoint, and no
    ``checkpoints/best``, of the diverged weights."""
    from sr.train.app import run
    from sr.train.guard import DivergenceError

    cfg = compose(*watched(folders, ESPCN_TINY), "train.steps=20", "train.lr=1e9",
                  "train.log_every=100")  # fmt: skip
    with pytest.raises(DivergenceError, match="loss explosion") as info:
        run(cfg, tmp_path / "run")
    assert "guard_explode_factor=100" in str(info.value) and "train.lr" in str(info.value)
    assert "no checkpoint known to be good" in str(info.value)
    assert "no checkpoints/best yet" in str(info.value)
    assert info.value.step == 10 and info.value.best is None
    assert not (tmp_path / "run" / "checkpoints").exists()
