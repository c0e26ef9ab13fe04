"""The tf.data service (``data.service=grpc://HOST:PORT``): the whole input pipeline of
``data=tfrecord`` runs on remote workers, the trainer only receives ``(lr, hr)`` batches.

What the service runs: :func:`sr.data.source.pairs_dataset` applies :func:`distribute` to its
dataset right after the ``to_pairs`` map, so shard reading, shuffling, batching, parsing, the LR
operator and the flips all run on the service's workers; the trainer receives the float32 pairs
(``B * (P^2 + (P/s)^2) * 4`` bytes a batch, 2.5 MB for B=64, P=96, s=4, compressed by TF).

Servers (``scripts/data_service.py`` wraps :func:`start_dispatcher` and :func:`start_worker`):

- one dispatcher (``--dispatcher-port P``) hands out the work; the trainers connect to it;
- N workers (``--worker --dispatcher HOST:P``) register with it and serve batches directly to
  the trainers, at the address they register (``--host``; clients on other machines must be able
  to resolve it).

A worker needs TensorFlow (the trainers' version) and nothing of this project: the dataset is
sent to it as a TensorFlow graph (``tf.data`` ops and traced functions, no ``py_function``), so
none of our Python code runs there. It does need the shard files at the paths the trainer sees
them (they are constants of the graph): put ``data.tfrecord_dir`` (or ``data.data_root``) on a
file system every worker mounts at the same path (NFS, GCS, ...). This module imports only the
standard library, TensorFlow and ``grpc`` (a TensorFlow dependency), so that the script can load
it from a checkout without the project installed.

Sharding (:func:`distribute`): ``ShardingPolicy.DYNAMIC``, see its docstring for why.

Failure modes (measured with TF 2.21): TensorFlow's own client never gives up quickly on an
unreachable dispatcher. Applying ``tf.data.experimental.service.distribute`` registers the dataset
at once (an eager ``RegisterDataset`` op) and retries ``UNAVAILABLE`` with a backoff growing to
~10 s for 60 minutes (``kRetryTimeoutMicros`` in ``data_service_ops.cc``; the log shows "Will
retry in ..." lines, nothing else); iterating retries ``GetOrCreateJob`` with no deadline at all;
with no worker registered, ``next()`` waits forever. No option bounds these client retries
(``WorkerConfig.dispatcher_timeout_ms`` bounds a worker's retries only). Hence
:func:`check_reachable`, run by :func:`distribute` first: a TCP connect and one gRPC call
(``DispatcherService/GetVersion``) with deadlines, so a wrong address or a dispatcher not started
is a :class:`ServiceError` within ``timeout_s``; and a warning when no worker is registered. A
dispatcher that dies after the check still makes TF retry as above.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import time
from collections.abc import Callable
from enum import Enum

import tensorflow as tf

log = logging.getLogger(__name__)

KEY = "data.service"
SCHEME = "grpc://"
START_DISPATCHER = "python scripts/data_service.py --dispatcher-port {port}"
START_WORKER = "python scripts/data_service.py --worker --dispatcher {host}:{port}"
_DISPATCHER_RPC = "/tensorflow.data.DispatcherService/"
_ADDRESS = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})")


class ServiceError(ValueError):
    """The tf.data service at ``data.service`` cannot be used: nothing listens there, or what
    listens is not a tf.data dispatcher. Names the address and the command to start one."""


class Sharding(str, Enum):
    """The sharding policies :func:`distribute` accepts (values as in ``ShardingPolicy``)."""

    DYNAMIC = "dynamic"
    OFF = "off"


# -- addresses ------------------------------------------------------------------------------------
def parse_address(value) -> str:
    """The dispatcher address of ``data.service``, normalized to ``grpc://HOST:PORT``.

    Accepts ``grpc://HOST:PORT`` and a bare ``HOST:PORT`` (the form the scripts print and TF's
    own ``service`` argument takes; the default protocol is gRPC anyway). HOST is a name, an IPv4
    address or a bracketed IPv6 address (``[::1]``); PORT is 1..65535.

    Raises:
        ValueError: naming ``data.service``, the value and the expected form, for anything else
            (another scheme, a missing port, a path, spaces).
    """

    def bad(why: str) -> ValueError:
        return ValueError(
            f"{KEY}={value!r} is not a tf.data service dispatcher address ({why}): expected "
            f"{SCHEME}HOST:PORT, e.g. {SCHEME}dispatcher.example.org:5050 (start one with "
            f"{START_DISPATCHER.format(port=5050)})"
        )

    if not isinstance(value, str) or not value.strip():
        raise bad("empty" if isinstance(value, str) or value is None else "not a string")
    text = value.strip()
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme.lower() != "grpc":
            raise bad(f"protocol {scheme!r}; the tf.data service speaks grpc")
        text = rest
    m = _ADDRESS.fullmatch(text)
    if not m:
        raise bad("not HOST:PORT")
    port = int(m["port"])
    if not 1 <= port <= 65535:
        raise bad(f"port {port} is out of 1..65535")
    host = m["host"]
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise bad(f"{host} is not an IPv6 address") from None
    return f"{SCHEME}{host}:{port}"


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = parse_address(address)[len(SCHEME) :].rpartition(":")
    return host.strip("[]"), int(port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- probing --------------------------------------------------------------------------------------
def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _fields(buf: bytes):
    """(field number, value) of a serialized protobuf message (varint and bytes fields)."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        kind = key & 7
        if kind == 0:
            value, i = _varint(buf, i)
        elif kind == 2:
            n, i = _varint(buf, i)
            value, i = buf[i : i + n], i + n
        elif kind in (1, 5):
            n = 8 if kind == 1 else 4
            value, i = buf[i : i + n], i + n
        else:
            raise ValueError(f"unexpected protobuf wire type {kind}")
        yield key >> 3, value


