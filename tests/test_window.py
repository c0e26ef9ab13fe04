"""The loss window (``sr.train.window``): the guard's sum, count and peak, the part's named terms,
each read resetting its own record, all on the device inside the step's ``tf.function``."""

from __future__ import annotations

import pytest
import tensorflow as tf

from sr.train.window import LossWindow, terms_window

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("count_nonfinite", [True, False], ids=["stop", "skip"])
def test_the_guards_loss_sum_count_and_peak(count_nonfinite):
    window = LossWindow(count_nonfinite)
    add = tf.function(window.add)  # as the step records it: no host sync
    for loss in (0.5, 2.0, NAN, 1.0):
        add(tf.constant(loss))
    assert window.read() == (3.5, 3, INF if count_nonfinite else 2.0)
    assert window.read() == (0.0, 0, 0.0)  # reset on read
    assert window.read_terms() is None  # no terms


def test_the_terms_average_the_steps_whose_terms_are_all_finite():
    window = LossWindow(terms=("a", "b"))
    add = tf.function(window.add)
    add(tf.constant(1.0), tf.constant([1.0, 4.0]))
    add(tf.constant(3.0), tf.constant([3.0, NAN]))  # the guard counts it, the terms do not
    add(tf.constant(2.0), tf.constant([2.0, 2.0]))
    assert window.read_terms() == {"a": 1.5, "b": 3.0}
    assert window.read_terms() is None  # reset: no step since
    assert window.read() == (6.0, 3, 3.0)  # its own record, untouched by read_terms


def test_terms_and_window_must_agree():
    with pytest.raises(ValueError, match=r"records the terms \('a',\): give those"):
        LossWindow(terms=("a",)).add(tf.constant(1.0))
    with pytest.raises(ValueError, match=r"records the terms \(\)"):
        LossWindow().add(tf.constant(1.0), tf.constant([1.0]))
    window = LossWindow(terms=("a",))
    assert terms_window(window, ("a",), True) is window
    assert terms_window(None, ("a", "b"), False).terms == ("a", "b")
    with pytest.raises(ValueError, match=r"its loss window has \(\): make it with LossWindow"):
        terms_window(LossWindow(), ("a",), True)
