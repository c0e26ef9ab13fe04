"""The data sources and the tf.data graph that turns them into ``sr.core.batch.Batch(lq, gt)``
batches: the source contract (``source``), the graph stage that makes training pairs
(``pairs``: flips, the LR operator of :mod:`sr.core.degrade`, [0, 1]), and one module per mode:
``tfrecord`` (``data=tfrecord``, a package: records, writing, manifest, build lock,
verification, reading), ``generator`` (``data=generator``) and ``sequence`` (``data=sequence``,
multi-frame windows); the tf.data service (``service``) and the demo photos (``demo``).
Imports :mod:`sr.core` only."""

from sr.data.generator import GeneratorConfig, GeneratorSource
from sr.data.sequence import SequenceConfig, SequenceSource
from sr.data.source import DataConfig, PatchSource, pairs_dataset
from sr.data.tfrecord import TFRecordConfig, TFRecordSource

__all__ = [
    "DataConfig",
    "GeneratorConfig",
    "GeneratorSource",
    "PatchSource",
    "SequenceConfig",
    "SequenceSource",
    "TFRecordConfig",
    "TFRecordSource",
    "SOURCES",
    "pairs_dataset",
]

# Every data=<mode>: sr.config registers each one's schema as base_<mode> for conf/data/<mode>.yaml
SOURCES = (TFRecordSource, GeneratorSource, SequenceSource)