def _call(address: str, method: str, timeout_s: float) -> bytes:
    """One unary call of ``DispatcherService/<method>`` with an empty request (raw bytes; the
    request messages of GetVersion and GetWorkers have no required fields)."""
    import grpc

    host, port = _host_port(address)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with grpc.insecure_channel(target) as channel:
        return channel.unary_unary(_DISPATCHER_RPC + method)(b"", timeout=timeout_s)


def check_reachable(address: str, timeout_s: float = 10.0) -> dict:
    """Check that a tf.data service dispatcher answers at ``address``, within ``timeout_s``
    seconds in all (TF's own client would retry for an hour, see the module docstring).

    Two gates: a TCP connect (nothing listening, host unknown or unreachable), then one gRPC call
    ``DispatcherService/GetVersion`` with a deadline (something listens but is not a tf.data
    dispatcher: a worker's port, another server, a process that does not answer). Then lists the
    registered workers (``GetWorkers``).

    Args:
        address: ``grpc://HOST:PORT`` or ``HOST:PORT`` (:func:`parse_address`).
        timeout_s: bound of the whole check, seconds (a refused connection fails at once).

    Returns:
        ``{"address": "grpc://HOST:PORT", "version": int, "workers": [worker addresses],
        "seconds": float}`` (``version`` is the dispatcher's data service protocol version).

    Raises:
        ValueError: for a malformed address (:func:`parse_address`).
        ServiceError: naming the address, what failed and the command that starts a dispatcher.
    """
    address = parse_address(address)
    host, port = _host_port(address)
    start = time.monotonic()
    fix = (
        f"start one there with `{START_DISPATCHER.format(port=port)}` (and workers with "
        f"`{START_WORKER.format(host=host, port=port)}`), or set {KEY} to its address"
    )
    deadline = start + timeout_s

    def left() -> float:
        return max(0.05, deadline - time.monotonic())

    try:
        with socket.create_connection((host, port), timeout=left()):
            pass
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else str(e)
        raise ServiceError(
            f"no tf.data service dispatcher at {KEY}={address}: cannot connect to {host}:{port} "
            f"({why}, after {time.monotonic() - start:.1f} s); {fix}"
        ) from e
    try:
        import grpc
    except ImportError:  # TensorFlow depends on grpcio; without it only the TCP gate runs
        log.warning("grpc not importable: %s only checked with a TCP connect", address)
        return {"address": address, "version": None, "workers": None, "seconds": 0.0}
    try:
        reply = _call(address, "GetVersion", left())
        version = dict(_fields(reply)).get(1, 0)
        workers = [
            dict(_fields(info)).get(1, b"").decode()
            for field, info in _fields(_call(address, "GetWorkers", left()))
            if field == 1
        ]
    except grpc.RpcError as e:
        code = e.code()
        what = {
            grpc.StatusCode.UNIMPLEMENTED: "it answers gRPC but is not a dispatcher (a tf.data "
            "service worker's port?)",
            grpc.StatusCode.DEADLINE_EXCEEDED: f"no gRPC answer within {timeout_s:g} s",
        }.get(code, f"gRPC {code.name}: {e.details()}")
        raise ServiceError(
            f"no tf.data service dispatcher at {KEY}={address}: something listens on "
            f"{host}:{port}, but {what}; {fix}"
        ) from e
    return {
        "address": address,
        "version": int(version),
        "workers": workers,
        "seconds": round(time.monotonic() - start, 3),
    }


