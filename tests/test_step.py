"""The step that takes its own batch (``sr.train.step.TrainStep.take_and_train``, the loop's step
with one replica): the same updates as taking the batch first and stepping on it, the time it
blocks on the input pipeline measured, and nothing trained when the take fails."""

from __future__ import annotations

import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from sr.core.batch import Batch
from sr.losses import Loss
from sr.train.step import TrainStep


def make_step(seed: int = 0) -> TrainStep:
    """A 2x model of two convolutions, Adam, L1, under the default strategy."""
    keras.utils.set_random_seed(seed)
    x = keras.Input((None, None, 1))
    y = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(x)
    y = keras.layers.UpSampling2D(2)(keras.layers.Conv2D(1, 3, padding="same")(y))
    model = keras.Model(x, y)
    optimizer = keras.optimizers.Adam(1e-2)
    optimizer.build(model.trainable_variables)
    counters = tuple(tf.Variable(v, dtype=tf.int64) for v in (0, -1, 0))
    return TrainStep(model, optimizer, Loss({"l1": {}}), tf.distribute.get_strategy(), 2, counters)


def batches(n: int) -> tf.data.Dataset:
    rng = np.random.default_rng(1)
    lq = rng.random((n, 2, 6, 6, 1), np.float32)
    gt = rng.random((n, 2, 12, 12, 1), np.float32)
    return tf.data.Dataset.from_tensor_slices(Batch(lq=lq, gt=gt))


def weights(step: TrainStep) -> list[np.ndarray]:
    return [v.numpy() for v in step.model.weights]


@pytest.mark.slow
def test_taking_inside_the_step_trains_as_taking_then_stepping():
    fused, eager = make_step(), make_step()
    for a, b in zip(weights(fused), weights(eager)):
        np.testing.assert_array_equal(a, b)
    inside, outside = iter(batches(4)), iter(batches(4))
    for _ in range(4):
        got = fused.take_and_train(inside)
        want = eager.train_step(next(outside))
        assert float(got) == float(want)
    for a, b in zip(weights(fused), weights(eager)):
        np.testing.assert_array_equal(a, b)
    assert int(fused.step) == int(eager.step) == 4
    # a new iterator of the same elements (after a rollback, a resume) reuses the trace
    fused.take_and_train(iter(batches(2)))
    assert fused.take_and_train.experimental_get_tracing_count() == 1


def test_the_wait_for_a_slow_batch_is_measured():
    step = make_step()

    def slow(batch):
        def sleep(x):
            time.sleep(0.05)
            return x

        lq = tf.numpy_function(sleep, [batch.lq], tf.float32, stateful=True)
        return Batch(lq=tf.ensure_shape(lq, batch.lq.shape), gt=batch.gt)

    plain = tf.data.Options()  # no prefetch injected: each slow batch is made when taken
    plain.experimental_optimization.inject_prefetch = False
    plain.autotune.enabled = False
    fast, late = iter(batches(3).prefetch(3)), iter(batches(3).map(slow).with_options(plain))
    step.take_and_train(fast)  # the trace, the first take
    time.sleep(0.2)  # the prefetch fills
    before = float(step.data_wait.numpy())
    step.take_and_train(fast)
    step.take_and_train(fast)
    ready = float(step.data_wait.numpy()) - before
    for _ in range(3):
        step.take_and_train(late)
    waited = float(step.data_wait.numpy()) - before - ready
    assert waited >= 3 * 0.05  # every slow take, in seconds
    assert ready < 0.05  # two ready batches: not a sleep's worth


def test_a_failed_take_trains_nothing(tmp_path):
    """A corrupt record (``DataLossError``) and the end of the data (``OutOfRangeError``) stop
    the step before its update: the step count, the weights and the wait stay as they were."""
    step = make_step()
    path = tmp_path / "pairs.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for k in range(3):
            writer.write(f"record {k}".encode() * 50)
    data = bytearray(path.read_bytes())
    data[-40] ^= 0xFF  # the last record's payload: its CRC fails
    path.write_bytes(bytes(data))
    zeros = Batch(lq=tf.zeros([2, 6, 6, 1]), gt=tf.zeros([2, 12, 12, 1]))
    records = tf.data.TFRecordDataset(str(path)).map(lambda r: zeros)
    corrupt = iter(records)
    step.take_and_train(corrupt)
    step.take_and_train(corrupt)
    before, wait = weights(step), float(step.data_wait.numpy())
    with pytest.raises(tf.errors.DataLossError):
        step.take_and_train(corrupt)
    with pytest.raises(tf.errors.OutOfRangeError):
        step.take_and_train(iter(records.take(0)))
    assert int(step.step) == 2 and float(step.data_wait.numpy()) == wait
    for a, b in zip(before, weights(step)):
        np.testing.assert_array_equal(a, b)
