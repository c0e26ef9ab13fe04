"""Run a tf.data service dispatcher or worker for ``train.py data=tfrecord data.service=...``.

One dispatcher, N workers on other machines, the trainer anywhere (the same commands as the
tf.data service section of docs/data.md)::

    # on host A: the dispatcher (with --work-dir it journals its state and survives a restart)
    python scripts/data_service.py --dispatcher-port 5050 [--work-dir /shared/sr-dispatcher]
    # on hosts B, C, ...: one worker each, registering under their host name (or --host)
    python scripts/data_service.py --worker --dispatcher A:5050 --worker-port 5051
    # the trainer
    python train.py data=tfrecord data.service=grpc://A:5050

Both block until Ctrl-C or SIGTERM, log the address they serve at, and exit with 0 after
stopping the server (exit 2 for a bad argument or an unreachable dispatcher, 1 if the server
cannot start, e.g. the port is taken).

What a worker needs: TensorFlow (the trainer's version) and the shard files at the same path
as the trainer sees them (``data.tfrecord_dir``, e.g. on a shared file system); not this
project. The trainer sends the pipeline as a TensorFlow graph (reading, shuffling, parsing, the
LR operator, the flips: all TF ops, no Python), so no ``pip install -e`` on the workers: this
script and ``sr/data/service.py`` (which it loads by path, importing only TensorFlow and grpc)
are enough.

``--host``: the name the trainers use to reach this worker (the worker registers it with the
dispatcher, which passes it on to them). Default: ``localhost`` when the dispatcher is on a
loopback address (all on one machine), else this machine's host name.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import signal
import socket
import sys
import threading
from pathlib import Path


def _by_path(*parts: str):
    """A module of the project loaded by path (``sr/data/service.py``, ``sr/core/quiet.py``):
    they import nothing of the project, so the script runs from a checkout on a machine where
    the project is not installed."""
    path = Path(__file__).resolve().parents[1].joinpath(*parts)
    spec = importlib.util.spec_from_file_location("sr_" + "_".join(parts)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


log = logging.getLogger("data_service")


def _service_module():
    """``sr/data/service.py`` loaded by path (:func:`_by_path`)."""
    return _by_path("sr", "data", "service.py")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    role = p.add_mutually_exclusive_group(required=True)
    role.add_argument("--dispatcher-port", type=int, metavar="P", help="run a dispatcher on P")
    role.add_argument("--worker", action="store_true", help="run a worker")
    p.add_argument("--work-dir", help="dispatcher: journal folder (fault-tolerant mode)")
    p.add_argument("--dispatcher", metavar="HOST:P", help="worker: the dispatcher's address")
    p.add_argument("--worker-port", type=int, default=0, metavar="Q", help="worker: port (0: any)")
    p.add_argument("--host", help="worker: name or IP the trainers reach it at")
    p.add_argument("--timeout", type=float, default=10.0, help="worker: dispatcher check (s)")
    args = p.parse_args(argv)
    if args.worker and not args.dispatcher:
        p.error("--worker needs --dispatcher HOST:P")
    if args.dispatcher_port is not None and (args.dispatcher or args.host):
        p.error("--dispatcher and --host are options of --worker")
    if args.worker and args.work_dir:
        p.error("--work-dir is an option of the dispatcher (--dispatcher-port)")
    for name in ("dispatcher_port", "worker_port"):
        port = getattr(args, name)
        if port is not None and not 0 <= port <= 65535:
            p.error(f"--{name.replace('_', '-')} must be in 0..65535, got {port}")
    return args


def wait_for_signal() -> str:
    """Block until SIGINT or SIGTERM; return its name. (``server.join()`` would block in C++,
    where Python's signal handlers never run.)"""
    got: list[str] = []
    done = threading.Event()

    def handler(signum, _frame):
        got.append(signal.Signals(signum).name)
        done.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    while not done.wait(1.0):
        pass
    return got[0]


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    _by_path("sr", "core", "quiet.py").quiet_tensorflow()  # checked: TensorFlow, INFO hidden
    service = _service_module()
    try:
        if args.worker:
            port = args.worker_port or service.free_port()
            server = service.start_worker(
                args.dispatcher, port, args.host, check_timeout_s=args.timeout
            )
            log.info(
                "worker serving at %s:%d, registered with dispatcher %s (Ctrl-C or SIGTERM stops)",
                service.worker_host(args.dispatcher, args.host),
                port,
                service.parse_address(args.dispatcher),
            )
        else:
            server = service.start_dispatcher(args.dispatcher_port, args.work_dir)
            here = f"{socket.gethostname()}:{service.dispatcher_port(server)}"
            log.info(
                "dispatcher serving at grpc://%s%s; trainers: data.service=grpc://%s; workers: "
                "--worker --dispatcher %s (Ctrl-C or SIGTERM stops)",
                here,
                f", journal in {args.work_dir}" if args.work_dir else "",
                here,
                here,
            )
    except ValueError as e:  # ServiceError too: a bad address, no dispatcher there
        log.error("%s", e)
        return 2
    except Exception as e:  # tf.errors.*: port taken, work dir unusable
        log.error("cannot start the %s: %s", "worker" if args.worker else "dispatcher", e)
        return 1
    name = wait_for_signal()
    log.info("%s received: stopping", name)
    server.stop()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
