"""The data position a checkpoint holds beside the weights: the batch stream's seed and identity
(and, attached by the trainer, its tf.data iterator and device pool), read back on a resume to
decide whether the stream continues (:meth:`sr.train.feed.DataFeed.resume`)."""

from __future__ import annotations

import json

import tensorflow as tf

# keys of the data state in a checkpoint file (``tf.train.load_checkpoint``)
DATA_SEED_KEY = "data/seed/.ATTRIBUTES/VARIABLE_VALUE"
DATA_STREAM_KEY = "data/stream/.ATTRIBUTES/VARIABLE_VALUE"


def identity_json(value) -> str:
    """The one serialised form of a stream identity (``PatchSource.stream_identity()``) or of
    one of its values: JSON with sorted keys, in which a tuple and a list are the same array.
    What a checkpoint stores, and what every comparison of identities compares (a tuple of
    the config's dataclass against the list JSON gives back are equal here)."""
    return json.dumps(value, sort_keys=True)


def stream_changes(saved: dict, now: dict) -> dict[str, tuple]:
    """The keys whose values differ between a checkpoint's stream identity ``saved`` (as
    :func:`read_data_state` gives it back) and this run's ``now``, each compared in the form
    of :func:`identity_json`; ``{key: (saved value, value now)}``, a missing key None. Empty:
    the same batch stream."""
    return {
        k: (saved.get(k), now.get(k))
        for k in sorted(set(saved) | set(now))
        if identity_json(saved.get(k)) != identity_json(now.get(k))
    }


def make_data_state(seed: int, identity: dict) -> tf.train.Checkpoint:
    """The data position of a checkpoint: ``seed`` (int64, the batch stream's seed), ``stream``
    (string, :func:`identity_json` of ``PatchSource.stream_identity()``) and, for a source
    whose ``checkpoint_iterator`` is true, ``iterator`` (the tf.data iterator, attached by the
    trainer once it exists). With the checkpoint's ``step`` they say where the stream
    continues."""
    return tf.train.Checkpoint(
        seed=tf.Variable(int(seed), dtype=tf.int64, trainable=False, name="data_seed"),
        stream=tf.Variable(
            identity_json(identity), dtype=tf.string, trainable=False, name="stream"
        ),
    )


def read_data_state(path: str) -> tuple[int, dict] | None:
    """``(seed, stream identity)`` saved in the checkpoint ``path``; None if it has none
    (written before checkpoints held the data position)."""
    reader = tf.train.load_checkpoint(path)
    if not reader.has_tensor(DATA_SEED_KEY):
        return None
    stream = reader.get_tensor(DATA_STREAM_KEY)
    return int(reader.get_tensor(DATA_SEED_KEY)), json.loads(
        stream.decode() if isinstance(stream, bytes) else stream
    )
