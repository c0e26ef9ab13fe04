"""A quiet start: TensorFlow's C++ INFO lines hidden, its warnings and errors shown.

Importing TensorFlow prints start-up lines of its C++ log to stderr (``oneDNN custom operations
are on``, ``Could not find cuda drivers``, each twice, after absl's notice ``All log messages
before absl::InitializeLog() ...``), before any line of our own. ``TF_CPP_MIN_LOG_LEVEL``
(0: all, 1: no INFO, 2: no WARNING either, 3: no ERROR either) filters TensorFlow's log once it
is set up, but TensorFlow 2.19 and later write these start-up lines before that, whatever the
variable says (tensorflow/tensorflow#100442). :func:`quiet_tensorflow`, called by ``train.py``
and every command of ``scripts/`` before anything imports TensorFlow, sets the variable to 1
unless the user set it, and imports TensorFlow with the start-up lines below that level dropped
from stderr (every other line passes, in order).

LiteRT's interpreter writes its own INFO line when it starts (``Created TensorFlow Lite XNNPACK
delegate for CPU``); ``sr.deploy.runtimes.open_tflite`` drops it through the same filter.

See them again: ``TF_CPP_MIN_LOG_LEVEL=0 python train.py ...`` (docs/troubleshooting.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading

LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
DEFAULT_LEVEL = 1  # INFO hidden; warnings and errors shown
# a line of absl's C++ log: severity letter, MMDD, time, thread, file:line]
_LOG_LINE = re.compile(rb"^([IWEF])\d{4} [\d:.]+ +\d+ [^\]]+\] ")
_ABSL_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called"
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}
_LITERT_INFO = b"INFO: "  # LiteRT's own log: "INFO: Created TensorFlow Lite XNNPACK delegate"


def log_level() -> int:
    """The level of ``TF_CPP_MIN_LOG_LEVEL`` (0 when unset or not a number)."""
    value = os.environ.get(LEVEL_VARIABLE, "0").strip()
    return int(value) if value.isdigit() else 0


def hidden(line: bytes, level: int) -> bool:
    """Whether a line TensorFlow writes to stderr is below ``level`` (``TF_CPP_MIN_LOG_LEVEL``):
    a C++ log line of a lower severity, or, when ``level`` >= 1, absl's notice that precedes
    them and LiteRT's INFO lines. Other lines (Python's warnings, tracebacks, LiteRT's
    ``WARNING:`` and ``ERROR:``) are never hidden."""
    if level >= 1 and (line.startswith(_ABSL_NOTICE) or line.startswith(_LITERT_INFO)):
        return True
    match = _LOG_LINE.match(line)
    return bool(match) and _SEVERITY[match.group(1)] < level


@contextlib.contextmanager
def filtered_stderr(level: int):
    """Drop the lines written to file descriptor 2 (by C++ or Python) that :func:`hidden` hides,
    while the block runs; the others pass, in order. The lines go through a pipe read by a
    thread, so a block that writes much never blocks."""
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    saved = os.dup(2)

    def forward():
        with os.fdopen(read_fd, "rb") as pipe:
            for line in pipe:
                while line and not hidden(line, level):
                    line = line[os.write(saved, line) :]

    thread = threading.Thread(target=forward, name="stderr-filter", daemon=True)
    thread.start()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the thread sees its end
        thread.join()
        os.close(saved)


def quiet_tensorflow() -> None:
    """Set ``TF_CPP_MIN_LOG_LEVEL`` to :data:`DEFAULT_LEVEL` (1) unless the user set it, and
    import TensorFlow with its start-up log lines below that level dropped (:func:`hidden`).
    Call it first in an entry point, before anything imports TensorFlow; once TensorFlow is
    imported it only sets the variable."""
    os.environ.setdefault(LEVEL_VARIABLE, str(DEFAULT_LEVEL))
    if "tensorflow" in sys.modules:
        return
    level = log_level()
    if level < 1:
        import tensorflow  # noqa: F401

        return
    with filtered_stderr(level):
        import tensorflow  # noqa: F401