# -- the client side ----------------------------------------------------------------------------
def distribute(
    ds: tf.data.Dataset,
    address: str,
    job_name: str | None = None,
    sharding: Sharding | str = Sharding.DYNAMIC,
    *,
    check_timeout_s: float | None = 10.0,
) -> tf.data.Dataset:
    """``ds`` run by the tf.data service at ``address``: everything ``ds`` does happens on the
    service's workers; the returned dataset (same element spec) fetches the elements from them.

    The sharding policy is ``DYNAMIC`` (``sharding="dynamic"``, the default), because of what
    our dataset is: endless (``repeat()`` over the shard list, shuffled each epoch), seeded
    (shuffles by ``stream_seed``, flips by ``(stream_seed, batch number)``) and pre-batched.

    - ``DYNAMIC``: the dispatcher splits the dataset's source, the shuffled and repeated list of
      shard files: each file of each epoch goes to one worker, which reads it (through its own
      interleave, shuffle buffer and batching) into batches. Each record of an epoch reaches at
      most one worker, and each batch is delivered to one consumer only. Nothing is dropped,
      except the rest of a file a worker was reading when it died (at most once). Caveat,
      measured: every worker runs the same graph, so with seeded shuffles (``stream_seed``,
      or ``seed=None`` under a global seed) two workers handed the same sequence of files
      (likely with few shards, e.g. 2 files and 2 workers) replay the same shuffle and make
      identical batches (1-3 of 32 batches in 2 of 3 runs with ``data.deterministic=true``).
      Hence under the service the read shuffles take ``seed=None`` and
      :func:`sr.data.source.pairs_dataset` builds the pipeline with :func:`unseeded`: each
      worker draws its own (the order is not reproducible anyway, see below). A batch mixes the
      records of the files that one worker holds (up to ``num_shards`` of them), not of all
      files: keep ``data.num_shards`` well above the number of workers. Workers may join or
      leave at any time.
    - ``OFF`` (each worker runs the whole dataset) with a shared job: consumers split the
      elements, but every worker produces the same stream, since ours is seeded: measured with
      two workers and ``data.deterministic=true``, 9 of 24 batches were delivered twice (4 and 5
      repeats within one consumer, 7 shared by both); without ``deterministic`` duplicates are
      rarer but not excluded. Refused unless asked for (``sharding="off"``, for tests).
    - ``FILE``, ``DATA`` (static sharding, like ``AutoShardPolicy``): need a fixed list of workers
      in the dispatcher's config and each trainer reading only from a worker on its own host;
      ``DATA`` also makes every worker read all the data to keep 1/N. Not for a shared pool of
      data workers; refused.

    Consumers: with ``job_name=None`` each iterator gets a job of its own (one trainer process).
    Several consumers (each worker of a ``MultiWorkerMirroredStrategy`` cluster, or two iterators
    in a test) that pass the same ``job_name`` read one job, first come first served: each batch
    goes to exactly one of them, and together they see the stream once (``distribute``'s docs:
    the strategy's own auto-sharding is then off). A ``job_name`` must be unique per training run
    for the life of the dispatcher (a later run with the same name attaches to the old job).

    Determinism lost: which worker reads which file, and which worker's batch a trainer gets
    next, depend on timing, so the batch sequence differs from run to run whatever
    ``data.deterministic`` says; that option only orders each worker's own interleave (and
    slows it). Every worker numbers its batches from ``start`` on its own (``enumerate`` runs on
    the worker), so flips, a function of (seed, number), repeat across workers (on other
    patches). The stream is still made of the same kind of batches: random crops of the shards,
    LR by the project's operator, flips uniform.

    Resume: the iterator of a service dataset cannot be saved (``tf.train.Checkpoint`` of it
    raises ``UnimplementedError: SaveInternal is not yet supported``, checked with TF 2.21), so a
    checkpoint must not hold it, and a resumed run starts a new job: the service's position in
    the stream is not restored (the new job starts again from the first shuffled epoch of the
    files), and batches may repeat or be skipped relative to an uninterrupted run.

    Args:
        ds: the dataset to run on the service (``pairs_dataset``'s, after the ``to_pairs`` map).
        address: ``data.service``: ``grpc://HOST:PORT`` or ``HOST:PORT``.
        job_name: shared by the consumers of one training run; None: a job per iterator.
        sharding: ``"dynamic"`` (default) or ``"off"``; others raise ValueError.
        check_timeout_s: run :func:`check_reachable` with this bound first (None: skip it, and
            rely on TF's retries).

    Returns:
        The dataset of the service's elements.

    Raises:
        ValueError: malformed address, unknown or unsuitable sharding, empty ``job_name``.
        ServiceError: no dispatcher answers at ``address`` within ``check_timeout_s``.
    """
    address = parse_address(address)
    try:
        policy = Sharding(str(getattr(sharding, "value", sharding)).lower())
    except ValueError:
        raise ValueError(
            f"sharding {sharding!r} is not usable for the endless, seeded patch stream: use "
            "'dynamic' (each shard file of each epoch read by one worker; FILE/DATA need a fixed "
            "worker list and trainer-local workers)"
        ) from None
    if job_name is not None and not (isinstance(job_name, str) and job_name):
        raise ValueError(f"job_name must be a non-empty string or None, got {job_name!r}")
    if check_timeout_s is not None:
        info = check_reachable(address, check_timeout_s)
        if info["workers"] == []:
            host, port = _host_port(address)
            log.warning(
                "tf.data service at %s has no worker yet: training waits for one; start "
                "workers with `%s`",
                address,
                START_WORKER.format(host=host, port=port),
            )
        else:
            log.info(
                "tf.data service at %s: %s worker(s) %s, sharding %s, job %s",
                address,
                "?" if info["workers"] is None else len(info["workers"]),
                ", ".join(info["workers"] or []),
                policy.value,
                job_name or "(own)",
            )
    tf_policy = {
        Sharding.DYNAMIC: tf.data.experimental.service.ShardingPolicy.DYNAMIC,
        Sharding.OFF: tf.data.experimental.service.ShardingPolicy.OFF,
    }[policy]
    return ds.apply(
        tf.data.experimental.service.distribute(
            processing_mode=tf_policy, service=address, job_name=job_name
        )
    )


