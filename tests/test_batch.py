"""The named training batch (``sr.core.batch``): what the pair stage and the pair pool build, the
fields a term's target comes from (BasicSR's ``optimize_parameters``), the tuple order callers
index and the pool stores, and the step's refusal of a plain tuple."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from sr.core.batch import Batch, SharpenedBatch, check_batch
from sr.data.pair_pool import empty_pool, pool_key, pool_step
from sr.data.pairs import degraded_pairs, make_pairs
from sr.losses import Loss
from sr.train.step import TrainStep


def test_the_fields_a_term_takes_and_the_tuple_order():
    lq, usm, gt = (tf.fill([1, 2, 2, 1], v) for v in (0.1, 0.7, 0.5))
    batch, sharp = Batch(lq=lq, gt=gt), SharpenedBatch(lq=lq, gt_usm=usm, gt=gt)
    assert batch[0] is lq and batch[1] is gt  # evaluation and benchmarks index [0] and [1]
    assert sharp[0] is lq and sharp[1] is usm and sharp[2] is gt  # the pool's slot order
    assert batch.target(True) is gt and batch.target(False) is gt  # its one target
    assert sharp.target(True) is usm and sharp.target(False) is gt  # loss.*_gt_usm
    check_batch(batch), check_batch(sharp)
    with pytest.raises(TypeError, match=r"not tuple: build it with the field names"):
        check_batch((lq, gt))


class Sharpening:
    """A stand-in degradation: its target is the HR plus 1/255, its LR the HR's corner."""

    name = "stand-in"

    def pair(self, hr, scale, seeds, plain=False):
        lr, target = hr[:, ::scale, ::scale, :], tf.minimum(hr + 1 / 255, 1.0)
        return (lr, target, hr) if plain else (lr, target)


def test_the_pair_stage_names_its_images():
    hr = tf.constant(np.random.default_rng(0).integers(0, 255, (2, 8, 8, 3)), tf.uint8)
    gray, seeds = tf.constant([False, False]), tf.zeros([2, 2], tf.int64)
    one = degraded_pairs(hr, gray, 2, 0, "rgb", Sharpening(), seeds)
    two = degraded_pairs(hr, gray, 2, 0, "rgb", Sharpening(), seeds, plain=True)
    assert type(one) is Batch and type(two) is SharpenedBatch
    plain = tf.cast(hr, tf.float32) / 255
    np.testing.assert_array_equal(two.gt, plain)  # the HR as it is
    np.testing.assert_array_equal(two.gt_usm, one.gt)  # the target: the sharpened one
    np.testing.assert_allclose(one.gt, np.minimum(plain + 1 / 255, 1.0), atol=1e-7)
    y = tf.constant(np.full((2, 12, 12, 1), 100), tf.uint8)
    assert type(make_pairs(y, 2, 2)) is Batch


def test_the_pool_gives_back_the_batch_it_takes():
    batches = [
        SharpenedBatch(*(tf.fill([2, 2, 2, 1], (2 * t + k) / 255) for k in range(3)))
        for t in range(4)
    ]
    state = empty_pool(2, [[2, 2, 1]] * 3, (True, True, True))
    for t, batch in enumerate(batches):
        state, out = pool_step(state, batch, pool_key(tf.constant([1, t], tf.int64)), (True,) * 3)
        assert type(out) is SharpenedBatch
        # a pair's images stay together: gt_usm and gt of the same pair, in their fields
        np.testing.assert_allclose(out.gt_usm - out.lq, 1 / 255, atol=1e-6)
        np.testing.assert_allclose(out.gt - out.lq, 2 / 255, atol=1e-6)


def test_a_step_refuses_a_plain_tuple():
    x = keras.Input((None, None, 1))
    model = keras.Model(x, keras.layers.UpSampling2D(2)(keras.layers.Conv2D(1, 1)(x)))
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)
    counters = tuple(tf.Variable(v, dtype=tf.int64) for v in (0, -1, 0))
    step = TrainStep(model, optimizer, Loss({"l1": {}}), tf.distribute.get_strategy(), 2, counters)
    lq, gt = tf.ones([2, 4, 4, 1]), tf.ones([2, 8, 8, 1])
    with pytest.raises(TypeError, match="Batch"):
        step.train_step((lq, gt))
    assert int(step.step) == 0  # refused before any update
    assert np.isfinite(float(step.train_step(Batch(lq=lq, gt=gt))))
    assert int(step.step) == 1
