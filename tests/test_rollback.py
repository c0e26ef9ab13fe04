"""The divergence guard's rollbacks (``sr.train.rollback.Rollback``), built alone: a
one-convolution model, its checkpoints in ``tmp_path``, and a recorder for the data stream's
reopening in place of a data source."""

import pytest
import tensorflow as tf
from omegaconf import OmegaConf

from sr.train.best import PSNR, BestCheckpoint
from sr.train.cluster import Cluster
from sr.train.guard import DivergenceError
from sr.train.rollback import Rollback
from sr.train.window import LossWindow
from tests.trainer_parts import build_parts, set_weights, weight


def build_rollback(tmp_path, max_rollbacks: int = 2):
    run = build_parts(tmp_path)
    cluster = Cluster(tf.distribute.get_strategy())
    best = BestCheckpoint(
        run.checkpoint, run.checkpoints.directory / "best", PSNR, run.state.step, run.finite,
        cluster, averaged=False, chief=True,
    )  # fmt: skip
    train = OmegaConf.create({
        "steps": 10, "lr": 1e-3, "max_to_keep": 3, "guard_max_rollbacks": max_rollbacks,
        "guard_lr_factor": 0.5, "init_from": None,
    })  # fmt: skip
    reopened = []
    rollback = Rollback(
        run.guard, run.state, run.checkpoints, best, LossWindow(), run.part,
        tf.summary.create_noop_writer(), cluster, reopened.append, train,
    )  # fmt: skip
    return run, rollback, reopened


def collapse_after_step_2(run, rollback) -> str:
    """Step 2 saved and validated at 30 dB (the best), step 4 saved and validated at 20 dB:
    the validation collapse's verdict."""
    set_weights(run.model, 0.25)
    run.state.step.assign(2)
    run.checkpoints.save()
    assert rollback.judge_validation({"psnr": 30.0}) is None
    set_weights(run.model, 0.5)
    run.state.step.assign(4)
    run.checkpoints.save()
    verdict = rollback.judge_validation({"psnr": 20.0})
    assert verdict.startswith("validation collapse: PSNR 20.00 dB at step 4")
    return verdict


def test_a_collapse_rolls_back_to_the_last_good_checkpoint_and_reopens_the_stream(tmp_path):
    run, rollback, reopened = build_rollback(tmp_path)
    verdict = collapse_after_step_2(run, rollback)
    assert rollback.rollback(verdict) == 2
    assert run.state.at() == 2 and weight(run.model) == 0.25
    assert float(run.state.guard.lr_scale.numpy()) == 0.5
    assert int(run.state.guard.rollbacks.numpy()) == 1
    assert reopened == [str(tmp_path / "checkpoints" / "ckpt-2")]  # the callable, at step 2
    assert run.part.forgotten == 1
    assert not list((tmp_path / "checkpoints").glob("ckpt-4*"))  # the suspect one deleted
    assert run.checkpoints.manager.latest_checkpoint.endswith("ckpt-2")  # saved as the newest
    assert (tmp_path / "checkpoints" / "best" / "best.json").is_file()


def test_after_the_last_allowed_rollback_the_run_stops_naming_the_best(tmp_path):
    run, rollback, reopened = build_rollback(tmp_path, max_rollbacks=0)
    verdict = collapse_after_step_2(run, rollback)
    with pytest.raises(DivergenceError, match="after 0 rollback") as info:
        rollback.rollback(verdict)
    best = str(tmp_path / "checkpoints" / "best" / "ckpt-2")
    assert info.value.best == best and f"the best weights are in {best}" in str(info.value)
    assert run.state.at() == 2 and float(run.state.guard.lr_scale.numpy()) == 1.0


def test_a_resume_takes_the_guards_references_and_the_best_record(tmp_path):
    run, rollback, _ = build_rollback(tmp_path)
    collapse_after_step_2(run, rollback)
    again, resumed, _ = build_rollback(tmp_path)  # a new process on the same run
    again.checkpoints.resume()
    resumed.resume()
    assert again.guard.accepted_step == again.guard.validated_step == 4
    assert again.guard.best_psnr == 30.0  # best.json's
    assert resumed.best.score == 30.0  # only a better validation replaces checkpoints/best