def unseeded(build: Callable[[], tf.data.Dataset]) -> tf.data.Dataset:
    """``build()``'s dataset with its seedless random ops (``shuffle(seed=None)``, a stateful
    ``tf.random`` op without ``seed``) drawing fresh seeds in every iterator, hence on every
    worker of the service, even when the process has a global seed.

    Why: a global seed (``tf.random.set_seed``; ``keras.utils.set_random_seed`` at start-up)
    turns ``seed=None`` into fixed op seeds (the global seed and a counter) written into the
    dataset's graph, and every worker runs that graph: all workers, and all jobs, then shuffle
    alike, so workers handed the same shard files make identical batches (measured with 2
    shards and 2 workers: 0, 3 and 7 of 24 batches repeated; none with this function).

    How: ``build`` is traced once in a ``tf.function`` whose graph has no seed
    (``tf.random.set_seed(None)`` inside a trace sets that graph's seed only; the process keeps
    its own). Seeds given explicitly are kept. ``build`` runs once, as Python, at the trace.
    """

    @tf.function(autograph=False)
    def traced() -> tf.data.Dataset:
        tf.random.set_seed(None)
        return build()

    return traced()


# -- the server side ------------------------------------------------------------------------------
def start_dispatcher(
    port: int = 0, work_dir: str | None = None
) -> tf.data.experimental.service.DispatchServer:
    """A started dispatcher listening on ``port`` (0: a free one; :func:`dispatcher_port` says
    which).

    Args:
        port: TCP port (all interfaces).
        work_dir: folder for the dispatcher's journal: with it the dispatcher runs in
            fault-tolerant mode, and a restarted one recovers its registered datasets and jobs
            (training continues after a dispatcher restart instead of failing).
    """
    config = tf.data.experimental.service.DispatcherConfig(
        port=int(port), work_dir=work_dir, fault_tolerant_mode=bool(work_dir)
    )
    return tf.data.experimental.service.DispatchServer(config)


