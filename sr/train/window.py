"""The loss window: what the training step records on the device between two reads by the host,
for the divergence guard (:mod:`sr.train.guard`, the guard's loss) and for a part's log line
(:meth:`sr.train.parts.TrainingPart.log_window`, its named terms)."""

from __future__ import annotations

import tensorflow as tf


class LossWindow:
    """Device-side record of the steps since the host last read it, with no host sync in the
    step (a few scalar ops): the guard's loss and the part's named terms.

    - The guard's loss (the one the loop logs): the sum and count of the finite ones and the
      largest (inf if one was NaN or inf, unless such steps are skipped:
      ``count_nonfinite=False``); read by :meth:`read` every ``train.log_every`` steps.
    - The terms ``terms`` (names, e.g. ``sr.train.gan.TERMS``; none for a pixel loss): their
      sums over the steps whose terms were all finite, and the count of those steps; read by
      :meth:`read_terms`.

    Each read resets its own record only. Create the window in the strategy's scope. Not
    checkpointed: a resumed run starts an empty one.

    Args:
        count_nonfinite: a NaN or inf loss makes the peak inf (``train.on_nonfinite=stop``).
        terms: the names of the terms :meth:`add` takes, in order.
    """

    def __init__(self, count_nonfinite: bool = True, terms: tuple[str, ...] = ()):
        self.count_nonfinite, self.terms = count_nonfinite, tuple(terms)
        self.total = tf.Variable(0.0, trainable=False, name="window_loss_sum")
        self.count = tf.Variable(0.0, trainable=False, name="window_loss_count")
        self.peak = tf.Variable(0.0, trainable=False, name="window_loss_peak")
        n = len(self.terms)
        self.term_sums = tf.Variable(tf.zeros([n]), trainable=False, name="window_term_sums")
        self.term_count = tf.Variable(0.0, trainable=False, name="window_term_count")

    # not converted by AutoGraph inside the step: its branches are on Python values only
    @tf.autograph.experimental.do_not_convert
    def add(self, loss: tf.Tensor, terms: tf.Tensor | None = None) -> None:
        """Record one step (inside the step's ``tf.function``).

        Args:
            loss: float32 scalar, the guard's loss of the step.
            terms: float32 ``[len(self.terms)]``, the step's terms in the order of
                :attr:`terms`; None (or omitted) for a window without terms.

        Raises:
            ValueError: ``terms`` given to a window without terms, or the other way round.
        """
        if (terms is None) != (not self.terms):
            raise ValueError(f"this loss window records the terms {self.terms}: give those")
        finite = tf.math.is_finite(loss)
        self.total.assign_add(tf.where(finite, loss, 0.0))
        self.count.assign_add(tf.cast(finite, tf.float32))
        worst = tf.where(finite, loss, float("inf") if self.count_nonfinite else 0.0)
        self.peak.assign(tf.maximum(self.peak, worst))
        if terms is not None:
            all_finite = tf.reduce_all(tf.math.is_finite(terms))
            self.term_sums.assign_add(tf.where(all_finite, terms, 0.0))
            self.term_count.assign_add(tf.cast(all_finite, tf.float32))

    def read(self) -> tuple[float, int, float]:
        """``(sum, count, largest)`` of the guard's losses since the last read; resets them."""
        values = float(self.total.numpy()), int(self.count.numpy()), float(self.peak.numpy())
        for v in (self.total, self.count, self.peak):
            v.assign(0.0)
        return values

    def read_terms(self) -> dict[str, float] | None:
        """The mean of each term over the steps since the last read whose terms were all
        finite, by name (None: no such step, or no terms); resets them."""
        total, count = self.term_sums.numpy(), float(self.term_count.numpy())
        self.term_sums.assign(tf.zeros_like(self.term_sums))
        self.term_count.assign(0.0)
        return {k: float(v) / count for k, v in zip(self.terms, total)} if count else None


def terms_window(window: LossWindow | None, terms: tuple[str, ...], count_nonfinite: bool):
    """The loss window of a step that records ``terms``: ``window`` itself, or a new one if
    None (create the step in the strategy's scope then).

    Raises:
        ValueError: ``window`` records other terms (it was not made with the part's
            ``terms``).
    """
    if window is None:
        return LossWindow(count_nonfinite, terms)
    if window.terms != tuple(terms):
        raise ValueError(
            f"the step records the terms {tuple(terms)}, but its loss window has "
            f"{window.terms}: make it with LossWindow(terms=part.terms)"
        )
    return window
