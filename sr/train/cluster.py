"""What the workers of a multi-worker run agree on: one scalar collective each, which every worker
must call at the same step (:mod:`sr.train.distribute` sets the cluster up)."""

from __future__ import annotations

import tensorflow as tf

from sr.train import distribute


class Cluster:
    """The workers of ``strategy``: :attr:`several` is true with more than one input pipeline
    (``train.strategy=multi_worker``); then the loop agrees on stopping, the guard's verdicts
    and the best checkpoint with the collectives :meth:`any` and :meth:`max`."""

    def __init__(self, strategy: tf.distribute.Strategy):
        self.strategy = strategy
        self.several = distribute.input_pipelines(strategy) > 1

    def max(self, value: float) -> float:
        """The largest ``value`` over the cluster's workers (a collective gather of one scalar
        per replica: ``tf.distribute.ReduceOp`` has no maximum)."""
        per = self.strategy.experimental_distribute_values_from_function(
            lambda context: tf.constant([value], tf.float32)
        )
        return float(tf.reduce_max(self.strategy.gather(per, axis=0)))

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any worker of the cluster (a collective sum, one
        scalar)."""
        value = self.strategy.experimental_distribute_values_from_function(
            lambda context: tf.constant(float(flag))
        )
        return bool(self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) > 0)
