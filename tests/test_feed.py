"""The trainer's batches (``sr.train.feed.DataFeed``), built alone on a small source of the
loop's contract whose batch ``k`` is ``[k]``: opened at the run's step, restored from a
checkpoint's iterator, a changed stream named."""

import logging

import pytest
import tensorflow as tf

from sr.train.feed import DataFeed
from sr.train.state import RunState


class RangeSource:
    """A data source as the feed sees it (``sr.data.PatchSource``'s members that it uses):
    batch ``k`` of its stream is ``([k],)``. With ``checkpoint_iterator`` the stream always
    starts at 0 and only a restored iterator continues it; without, it starts at ``start``."""

    def __init__(self, checkpoint_iterator: bool, mode: str = "range", seed: int = 3):
        self.checkpoint_iterator, self.mode, self.stream_seed = checkpoint_iterator, mode, seed

    def stream_identity(self) -> dict:
        return {"mode": self.mode}

    def dataset(self, start: int, context, slack: bool) -> tf.data.Dataset:
        first = 0 if self.checkpoint_iterator else start
        return tf.data.Dataset.range(first, 100).map(lambda k: (tf.reshape(k, [1]),))

    def device_state(self, strategy, checkpoint):
        return None


def feed_of(source, run_dir, data_seed=None) -> DataFeed:
    strategy = tf.distribute.get_strategy()
    state = RunState.create(strategy, source.stream_seed, source.stream_identity())
    return DataFeed(source, strategy, 1, state.step, state.data, run_dir, True, data_seed)


def batches(feed: DataFeed, n: int) -> list[int]:
    return [int(feed.next_batch()[0][0]) for _ in range(n)]


@pytest.mark.parametrize("checkpointed", [True, False])
def test_a_resumed_feed_continues_the_checkpoints_stream(tmp_path, checkpointed):
    feed = feed_of(RangeSource(checkpointed), tmp_path)
    feed.open()
    assert batches(feed, 3) == [0, 1, 2]
    feed.step.assign(3)
    path = tf.train.Checkpoint(data=feed.data_state).write(str(tmp_path / "ckpt-3"))

    again = feed_of(RangeSource(checkpointed, seed=9), tmp_path)  # data.seed=null
    again.step.assign(3)
    again.resume(path)
    assert again.stream_checkpoint == path  # the same stream: continued
    assert again.loader.stream_seed == 3  # the checkpoint's seed, adopted
    again.open()
    assert batches(again, 2) == [3, 4]
    again.close()
    assert again.iterator is None and again.take_batch is None


def test_a_changed_stream_is_named_and_a_new_one_begins(tmp_path, caplog):
    feed = feed_of(RangeSource(True), tmp_path)
    feed.open()
    path = tf.train.Checkpoint(data=feed.data_state).write(str(tmp_path / "ckpt-0"))
    again = feed_of(RangeSource(True, mode="other"), tmp_path, data_seed=5)
    with caplog.at_level(logging.WARNING):
        again.resume(path)
    assert again.stream_checkpoint is None
    assert "differs from the checkpoint's (mode: range -> other)" in caplog.text
    assert again.loader.stream_seed == 3  # data.seed set: its own
    assert int(again.data_state.seed.numpy()) == 3


def test_reopen_goes_back_to_a_checkpoints_position(tmp_path):
    feed = feed_of(RangeSource(True), tmp_path)
    feed.open()
    batches(feed, 2)
    path = tf.train.Checkpoint(data=feed.data_state).write(str(tmp_path / "ckpt-2"))
    assert batches(feed, 3) == [2, 3, 4]
    feed.reopen(path)  # a rollback to step 2: the batches from there are replayed
    assert batches(feed, 2) == [2, 3]
