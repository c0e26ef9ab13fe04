"""The data sources and the tf.data graph that turns them into ``sr.core.batch.Batch(lq, gt)``
batches: the source contract (``source``), the graph stage that makes training pairs
(``pairs``: flips, the LR operator of :mod:`sr.core.degrade`, [0, 1]), and one module per mode:
``tfrecord`` (``data=tfrecord``, a package: records, writing, manifest, build lock,
verification, reading), ``generator`` (``data=generator``) and ``sequence`` (``data=sequence``,
multi-frame windows); the tf.data service (``service``) and the demo photos (``demo``); the keys
of every mode (``schemas``, no TensorFlow). Imports :mod:`sr.core` only.

The names below are imported on first use (PEP 562), so that ``sr.data.schemas`` and the config
that reads it (``sr.config``) import no TensorFlow: a bad command line is refused before it.
"""

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


def __getattr__(name: str):
    """The sources of every ``data=<mode>`` and :data:`SOURCES`, imported (with TensorFlow) when
    one of them is first read; ``SOURCES`` lists them, each with its ``mode`` and its schema of
    ``sr.data.schemas.SCHEMAS`` (``sr.config`` registers those as ``base_<mode>``)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from sr.data.generator import GeneratorConfig, GeneratorSource
    from sr.data.sequence import SequenceConfig, SequenceSource
    from sr.data.source import DataConfig, PatchSource, pairs_dataset
    from sr.data.tfrecord import TFRecordConfig, TFRecordSource

    globals().update(
        DataConfig=DataConfig,
        GeneratorConfig=GeneratorConfig,
        GeneratorSource=GeneratorSource,
        PatchSource=PatchSource,
        SequenceConfig=SequenceConfig,
        SequenceSource=SequenceSource,
        TFRecordConfig=TFRecordConfig,
        TFRecordSource=TFRecordSource,
        SOURCES=(TFRecordSource, GeneratorSource, SequenceSource),
        pairs_dataset=pairs_dataset,
    )
    return globals()[name]
