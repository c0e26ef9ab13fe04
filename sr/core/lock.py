"""An exclusive lock file that records its holder: the one lock of ``sr``, used by the run
directory (``sr.train.rundir``) and the shard build (``sr.data.tfrecord.buildlock``).

``fcntl.flock`` on the file at ``path``: the kernel releases the lock when its process ends,
however it ends (SIGKILL included), so a lock file left by a dead process never blocks. Each open
of the file locks on its own, so a second :class:`FileLock` of the same path is refused in the
same process too (threads included). The holder writes ``{"pid", "host", "since"}`` (JSON) into
the file, which a waiter or a refusal can name.

Why not the ``filelock`` library: its ``UnixFileLock`` opens the lock file with ``O_TRUNC``
before it tries the lock, so every process that merely tries it erases the holder's record.

A lock file may be deleted by its holder on release (``remove_on_release``, while it is still
locked): an acquirer that then finds it has locked a deleted file opens and locks the new one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path


class LockBusy(Exception):
    """The lock is held by another process (or another open of the file); ``holder`` is its
    record (``{}`` if it has not recorded itself yet)."""

    def __init__(self, path: Path, holder: dict):
        super().__init__(f"{path} is locked by {holder or 'a process'}")
        self.path = path
        self.holder = holder


def read_record(fd: int) -> dict:
    """The holder's record in an open lock file: ``{"pid", "host", "since"}``, or ``{}`` when
    it is empty or not a record (a holder that has not written it yet)."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode())
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return record if isinstance(record, dict) else {}


def same_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the file at ``path`` (not deleted nor replaced)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_ino, st.st_dev) == (own.st_ino, own.st_dev)


class FileLock:
    """Exclusive ``fcntl.flock`` on ``path``, recording the holder (see the module docstring).

    Use as a context manager (blocking), or call :meth:`acquire` and :meth:`release`
    (idempotent). Holding it again through the same object is a no-op.

    Args:
        path: the lock file (created, with its folder, on acquire).
        remove_on_release: delete the file on release (while still locked); otherwise it stays,
            holding the last holder's record.
    """

    def __init__(self, path: str | os.PathLike, remove_on_release: bool = False):
        self.path = Path(path)
        self.remove_on_release = remove_on_release
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def holder(self) -> dict | None:
        """The record of another holder (``{}`` if it has not written one, or if the file was
        replaced while looked at); None when the lock is free or held by this object.

        Reads only: nothing is created or written.

        Raises:
            OSError: if the lock file cannot be opened (other than missing).
        """
        if self.held or not self.path.is_file():
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return read_record(fd)
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None if same_file(fd, self.path) else {}  # deleted meanwhile: a new holder?
        finally:
            os.close(fd)

    def acquire(
        self, blocking: bool = True, on_wait: Callable[[dict], None] | None = None
    ) -> float | None:
        """Take the lock (creating the folder and the file) and record this process in it.

        Args:
            blocking: wait while another process holds it; False: raise :class:`LockBusy`.
            on_wait: called once, with the holder's record, when the wait starts.

        Returns:
            The seconds waited for another holder, or None if the lock was free (or held by
            this object already).

        Raises:
            LockBusy: if ``blocking`` is False and another process holds the lock.
        """
        if self.held:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        t0 = None
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                if not _try_flock(fd):
                    if not blocking:
                        raise LockBusy(self.path, read_record(fd))
                    if t0 is None:
                        t0 = time.monotonic()
                        if on_wait is not None:
                            on_wait(read_record(fd))
                    fcntl.flock(fd, fcntl.LOCK_EX)
                if same_file(fd, self.path):
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # locked a lock file its holder deleted on release: lock the new one
        self._record(fd)
        return None if t0 is None else time.monotonic() - t0

    def _record(self, fd: int) -> None:
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (deleting the file first with ``remove_on_release``)."""
        if self._fd is None:
            return
        if self.remove_on_release:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # still locked: nobody can have locked the file meanwhile
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *_exc_info) -> None:
        self.release()


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
