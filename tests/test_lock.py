"""sr.core.lock: the one lock file of sr (run directories, shard builds): exclusive, recording its
holder, released by the kernel when its process dies, and never erasing the holder's record."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from sr.core.lock import FileLock, LockBusy


def test_the_holder_is_recorded_and_named_to_others(tmp_path):
    path = tmp_path / "sub" / "x.lock"
    with FileLock(path) as lock:
        assert lock.held and lock.holder() is None  # its own lock: no other holder
        other = FileLock(path)
        record = other.holder()
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        assert "since" in record
        with pytest.raises(LockBusy) as busy:
            other.acquire(blocking=False)  # another open of the file: refused in-process too
        assert busy.value.holder == record
        assert json.loads(path.read_text()) == record  # a refused try erased nothing
    assert FileLock(path).holder() is None and path.is_file()  # released; the file stays


def test_a_blocking_acquire_waits_reports_the_holder_and_the_seconds_waited(tmp_path):
    path = tmp_path / "x.lock"
    seen, waited = [], []
    holder = FileLock(path, remove_on_release=True)
    holder.acquire()

    def other():
        lock = FileLock(path, remove_on_release=True)
        waited.append(lock.acquire(on_wait=seen.append))
        lock.release()

    thread = threading.Thread(target=other)
    thread.start()
    deadline = time.monotonic() + 30
    while not seen:
        assert time.monotonic() < deadline, "the other thread never waited"
        time.sleep(0.01)
    time.sleep(0.2)
    holder.release()  # deletes the file while locked: the waiter locks a new one
    thread.join(30)
    assert seen[0]["pid"] == os.getpid()
    assert waited[0] >= 0.2 and not path.exists()
    assert FileLock(path).acquire() is None  # free: nothing waited


def test_a_lock_file_left_by_a_killed_process_does_not_block(tmp_path):
    path = tmp_path / "x.lock"
    hold_and_die = (
        "import os, signal, sys\n"
        "from sr.core.lock import FileLock\n"
        "FileLock(sys.argv[1]).acquire()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", hold_and_die, str(path)])
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert json.loads(path.read_text())["pid"] == proc.pid  # its record stays
    lock = FileLock(path)
    assert lock.holder() is None
    assert lock.acquire(blocking=False) is None and lock.held
    lock.release()
    lock.release()  # idempotent
