"""The rule of ``checkpoints/best`` (``sr.train.best``): a (monitor, mode) pair, compared by the
mode, never by the metric's name."""

import math

import pytest

from sr.train.best import NIQE, PSNR, BestRule


def test_the_mode_decides_which_value_is_better():
    assert PSNR.score(30.0) > PSNR.score(29.0)  # max: higher PSNR is better
    assert NIQE.score(4.0) > NIQE.score(5.0)  # min: lower NIQE is better
    assert BestRule("lpips", "min").score(0.1) > BestRule("lpips", "min").score(0.2)
    assert not NIQE.score(math.nan) > NIQE.worst  # a NaN is never a best
    assert PSNR.score(-1e9) > PSNR.worst


def test_a_mode_other_than_max_or_min_is_refused():
    with pytest.raises(ValueError, match="max or min"):
        BestRule("psnr", "up")


def test_the_best_checkpoint_is_kept_by_its_rule_alone(tmp_path):
    """``sr.train.best.BestCheckpoint`` built alone: a one-convolution model's checkpoint."""
    import json

    import tensorflow as tf

    from sr.train.best import BestCheckpoint
    from sr.train.cluster import Cluster
    from tests.trainer_parts import build_parts

    run = build_parts(tmp_path)
    best = BestCheckpoint(
        run.checkpoint, tmp_path / "checkpoints" / "best", NIQE, run.state.step, run.finite,
        Cluster(tf.distribute.get_strategy()), averaged=False, chief=True,
    )  # fmt: skip
    run.state.step.assign(2)
    best.keep({"niqe": 6.0, "psnr": 25.0})
    run.state.step.assign(4)
    best.keep({"niqe": 7.0, "psnr": 27.0})  # a higher NIQE: worse, not kept
    best.keep({"niqe": math.nan, "psnr": 27.0})
    record = json.loads((tmp_path / "checkpoints" / "best" / "best.json").read_text())
    assert record == {
        "step": 2, "metric": "niqe", "mode": "min", "niqe": 6.0, "psnr": 25.0,
        "weights": "live", "live_psnr": 25.0, "checkpoint": "ckpt-2",
    }  # fmt: skip
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints" / "best")).endswith("ckpt-2")

    again = BestCheckpoint(
        run.checkpoint, tmp_path / "checkpoints" / "best", NIQE, run.state.step, run.finite,
        Cluster(tf.distribute.get_strategy()), averaged=False, chief=True,
    )  # fmt: skip
    assert again.resume(tmp_path) == 25.0  # a resume: the record's PSNR, for the guard
    assert again.score == NIQE.score(6.0)  # only a lower NIQE replaces it
