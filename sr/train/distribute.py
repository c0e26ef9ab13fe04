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

import json
import logging
import os
import shutil
from pathlib import Path

import tensorflow as tf

from sr.config import TRAIN_CHOICES
from sr.core.errors import ConfigError

log = logging.getLogger(__name__)

STRATEGIES = TRAIN_CHOICES["strategy"]  # the choices of train.strategy (its schema's field)


class DistributeError(ConfigError):
    """A strategy that cannot run here, or a batch that does not split over its replicas."""


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


def make_strategy(name: str, devices=None) -> tf.distribute.Strategy:
    """The strategy of ``train.strategy`` (see the module docstring). Create it before any other
    TensorFlow op of the process (``MultiWorkerMirroredStrategy`` requires it).

    Args:
        name: one of :data:`STRATEGIES`.
        devices: ``train.devices``, a list of device names (``["/gpu:0", "/gpu:1"]``) or None.

    Raises:
        DistributeError: for an unknown name, ``multi_worker`` without ``TF_CONFIG``, or devices
            that are not visible (names them and the visible ones).
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
        return tf.distribute.MultiWorkerMirroredStrategy()
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
        DistributeError: if the global batch does not divide by the replicas (names both and the
            nearest batch sizes that do).
    """
    n = strategy.num_replicas_in_sync
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


def setup(train_cfg) -> tf.distribute.Strategy:
    """Split the CPU into ``train.logical_cpus`` logical devices if asked, then make the
    strategy of ``train.strategy`` (``mirrored`` without ``train.devices`` and without GPUs
    then mirrors over the logical CPUs). Call it before any other TensorFlow op.

    Raises:
        DistributeError: see :func:`make_strategy`; or logical CPUs asked for after
            TensorFlow's devices were initialised.
    """
    devices = list(train_cfg.devices) if train_cfg.devices else None
    n = int(train_cfg.logical_cpus or 0)
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
    return make_strategy(train_cfg.strategy, devices)


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
