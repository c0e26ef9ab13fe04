"""Writing an export folder so that nothing half-written ever stands under its name: the one
place that stages, records and publishes an export, for every format of ``scripts/export.py``
(``sr.deploy.export``: SavedModel, TFLite, ONNX; ``sr.deploy.pytorch``: safetensors).

An export is written into an empty folder beside its destination (``.<name>.partial-<pid>``),
its record is written there as ``export.json``, and the folder is renamed to the destination
in one step. If anything fails before the rename (a failed check, a converter's error,
Ctrl-C), the staging folder is removed and the destination is left as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from sr.cli import EXPORT_RECORD as RECORD  # the record of an export (its one owner: sr.cli)


def check_out(out) -> Path:
    """``out`` as a Path, if it can be an export folder: absent, or an empty folder.

    Raises:
        ValueError: if ``out`` exists and is not an empty folder (never overwritten).
    """
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"output {out} already exists and is not empty: pick a new folder")
    return out


def write_export(out, write: Callable[[Path], dict]) -> dict:
    """Write an export into the new folder ``out``, atomically, with its ``export.json``.

    ``write(folder)`` writes the export's files into ``folder`` (an empty staging folder beside
    ``out``) and returns the export's record; the record is written there as ``export.json``
    (JSON, indented by 2, one final newline) and the folder is renamed to ``out`` (an empty
    ``out`` is replaced).

    Args:
        out: the folder to create (absent, or an empty folder).
        write: writes the export into the folder it is given; returns the record (a dict that
            ``json.dumps`` takes).

    Returns:
        The record, as ``write`` returned it.

    Raises:
        ValueError: if ``out`` exists and is not an empty folder, before ``write`` is called.
        Whatever ``write`` raises (or writing the record), after the staging folder is
            removed: nothing is left beside ``out``, and ``out`` is as it was.
    """
    out = check_out(out)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        record = write(tmp)
        (tmp / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        if out.is_dir():
            out.rmdir()
        tmp.replace(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return record
