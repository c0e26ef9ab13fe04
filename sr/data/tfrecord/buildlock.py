"""One build at a time: "check staleness -> build -> swap" of ``<name>`` runs under the
exclusive lock file ``.<name>.lock`` beside it (:class:`sr.core.lock.FileLock`, recording the
holder's pid and host; deleted on release).

A second process (or thread) that finds the set missing or stale waits for the lock, logging the
holder's pid, then re-checks and uses the fresh set without rebuilding. The kernel releases the
lock when its holder dies, so a killed build never blocks the next one. A fresh set is returned
without taking the lock (read-only folders work).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from sr.core.lock import FileLock
from sr.data.tfrecord.folders import real_dir

log = logging.getLogger(__name__)

_LOCAL = threading.local()  # .held: {lock file: depth} of the locks this thread holds


def lock_path(out_dir) -> Path:
    """The lock file of builds of ``out_dir``: ``.<name>.lock`` beside it (its holder deletes it
    on release, while still holding the lock: see :func:`build_lock`)."""
    out_dir = real_dir(out_dir)
    return out_dir.parent / f".{out_dir.name}.lock"


def _held() -> dict:
    if not hasattr(_LOCAL, "held"):
        _LOCAL.held = {}
    return _LOCAL.held


@contextlib.contextmanager
def build_lock(out_dir) -> Iterator[None]:
    """Hold the exclusive build lock of ``out_dir`` (:func:`lock_path`, which records the
    holder's host and pid).

    Waits (saying so in the log, naming the holder's pid) while another process or thread holds
    it. Re-entrant in the thread that holds it. The kernel releases the lock when the holder
    exits or is killed, so a dead build never blocks. The holder deletes the lock file on
    release (still locked); an acquirer that finds it locked a deleted file tries again.
    """
    path = lock_path(out_dir)
    key = str(path)
    held = _held()
    if key in held:
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    lock = FileLock(path, remove_on_release=True)
    waited = lock.acquire(on_wait=lambda holder: _log_wait(out_dir, path, holder))
    try:
        if waited is not None:
            log.info("the other build released %s after %.1f s", path, waited)
        held[key] = 1
        try:
            yield
        finally:
            del held[key]
    finally:
        lock.release()


def _log_wait(out_dir, path: Path, holder: dict) -> None:
    log.info(
        "waiting for the shard build of %s by %s to finish (lock %s)",
        out_dir,
        _describe(holder),
        path,
    )


def _describe(holder: dict) -> str:
    """The holder recorded in a lock file: ``process 1234`` (``on host`` if another one)."""
    try:
        pid, host = int(holder["pid"]), holder["host"]
    except (KeyError, TypeError, ValueError):
        return "another process"
    return f"process {pid}" + ("" if host == socket.gethostname() else f" on {host}")


def lock_busy(out_dir) -> bool:
    """Whether another process or thread may hold the build lock of ``out_dir`` right now
    (creates nothing; True when in doubt)."""
    path = lock_path(out_dir)
    if str(path) in _held():
        return False
    try:
        return FileLock(path).holder() is not None  # {}: replaced meanwhile, a new build may hold
    except OSError:  # unreadable, or flock unsupported: be cautious
        return True
