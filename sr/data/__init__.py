"""Input pipeline: image listing and decoding (``images``), the Y channel (``color``), the LR
operator (``degrade``), the graph stage that makes training pairs (``pairs``), and the data
sources, one module each: ``tfrecord`` (``data=tfrecord``, a package: writing, manifest,
build lock, verification, read path), ``generator`` (``data=generator``)
and ``sequence`` (``data=sequence``, multi-frame windows), all built on ``source``."""

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
