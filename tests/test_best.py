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