def worker_host(dispatcher: str, host: str | None = None) -> str:
    """The name a worker registers for the trainers to reach it: ``host`` if given, else
    ``localhost`` when ``dispatcher`` is on a loopback address (all on one machine), else this
    machine's host name."""
    if host:
        return host
    return "localhost" if _is_loopback(_host_port(dispatcher)[0]) else socket.gethostname()


def start_worker(
    dispatcher: str,
    port: int = 0,
    host: str | None = None,
    *,
    check_timeout_s: float | None = 10.0,
) -> tf.data.experimental.service.WorkerServer:
    """A started worker registered with ``dispatcher``.

    Args:
        dispatcher: the dispatcher's ``HOST:PORT`` (or ``grpc://HOST:PORT``).
        port: the worker's TCP port (0: a free one, not told; pass :func:`free_port`'s to know
            it).
        host: the name or IP under which the trainers reach this worker (it is what the worker
            registers). Default: ``localhost`` when the dispatcher is on a loopback address,
            else this machine's host name.
        check_timeout_s: check the dispatcher first (:func:`check_reachable`), so that a typo is
            an error rather than an hour of retries; None: skip.

    Raises:
        ServiceError: if no dispatcher answers at ``dispatcher``.
    """
    address = parse_address(dispatcher)
    if check_timeout_s is not None:
        check_reachable(address, check_timeout_s)
    host = worker_host(address, host)
    bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
    config = tf.data.experimental.service.WorkerConfig(
        dispatcher_address=address[len(SCHEME) :],
        worker_address=f"{bracketed}:%port%",
        port=int(port),
    )
    return tf.data.experimental.service.WorkerServer(config)


def free_port() -> int:
    """A TCP port no one listens on at the time of the call (the system's pick for port 0), to
    start a worker on a port known beforehand (``WorkerServer`` does not say which port 0 became;
    a ``DispatchServer``'s ``target`` does). Another process may take it before the server
    binds it: the server then fails to start, naming the port."""
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def dispatcher_port(server: tf.data.experimental.service.DispatchServer) -> int:
    """The TCP port a started dispatcher listens on, from its ``target``
    (``grpc://localhost:PORT``)."""
    return _host_port(server.target)[1]
