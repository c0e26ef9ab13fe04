"""What killed builds leave beside a shard folder ``<name>``: their temporary folders
``.<name>.tmp-*`` (with ``owner.pid`` inside), ``.<name>.new`` and ``.<name>.old``. The next build
of the same folder removes those whose owner process is dead, never a live build's."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path

from sr.data.tfrecord.buildlock import lock_busy
from sr.data.tfrecord.folders import OWNER, real_dir, remove_build_folder

log = logging.getLogger(__name__)

_PROCESS_START = time.time()  # leftovers without an owner file older than this are removed


def remove_leftovers(out_dir, keep: Path | None = None) -> list[Path]:
    """Remove what killed builds of ``out_dir`` left beside it: ``.<name>.tmp-*`` folders whose
    owner process (``owner.pid`` inside) is dead on this host, and ``.<name>.new``,
    ``.<name>.old`` and owner-less temporary folders last modified before the current process
    started. A live build's folder (another process, or ``keep``) is left alone: while another
    process or thread holds the build lock (:func:`build_lock`), only temporary folders of dead
    owners are removed. Only files a build writes are deleted (:func:`remove_build_folder`).

    Returns:
        The folders removed (each logged with its size).
    """
    out_dir = real_dir(out_dir)
    if not out_dir.parent.is_dir():
        return []
    prefix = f".{out_dir.name}."
    busy = lock_busy(out_dir)
    removed = []
    for path in sorted(out_dir.parent.iterdir()):
        name = path.name
        if not name.startswith(prefix) or path == keep or not path.is_dir():
            continue
        if not (name.startswith(prefix + "tmp-") or name in (prefix + "new", prefix + "old")):
            continue
        if busy and not (path / OWNER).is_file():
            continue  # may be the live build's (being swapped, or just created)
        if not _abandoned(path):
            continue
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        if remove_build_folder(path):
            log.info("removed %s (%.1f MB) left by a killed shard build", path, size / 1e6)
            removed.append(path)
    return removed


def _abandoned(path: Path) -> bool:
    """Whether the build that wrote ``path`` is gone: its owner pid is dead on this host or, with
    no owner file, the folder is older than this process."""
    try:
        owner = json.loads((path / OWNER).read_text())
        host, pid = owner["host"], int(owner["pid"])
    except FileNotFoundError:
        try:
            return path.stat().st_mtime < _PROCESS_START
        except FileNotFoundError:  # removed meanwhile by its own build
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False  # unreadable: rather keep it than remove a live build's folder
    if host != socket.gethostname():
        return False  # cannot tell whether a process on another host is alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by another user
        return False
    return False
