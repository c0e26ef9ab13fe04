"""Where training runs: one ``tf.distribute`` strategy per run, chosen by ``train.strategy``.

- ``auto``: ``MirroredStrategy`` over every visible GPU when there are two or more, else
  TensorFlow's default strategy (one device: the GPU if any, else the CPU);
- ``mirrored``: ``MirroredStrategy(train.devices)`` (null: every GPU, else the CPU, or the
  ``train.logical_cpus`` logical CPUs): synchronous data parallelism, one replica per device, in
  one process;
- ``multi_worker``: ``MultiWorkerMirroredStrategy``: one process per machine, the cluster and
  this process's task from ``TF_CONFIG`` (TensorFlow's format, below);
- ``one_device``: ``OneDeviceStrategy(train.devices[0])`` (default ``/gpu:0`` if a GPU is
  visible, else ``/cpu:0``).

``TF_CONFIG`` (multi-worker), as TensorFlow documents it, one per process::

    {"cluster": {"worker": ["host1:12345", "host2:12345"]}, "task": {"type": "worker", "index": 0}}

Before TensorFlow's own set-up (which would wait up to an hour for a missing task, without a
message and deaf to SIGTERM), every task waits for the others with plain TCP probes of their
``TF_CONFIG`` addresses, listening on its own port meanwhile, logging the missing tasks every
30 s, for at most ``train.cluster_timeout_minutes`` (then ``ClusterTimeoutError``, exit code 5);
SIGINT and SIGTERM end the wait at once (exit code 128 + N). See :func:`wait_for_cluster` and
:func:`join_cluster`.

Worker 0 (or the task of type ``chief``) is the chief: it owns the run directory, writes the
TensorBoard events, the validation and the HParams record. Every worker saves checkpoints (the
variables are read with collectives); the others write theirs into a temporary folder that is
removed after each save (TensorFlow's multi-worker checkpointing rule).

``data.batch_size`` is the global batch: each replica gets ``batch_size / replicas``, and the
loss of each replica is summed over its examples and divided by the global batch
(``tf.nn.compute_average_loss``), so the gradient, the learning rate and the schedule mean the
same at any replica count.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import math
import os
import shutil
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import tensorflow as tf

from sr.config import TRAIN_CHOICES
from sr.core.errors import ConfigError

log = logging.getLogger(__name__)

STRATEGIES = TRAIN_CHOICES["strategy"]  # the choices of train.strategy (its schema's field)


class DistributeError(ConfigError):
    """A strategy that cannot run here, or a batch that does not split over its replicas."""


class ClusterTimeoutError(RuntimeError):
    """Peers of ``TF_CONFIG``'s cluster did not answer within ``train.cluster_timeout_minutes``;
    names them (``train.py`` exits with code 5)."""


def tf_config() -> dict:
    """The parsed ``TF_CONFIG`` environment variable ({} if unset).

    Raises:
        DistributeError: if it is not JSON with ``cluster`` and ``task``.
    """
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return {}
    try:
        conf = json.loads(raw)
        conf["cluster"], conf["task"]["type"], conf["task"]["index"]  # noqa: B018
    except (ValueError, KeyError, TypeError) as e:
        raise DistributeError(
            f"TF_CONFIG is not a cluster spec ({e}): expected JSON such as "
            '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}'
        ) from e
    return conf


def task_of(conf: dict | None = None) -> tuple[str | None, int]:
    """``(task type, index)`` of this process in ``TF_CONFIG`` (``(None, 0)`` without one)."""
    conf = tf_config() if conf is None else conf
    if not conf:
        return None, 0
    return conf["task"]["type"], int(conf["task"]["index"])


def is_chief(conf: dict | None = None) -> bool:
    """Whether this process is the chief: no ``TF_CONFIG``, the ``chief`` task, or worker 0 of
    a cluster without a ``chief`` (TensorFlow's rule)."""
    conf = tf_config() if conf is None else conf
    kind, index = task_of(conf)
    if kind is None or kind == "chief":
        return True
    return kind == "worker" and index == 0 and "chief" not in conf.get("cluster", {})


# the jobs of TF_CONFIG whose tasks MultiWorkerMirroredStrategy joins in its collectives
COLLECTIVE_JOBS = ("chief", "worker")
PROBE_TIMEOUT_S = 2.0  # a TCP connect to a peer of TF_CONFIG that takes longer: not there


def cluster_timeout_s(train_cfg) -> float:
    """``train.cluster_timeout_minutes`` in seconds (default 10 minutes if the key is absent).

    Raises:
        ConfigError: unless it is a finite number > 0 (names the key and the value).
    """
    minutes = getattr(train_cfg, "cluster_timeout_minutes", 10.0)
    if not (
        isinstance(minutes, (int, float))
        and not isinstance(minutes, bool)
        and math.isfinite(minutes)
        and minutes > 0
    ):
        raise ConfigError(
            "train.cluster_timeout_minutes must be a number > 0 (how long a multi-worker run "
            f"waits for the other tasks of TF_CONFIG), got {minutes!r}"
        )
    return float(minutes) * 60.0


def peers(conf: dict) -> list[tuple[str, str]]:
    """The other tasks of the cluster that this one trains with: ``[("worker 1", "host:port")]``
    for the ``chief`` and ``worker`` jobs of ``TF_CONFIG`` (``conf``, parsed), this task left
    out, in ``TF_CONFIG`` order."""
    me = task_of(conf)
    return [
        (f"{job} {i}", str(address))
        for job in COLLECTIVE_JOBS
        for i, address in enumerate(conf.get("cluster", {}).get(job, []))
        if (job, i) != me
    ]


def _host_port(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` of ``TF_CONFIG`` -> ``(host, port)``.

    Raises:
        DistributeError: without a port number (names the address).
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise DistributeError(f"TF_CONFIG address {address!r} is not host:port (e.g. host1:12345)")
    return host.strip("[]"), int(port)


@contextmanager
def exit_on_signals(what: str):
    """While inside, SIGINT (Ctrl-C) and SIGTERM end the process at once: ``SystemExit(128 + N)``
    (130, 143: the exit codes of ``train.py``), logged with ``what`` (``"waiting for the
    cluster"``). The previous handlers are restored on leaving. Outside the main thread (where
    Python cannot set handlers) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        log.warning("%s received while %s: exiting", signal.Signals(signum).name, what)
        raise SystemExit(128 + signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def _probe(address: str, timeout_s: float) -> str | None:
    """None if something accepts a TCP connection at ``address`` within ``timeout_s`` seconds,
    else why not (``connection refused``, ``timed out``, an unknown host)."""
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as e:  # refused, unreachable, timed out, unknown host (gaierror)
        return e.strerror or str(e) or type(e).__name__


@contextmanager
def _own_port(conf: dict):
    """Listen on this task's own ``TF_CONFIG`` port while waiting, so that peers waiting in
    :func:`wait_for_cluster` see this task too (TensorFlow's server binds the port only once
    the strategy is created, after the wait). Yields a function that accepts and closes the
    probes that arrived (call it at each poll so the backlog never fills).

    Raises:
        DistributeError: if the port is taken on this machine (names it).
    """
    kind, index = task_of(conf)
    jobs = conf.get("cluster", {})
    if kind not in COLLECTIVE_JOBS or index >= len(jobs.get(kind, [])):
        yield lambda: None
        return
    address = str(jobs[kind][index])
    _, port = _host_port(address)
    dual = socket.has_dualstack_ipv6()
    try:
        server = socket.create_server(
            ("", port), family=socket.AF_INET6 if dual else socket.AF_INET, dualstack_ipv6=dual
        )
    except OSError as e:
        raise DistributeError(
            f"this task's address in TF_CONFIG, {kind} {index} ({address}): port {port} is "
            f"taken on this machine ({e.strerror or e}): stop what listens there (an earlier "
            "run?) or give this task another port in every worker's TF_CONFIG"
        ) from e
    server.setblocking(False)

    def drain() -> None:
        while True:
            try:
                server.accept()[0].close()
            except (BlockingIOError, InterruptedError):
                return

    with server:
        yield drain


def wait_for_cluster(
    conf: dict | None = None,
    timeout_s: float = 600.0,
    *,
    poll_s: float = 0.5,
    log_every_s: float = 30.0,
) -> float:
    """Wait until every other task of ``TF_CONFIG``'s cluster (:func:`peers`) accepts a TCP
    connection at its ``host:port``, listening meanwhile on this task's own port so that the
    peers' waits see it. Pure sockets, before any TensorFlow work: TensorFlow's own start-up
    (``MultiWorkerMirroredStrategy``) would block for up to an hour with no message and ignore
    SIGTERM. Logs ``waiting for worker 1 (host:port) of TF_CONFIG: 30 s of
    train.cluster_timeout_minutes=10`` at once and then every ``log_every_s`` seconds;
    SIGINT or SIGTERM meanwhile exit with 128 + N (:func:`exit_on_signals`).

    Args:
        conf: parsed ``TF_CONFIG`` (default: :func:`tf_config`).
        timeout_s: how long to wait for all peers, seconds (``train.cluster_timeout_minutes``
            times 60).
        poll_s: seconds between rounds of probes (each probe gives up after
            :data:`PROBE_TIMEOUT_S`; a refused connection fails at once).
        log_every_s: seconds between the log lines naming the missing tasks.

    Returns:
        The seconds waited.

    Raises:
        ClusterTimeoutError: naming each task that did not answer, its address, the last error
            and ``train.cluster_timeout_minutes``.
        DistributeError: for an address that is not ``host:port``, or this task's port taken.
    """
    conf = tf_config() if conf is None else conf
    missing = dict(peers(conf))
    errors: dict[str, str | None] = {}
    start = time.monotonic()
    next_log = start
    minutes = f"train.cluster_timeout_minutes={timeout_s / 60:g}"
    with exit_on_signals("waiting for the cluster"), _own_port(conf) as drain:
        while missing:
            for name, address in list(missing.items()):
                errors[name] = _probe(address, PROBE_TIMEOUT_S)
                if errors[name] is None:
                    del missing[name]
            drain()
            now = time.monotonic()
            if not missing:
                break
            waiting = ", ".join(f"{n} ({a})" for n, a in missing.items())
            if now - start >= timeout_s:
                why = "; ".join(f"{n}: {errors[n]}" for n in missing)
                raise ClusterTimeoutError(
                    f"{waiting} of TF_CONFIG did not answer within {minutes} "
                    f"({now - start:.0f} s; {why}): start each missing task with the same "
                    "TF_CONFIG cluster and its own task index, check the host and port "
                    "(firewall, typo), or raise train.cluster_timeout_minutes"
                )
            if now >= next_log:
                log.info(
                    "waiting for %s of TF_CONFIG: %.0f s of %s", waiting, now - start, minutes
                )
                next_log = now + log_every_s
            time.sleep(min(poll_s, max(0.0, start + timeout_s - now)))
    return time.monotonic() - start


def join_cluster(timeout_s: float = 600.0) -> tf.distribute.Strategy:
    """``MultiWorkerMirroredStrategy`` of ``TF_CONFIG``, once :func:`wait_for_cluster` has seen
    every peer. TensorFlow's set-up (its coordination service waits for every task to register,
    up to an hour, holding the interpreter) cannot be interrupted from Python, so meanwhile:
    Ctrl-C (SIGINT) ends the process at once (the signal's default action), and a set-up that
    has not returned after ``timeout_s`` seconds ends it with a traceback naming where it hung
    and exit code 1 (``faulthandler``). SIGTERM is caught by TensorFlow's preemption notifier
    during the set-up (it replaces the handler) and is lost; afterwards the handlers that were
    in place before (default: SIGTERM ends the process) are restored.

    Args:
        timeout_s: bound of TensorFlow's set-up, seconds (``train.cluster_timeout_minutes``).
    """
    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    log.info(
        "joining the cluster of TF_CONFIG (MultiWorkerMirroredStrategy): if a peer answered but "
        "does not join within train.cluster_timeout_minutes=%g, this process stops with a "
        "traceback (exit code 1)",
        timeout_s / 60,
    )
    if main:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    faulthandler.dump_traceback_later(timeout_s, exit=True, file=sys.__stderr__)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy()
    finally:
        faulthandler.cancel_dump_traceback_later()
        if main:
            for s, h in previous.items():
                signal.signal(s, h if h is not None else signal.SIG_DFL)


def make_strategy(
    name: str, devices=None, *, cluster_timeout_s: float = 600.0
) -> tf.distribute.Strategy:
    """The strategy of ``train.strategy`` (see the module docstring). Create it before any other
    TensorFlow op of the process (``MultiWorkerMirroredStrategy`` requires it).

    Args:
        name: one of :data:`STRATEGIES`.
        devices: ``train.devices``, a list of device names (``["/gpu:0", "/gpu:1"]``) or None.
        cluster_timeout_s: ``multi_worker``: how long to wait for the other tasks of
            ``TF_CONFIG``, seconds (:func:`wait_for_cluster`, then :func:`join_cluster`).

    Raises:
        DistributeError: for an unknown name, ``multi_worker`` without ``TF_CONFIG``, or devices
            that are not visible (names them and the visible ones).
        ClusterTimeoutError: ``multi_worker``: peers that did not answer in time (names them).
    """
    if name not in STRATEGIES:
        raise DistributeError(f"train.strategy must be one of {list(STRATEGIES)}, got {name!r}")
    if name == "multi_worker":  # before anything that initialises TensorFlow's context
        if not tf_config():
            raise DistributeError(
                "train.strategy=multi_worker needs TF_CONFIG: set it in every worker's "
                'environment (e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
                '"task": {"type": "worker", "index": 0}}), see docs/training.md, "Scaling out"'
            )
        wait_for_cluster(timeout_s=cluster_timeout_s)
        return join_cluster(cluster_timeout_s)
    devices = list(devices) if devices else None
    if devices:
        visible = {d.name.replace("/physical_device:", "/").lower() for d in _logical()}
        missing = [d for d in devices if _canonical(d) not in visible]
        if missing:
            raise DistributeError(
                f"train.devices {missing} not visible to TensorFlow; visible: {sorted(visible)}"
            )
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        if devices:
            return tf.distribute.MirroredStrategy(devices)
        return tf.distribute.MirroredStrategy() if len(gpus) > 1 else tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices)
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(
            devices[0] if devices else ("/gpu:0" if gpus else "/cpu:0")
        )
    raise AssertionError(name)  # unreachable: every name is handled above


def _logical():
    return tf.config.list_logical_devices()


def _canonical(device: str) -> str:
    """``/gpu:0``, ``GPU:0`` and ``/device:GPU:0`` -> ``/device:gpu:0`` (as listed devices)."""
    d = device.lower().lstrip("/")
    d = d.split("device:")[-1]
    return f"/device:{d}"


def describe(strategy: tf.distribute.Strategy) -> str:
    """``MirroredStrategy, 2 replicas (CPU:0, CPU:1)``: the strategy and its replicas."""
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:  # the default strategy has none: one device, TensorFlow's placement
        devices = ()
    names = ", ".join(d.split("device:")[-1] for d in devices)
    workers = ""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        kind, index = task_of()
        workers = f", {len(tf_config()['cluster'].get('worker', []))} workers, this {kind} {index}"
    name = type(strategy).__name__
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        name = "MultiWorkerMirroredStrategy"
    if is_default(strategy):
        name = (
            "default strategy (one device: "
            + ("GPU" if tf.config.list_logical_devices("GPU") else "CPU")
            + ")"
        )
    return (
        f"{name}, {strategy.num_replicas_in_sync} replica(s)"
        f"{workers}{f' ({names})' if names else ''}"
    )


def is_default(strategy: tf.distribute.Strategy) -> bool:
    """Whether ``strategy`` is TensorFlow's default strategy (no distribution): inside its scope
    ``tf.distribute.has_strategy()`` is false, inside any other's true. Call it outside every
    strategy's scope."""
    with strategy.scope():
        return not tf.distribute.has_strategy()


def replica_batch(global_batch: int, strategy: tf.distribute.Strategy) -> int:
    """The per-replica batch of a global ``data.batch_size``.

    Raises:
        DistributeError: if the global batch is smaller than the replicas or does not divide by
            them (names both and the nearest batch sizes that do).
    """
    n = strategy.num_replicas_in_sync
    if global_batch < n:
        raise DistributeError(
            f"data.batch_size={global_batch} (the global batch) gives less than 1 example to "
            f"each of the {n} replicas of {type(strategy).__name__}: use data.batch_size={n} "
            "(or a multiple), or fewer replicas (train.logical_cpus, train.devices)"
        )
    if global_batch % n:
        lower = global_batch // n * n
        raise DistributeError(
            f"data.batch_size={global_batch} (the global batch) does not split over the "
            f"{n} replicas of {type(strategy).__name__}: use {lower or n} or {lower + n}"
        )
    return global_batch // n


def checkpoint_dir(run_dir: Path) -> Path:
    """Where this process writes checkpoints: ``<run_dir>/checkpoints`` on the chief; on other
    workers (whose ``run_dir`` is ``<run>/workers/<type>-<index>``, ``sr.train.rundir``) a
    temporary folder, removed after each save (:func:`discard`)."""
    return Path(run_dir) / ("checkpoints" if is_chief() else "checkpoints-tmp")


def chief_run_dir(run_dir: Path) -> Path:
    """The run directory of the cluster: ``run_dir`` on the chief, ``<run>`` for a worker's
    ``<run>/workers/<type>-<index>``."""
    run_dir = Path(run_dir)
    return run_dir if is_chief() or run_dir.parent.name != "workers" else run_dir.parent.parent


def discard(path: Path) -> None:
    """Remove a non-chief worker's temporary checkpoint folder (nothing on the chief)."""
    if not is_chief():
        shutil.rmtree(path, ignore_errors=True)


# train.logical_cpus allowed per core: logical CPUs exercise the multi-replica code paths without
# GPUs, they never speed training up. Measured on 2 shared cores (ESPCN, global batch 64): 1, 4
# and 32 replicas per core train 1483, 551 and 179 patches/s, the first step (one trace per
# replica) takes 3.5, 15 and 28 s; beyond 4 per core a run only grinds slower.
LOGICAL_CPUS_PER_CORE = 4


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one, else
    ``os.cpu_count()``; at least 1)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def check_logical_cpus(n: int, cores: int | None = None) -> None:
    """Refuse a ``train.logical_cpus`` beyond :data:`LOGICAL_CPUS_PER_CORE` per core, before
    any TensorFlow work (0 and 1 mean no split).

    Args:
        n: ``train.logical_cpus``.
        cores: the cores of the machine (default: :func:`cpu_cores`).

    Raises:
        ConfigError: naming the value, the limit, the core count and the fix.
    """
    cores = cpu_cores() if cores is None else cores
    limit = LOGICAL_CPUS_PER_CORE * cores
    if n > limit:
        raise ConfigError(
            f"train.logical_cpus={n} is beyond this machine's limit of {limit} logical CPUs "
            f"({LOGICAL_CPUS_PER_CORE} per core x {cores} cores): logical CPUs only exercise "
            "the multi-replica code paths, each one more replica only slows every step down; "
            f"use train.logical_cpus={limit} or fewer (or GPUs)"
        )


def setup(train_cfg) -> tf.distribute.Strategy:
    """Split the CPU into ``train.logical_cpus`` logical devices if asked, then make the
    strategy of ``train.strategy`` (``mirrored`` without ``train.devices`` and without GPUs
    then mirrors over the logical CPUs). Call it before any other TensorFlow op.

    ``multi_worker`` first waits for the other tasks of ``TF_CONFIG``
    (:func:`wait_for_cluster`, :func:`join_cluster`), up to ``train.cluster_timeout_minutes``.

    Raises:
        ConfigError: for ``train.cluster_timeout_minutes`` <= 0 or ``train.logical_cpus`` beyond
            the machine's limit (:func:`check_logical_cpus`), before any TensorFlow work.
        DistributeError: see :func:`make_strategy`; or logical CPUs asked for after
            TensorFlow's devices were initialised.
        ClusterTimeoutError: peers of ``TF_CONFIG`` that did not answer in time.
    """
    timeout_s = cluster_timeout_s(train_cfg)
    devices = list(train_cfg.devices) if train_cfg.devices else None
    n = int(train_cfg.logical_cpus or 0)
    check_logical_cpus(n)
    if n > 1 and train_cfg.strategy != "multi_worker":
        cpu = tf.config.list_physical_devices("CPU")[0]
        try:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
            )
        except RuntimeError as e:
            if len(tf.config.list_logical_devices("CPU")) != n:
                raise DistributeError(
                    f"train.logical_cpus={n}: TensorFlow's devices are already initialised in "
                    "this process; set it in a fresh process (train.py does)"
                ) from e
        if devices is None and train_cfg.strategy == "mirrored":
            if not tf.config.list_logical_devices("GPU"):
                devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    return make_strategy(train_cfg.strategy, devices, cluster_timeout_s=timeout_s)


def input_pipelines(strategy: tf.distribute.Strategy) -> int:
    """The number of input pipelines: one per worker process (chief included)."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        cluster = tf_config().get("cluster", {})
        return len(cluster.get("worker", [])) + len(cluster.get("chief", []))
    return 1


def input_pipeline() -> int:
    """This process's input pipeline: 0 for the chief (or without a cluster), then the workers
    in ``TF_CONFIG`` order."""
    conf = tf_config()
    kind, index = task_of(conf)
    if kind is None or kind == "chief":
        return 0
    return index + len(conf["cluster"].get("chief", []))


def local_cluster(workers: int) -> list[str]:
    """``TF_CONFIG`` values (JSON) of a cluster of ``workers`` processes on 127.0.0.1, one per
    worker in index order, on free ports: for trying ``train.strategy=multi_worker`` on one
    machine (the tests and ``benchmarks/bench_workers.py`` do)."""
    import socket

    socks = [socket.socket() for _ in range(workers)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    hosts = [f"127.0.0.1:{s.getsockname()[1]}" for s in socks]
    for s in socks:
        s.close()
    return [
        json.dumps({"cluster": {"worker": hosts}, "task": {"type": "worker", "index": i}})
        for i in range(workers)
    ]
