"""Primitives every layer may use, importing nothing else of ``sr``: image I/O (``images``), the Y
channel (``color``), the bicubic LR operator and ``make_lr`` (``degrade``), sequences of frames
and their windows (``frames``), a config schema field's bounds and their one check (``schema``),
the one file lock of run folders and shard builds (``lock``), the errors shared across layers
(``errors``), the one reader of the files runs write and read back (``runfiles``), the training
batch by name (``batch``) and the quiet start of the entry points (``quiet``). The degradations
are ``sr.degradations``, the metrics ``sr.metrics``, the export runtimes ``sr.deploy.runtimes``."""
