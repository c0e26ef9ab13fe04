"""One owner per run directory, and a resume that cannot damage the run it continues.

Hydra creates the run directory and writes ``<run>/<hydra.output_subdir>/{config,hydra,
overrides}.yaml`` and ``train.log`` before ``train.py``'s ``main`` runs, so the checks here run
earlier, in :class:`RunDirCallback` (``hydra.callbacks.run_dir`` in ``conf/config.yaml``, called
by Hydra's ``on_run_start``). A run that is refused exits with code 2 having written nothing
into the directory:

- the directory is held by another run (``<run>/.lock``, ``fcntl.flock``: a crashed or killed
  holder releases it with its process, so a stale lock file never blocks);
- a new run (no ``resume=``) is pointed at a directory that holds another run's checkpoints;
- ``resume=<run>`` whose ``model`` or ``data.scale`` differ from the run's ``.hydra/config.yaml``
  (its checkpoint could not be restored), or which has no checkpoint.

The original ``.hydra/config.yaml`` is never overwritten: a resumed run's Hydra files go to
``.hydra/resume-<DATE>_<TIME>`` (``hydra.output_subdir``, the ``sr_hydra_subdir`` resolver of
``sr.config``), so ``load_run_config`` and ``scripts/evaluate.py`` keep reading the first run's.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import tensorflow as tf
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from sr.train.checkpoint import CHECKPOINT_DIR, RunDirError, load_run_config

LOCK_FILE = ".lock"
REFUSED_EXIT_CODE = 2


class RunDirBusy(RunDirError):
    """The run directory is held by another live run (names the holder)."""


class RunDirLock:
    """Exclusive ownership of a run directory: ``fcntl.flock`` on ``<run_dir>/.lock``, which holds
    the owner's ``{"pid", "host", "since"}`` as JSON.

    The kernel releases the lock when its process ends, however it ends (SIGKILL included), so a
    lock file left by a dead process does not block. Use as a context manager, or call
    :meth:`acquire` and :meth:`release` (idempotent).
    """

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def holder(self) -> str | None:
        """The other process holding the lock, as ``pid N on host H since T``; None when free.

        Reads only: nothing is created or written.
        """
        if self.held or not self.path.is_file():
            return None
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return self._describe_holder()
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def acquire(self) -> RunDirLock:
        """Take the lock (creating the directory and the lock file) and record this process.

        Raises:
            RunDirBusy: if another process holds it, naming that process.
        """
        if self.held:
            return self
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirBusy(self._busy_message(self._describe_holder())) from None
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(owner) + "\n").encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Release the lock (the file stays, with the last owner's record)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def _describe_holder(self) -> str:
        try:
            owner = json.loads(self.path.read_text())
            return f"pid {owner['pid']} on host {owner['host']} since {owner['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "a process that has not recorded itself yet"

    def _busy_message(self, holder: str) -> str:
        return (
            f"run directory {self.run_dir} is in use by another run: {holder} (lock {self.path});"
            " wait for that run to end or stop it, or choose another hydra.run.dir"
        )


def _plain(node: Any) -> Any:
    """A config node as plain Python, interpolations resolved where they can be."""
    if not isinstance(node, DictConfig):
        return node
    try:
        return OmegaConf.to_container(node, resolve=True)
    except Exception:  # an interpolation that does not resolve here: compare as written
        return OmegaConf.to_container(node, resolve=False)


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}"))
        return out
    return {prefix: value}


def restore_differences(cfg: DictConfig, saved: DictConfig) -> dict[str, tuple[Any, Any]]:
    """The keys that decide the checkpoint's variables (``model.*``, ``data.scale``) whose values
    differ: ``{key: (run's value, new value)}``, ``"<absent>"`` for a key on one side only."""
    run = {**_flat(_plain(saved.get("model")), "model")}
    new = {**_flat(_plain(cfg.get("model")), "model")}
    run["data.scale"] = OmegaConf.select(saved, "data.scale")
    new["data.scale"] = OmegaConf.select(cfg, "data.scale")
    absent = "<absent>"
    return {
        key: (run.get(key, absent), new.get(key, absent))
        for key in sorted(set(run) | set(new))
        if run.get(key, absent) != new.get(key, absent)
    }


def check_resume(cfg: DictConfig) -> None:
    """Check that ``cfg`` can continue the run ``cfg.resume``: it holds a checkpoint and a config,
    and its ``model`` and ``data.scale`` equal the new config's. Reads only.

    Raises:
        RunDirError: naming the run, the missing file, or each differing key with both values.
    """
    run_dir = Path(cfg.resume)
    ckpt_dir = run_dir / CHECKPOINT_DIR
    if tf.train.latest_checkpoint(str(ckpt_dir)) is None:
        raise RunDirError(
            f"resume={run_dir}: no checkpoint in {ckpt_dir}; resume a run directory of train.py"
            " that has saved one (outputs/DATE/TIME)"
        )
    saved = load_run_config(run_dir)
    differ = restore_differences(cfg, saved)
    if differ:
        overrides = run_dir / ".hydra" / "overrides.yaml"
        started = ""
        if overrides.is_file():
            started = " ".join(str(o) for o in OmegaConf.load(overrides))
            started = f"; the run was started with: {started or '(no overrides)'}"
        lines = "; ".join(f"{key}: run {run!r}, now {new!r}" for key, (run, new) in differ.items())
        raise RunDirError(
            f"resume={run_dir}: this config cannot restore the run's checkpoint, its "
            f"{', '.join(differ)} differ from {run_dir / '.hydra' / 'config.yaml'} ({lines}). "
            f"Resume with the run's model and scale (the same overrides as the first run{started})"
        )


def check_new_run(cfg: DictConfig, run_dir: str | Path) -> None:
    """Refuse to start a run in a directory that holds another run's checkpoints (unless it is
    that run being resumed); a run that failed before its first checkpoint may be started again
    in its directory. Reads only.

    Raises:
        RunDirError: naming the directory, its checkpoint and the two ways out.
    """
    run_dir = Path(run_dir)
    same = cfg.get("resume") and Path(cfg.resume).resolve() == run_dir.resolve()
    latest = tf.train.latest_checkpoint(str(run_dir / CHECKPOINT_DIR))
    if latest is not None and not same:
        raise RunDirError(
            f"hydra.run.dir={run_dir} already holds a run with checkpoints ({latest}): continue"
            f" it with resume={run_dir}, or choose another hydra.run.dir"
        )


def claim(cfg: DictConfig, run_dir: str | Path) -> RunDirLock:
    """All the checks, then the lock: returns the held :class:`RunDirLock` of ``run_dir``.

    Nothing is written into ``run_dir`` unless every check passes.

    Raises:
        RunDirBusy: if another run holds ``run_dir``.
        RunDirError: see :func:`check_new_run` and :func:`check_resume`.
    """
    lock = RunDirLock(run_dir)
    holder = lock.holder()
    if holder:
        raise RunDirBusy(lock._busy_message(holder))
    check_new_run(cfg, run_dir)
    if cfg.get("resume"):
        check_resume(cfg)
    return lock.acquire()


def run_dir_of(config: DictConfig) -> Path:
    """The absolute run directory Hydra is about to create (``hydra.run.dir``)."""
    return Path(os.path.abspath(str(OmegaConf.select(config, "hydra.run.dir"))))


class RunDirCallback(Callback):
    """Hydra callback: :func:`claim` the run directory before Hydra writes into it, release it
    when the run ends (or at process exit). A refusal prints the reason to stderr and exits with
    code 2."""

    def __init__(self) -> None:
        self.lock: RunDirLock | None = None

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        run_dir = run_dir_of(config)
        try:
            self.lock = claim(config, run_dir)
        except (RunDirError, OSError) as e:
            print(f"error: {e}", file=sys.stderr, flush=True)  # no train.log: nothing written
            sys.exit(REFUSED_EXIT_CODE)  # SystemExit: Hydra turns exceptions into warnings
        atexit.register(self.lock.release)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.lock is not None:
            self.lock.release()
