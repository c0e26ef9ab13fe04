"""Start-up of a multi-worker run whose peers are missing, and values that cannot work: the wait
for the tasks of ``TF_CONFIG`` names the missing one and its timeout and ends non-zero, a signal
ends it at once, two tasks waiting for each other both go on, and ``train.logical_cpus`` beyond
the machine's limit is refused naming it (``sr.train.distribute``)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from sr.core.errors import ConfigError
from sr.data.service import free_port
from sr.train.distribute import (
    LOGICAL_CPUS_PER_CORE,
    ClusterTimeoutError,
    DistributeError,
    check_logical_cpus,
    cluster_timeout_s,
    cpu_cores,
    local_cluster,
    peers,
    replica_batch,
    setup,
    wait_for_cluster,
)
from tests.conftest import ROOT

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
ENV.pop("TF_CONFIG", None)


def cluster(ports: list[int], index: int = 0) -> dict:
    """A parsed ``TF_CONFIG`` of workers on 127.0.0.1 at ``ports``, this task ``index``."""
    return {
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
        "task": {"type": "worker", "index": index},
    }


def train_cfg(**values) -> SimpleNamespace:
    """The ``train`` keys that :func:`setup` reads, defaults as in ``TrainConfig``."""
    keys = dict(strategy="auto", devices=None, logical_cpus=0, cluster_timeout_minutes=10.0)
    return SimpleNamespace(**{**keys, **values})


# ------------------------------------------------------------------------------------------------
# waiting for the peers of TF_CONFIG
# ------------------------------------------------------------------------------------------------


def test_the_peers_are_the_other_chief_and_worker_tasks():
    conf = {
        "cluster": {"chief": ["a:1"], "worker": ["b:2", "c:3"], "evaluator": ["d:4"]},
        "task": {"type": "worker", "index": 0},
    }
    assert peers(conf) == [("chief 0", "a:1"), ("worker 1", "c:3")]


def test_a_peer_that_never_arrives_times_out_naming_it(caplog):
    mine, theirs = free_port(), free_port()  # nothing listens on theirs
    start = time.monotonic()
    with caplog.at_level(logging.INFO, logger="sr.train.distribute"):
        with pytest.raises(ClusterTimeoutError) as e:
            wait_for_cluster(cluster([mine, theirs]), timeout_s=1.2, poll_s=0.1, log_every_s=0.5)
    took = time.monotonic() - start
    message = str(e.value)
    assert f"worker 1 (127.0.0.1:{theirs}) of TF_CONFIG did not answer" in message
    assert "train.cluster_timeout_minutes=0.02 " in message  # 1.2 s
    assert "refused" in message.lower()  # why: nothing listens
    assert "raise train.cluster_timeout_minutes" in message
    assert 1.2 <= took < 60, took  # its 1.2 s, not a hang (the bound leaves room for any load)
    waits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("waiting for")]
    assert len(waits) >= 2, waits  # at once, then every log_every_s
    assert waits[0] == (
        f"waiting for worker 1 (127.0.0.1:{theirs}) of TF_CONFIG: 0 s of "
        "train.cluster_timeout_minutes=0.02"
    )


def test_the_wait_returns_at_once_when_the_peer_listens():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        start = time.monotonic()
        waited = wait_for_cluster(cluster([free_port(), port]), timeout_s=30)
    assert waited < 1 and time.monotonic() - start < 2


def test_the_wait_returns_when_a_late_peer_starts_listening():
    port = free_port()
    listener = socket.socket()

    def start_late():
        time.sleep(1.0)
        listener.bind(("127.0.0.1", port))
        listener.listen()

    threading.Thread(target=start_late).start()
    try:
        waited = wait_for_cluster(cluster([free_port(), port]), timeout_s=30, poll_s=0.1)
    finally:
        listener.close()
    assert 0.9 <= waited < 5, waited


def test_two_tasks_waiting_for_each_other_both_go_on():
    """Each task listens on its own port while it waits, so neither waits for the other forever;
    after its wait the port is free for TensorFlow's server (here a plain listener stands in)."""
    ports = [free_port(), free_port()]
    results: dict[int, float | BaseException] = {}
    servers: list[socket.socket] = []

    def task(i: int, delay: float):
        time.sleep(delay)
        try:
            results[i] = wait_for_cluster(cluster(ports, i), timeout_s=20, poll_s=0.1)
            servers.append(socket.create_server(("", ports[i])))  # TensorFlow's server
        except BaseException as e:  # noqa: BLE001  (reported by the assertion below)
            results[i] = e

    threads = [threading.Thread(target=task, args=(i, 0.7 * i)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for s in servers:
        s.close()
    assert all(isinstance(results.get(i), float) for i in range(2)), results
    assert len(servers) == 2


def test_a_task_whose_own_port_is_taken_is_refused_naming_it():
    with socket.create_server(("", 0)) as taken:
        mine = taken.getsockname()[1]
        with pytest.raises(DistributeError, match=f"worker 0 .*port {mine} is taken"):
            wait_for_cluster(cluster([mine, free_port()]), timeout_s=5)


def test_the_cluster_timeout_must_be_positive():
    assert cluster_timeout_s(train_cfg(cluster_timeout_minutes=0.5)) == 30.0
    for bad in (0, -1.0, float("nan"), "ten", True):
        with pytest.raises(ConfigError, match="cluster_timeout_minutes must be a number > 0"):
            cluster_timeout_s(train_cfg(cluster_timeout_minutes=bad))
    # setup checks it first, before any TensorFlow work or any wait
    with pytest.raises(ConfigError, match=r"cluster_timeout_minutes.*got 0"):
        setup(train_cfg(strategy="multi_worker", cluster_timeout_minutes=0))


def test_the_default_cluster_timeout_of_the_real_config(compose):
    assert cluster_timeout_s(compose().train) == 600.0


# ------------------------------------------------------------------------------------------------
# train.logical_cpus beyond the machine
# ------------------------------------------------------------------------------------------------


def test_logical_cpus_beyond_the_limit_are_refused_naming_it():
    check_logical_cpus(8, cores=2)  # 4 per core: allowed
    check_logical_cpus(0, cores=1)
    with pytest.raises(ConfigError) as e:
        check_logical_cpus(64, cores=2)
    message = str(e.value)
    assert "train.logical_cpus=64" in message
    assert f"limit of 8 logical CPUs ({LOGICAL_CPUS_PER_CORE} per core x 2 cores)" in message
    assert "use train.logical_cpus=8 or fewer" in message


def test_setup_refuses_too_many_logical_cpus_before_any_tensorflow_work():
    n = LOGICAL_CPUS_PER_CORE * cpu_cores() + 1
    with pytest.raises(ConfigError, match=f"logical_cpus={n} is beyond this machine's limit"):
        setup(train_cfg(strategy="mirrored", logical_cpus=n))


def test_a_global_batch_smaller_than_the_replicas_is_refused_naming_both():
    eight = SimpleNamespace(num_replicas_in_sync=8)
    assert replica_batch(16, eight) == 2
    with pytest.raises(ConfigError) as e:
        replica_batch(4, eight)
    assert "data.batch_size=4 (the global batch) gives less than 1 example to each of the 8" in (
        str(e.value)
    )
    assert "use data.batch_size=8 (or a multiple), or fewer replicas" in str(e.value)


# ------------------------------------------------------------------------------------------------
# in a process of its own: signals, train.py's exit code, TensorFlow's own set-up
# ------------------------------------------------------------------------------------------------

WAIT = (
    "import json, logging, sys\n"
    "logging.basicConfig(level=logging.INFO)\n"
    "from sr.train.distribute import wait_for_cluster\n"
    "wait_for_cluster(json.loads(sys.argv[1]), timeout_s=120)\n"
)


def read_until(proc: subprocess.Popen, text: str, timeout_s: float = 90) -> str:
    """The output of ``proc`` (stderr merged into stdout) up to the line holding ``text``; kills
    ``proc`` after ``timeout_s`` seconds."""
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if text in line:
                return "".join(seen)
    finally:
        timer.cancel()
    raise AssertionError(f"{text!r} never printed:\n{''.join(seen)}")


@pytest.mark.slow
def test_a_signal_ends_the_wait_at_once(monkeypatch, caplog):
    """SIGTERM to a process waiting for its cluster ends it within 3 s with exit code 143;
    SIGINT, sent in this process from inside the wait (at its first probe of the peer), ends it
    with ``SystemExit(130)``, the same handler's (``exit_on_signals``), and its handlers are
    restored afterwards."""
    import sr.train.distribute as distribute

    proc = subprocess.Popen(
        [sys.executable, "-c", WAIT, json.dumps(cluster([free_port(), free_port()]))],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    read_until(proc, "waiting for worker 1")
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(30)
    took = time.monotonic() - sent
    out = proc.stdout.read()
    assert code == 128 + signal.SIGTERM, out
    assert took < 60, took  # at once, not at the wait's 120 s (a loaded machine takes seconds)
    assert "SIGTERM received while waiting for the cluster: exiting" in out

    probe = distribute._probe

    def interrupted(address, timeout_s):
        os.kill(os.getpid(), signal.SIGINT)  # its handler runs here, in the main thread
        return probe(address, timeout_s)

    monkeypatch.setattr(distribute, "_probe", interrupted)
    before = signal.getsignal(signal.SIGINT)
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit) as stopped:
        distribute.wait_for_cluster(cluster([free_port(), free_port()]), timeout_s=120)
    assert stopped.value.code == 128 + signal.SIGINT
    assert "SIGINT received while waiting for the cluster: exiting" in caplog.text
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.slow
def test_train_py_exits_5_naming_the_missing_worker(tmp_path, compose, monkeypatch, caplog):
    """train.py's ``train`` (the exit code its ``main`` exits with, and the messages it logs),
    in this process: the wait happens before any TensorFlow work (a process adds nothing; the
    exit code of train.py reaching the shell: tests/test_distribute.py's diverging resume)."""
    import importlib.util

    conf = local_cluster(2)[0]
    peer = json.loads(conf)["cluster"]["worker"][1]
    monkeypatch.setenv("TF_CONFIG", conf)
    spec = importlib.util.spec_from_file_location("train_script", ROOT / "train.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    cfg = compose("train.strategy=multi_worker", "train.cluster_timeout_minutes=0.05")
    with caplog.at_level(logging.INFO):
        code, final = script.train(cfg, tmp_path / "run")
    out = caplog.text
    assert code == 5 and final == {}, out
    assert f"waiting for worker 1 ({peer}) of TF_CONFIG: 0 s of " in out
    assert f"worker 1 ({peer}) of TF_CONFIG did not answer within " in out
    assert "train.cluster_timeout_minutes=0.05 (3 s;" in out


JOIN = (
    "import logging, sys\n"
    "logging.basicConfig(level=logging.INFO)\n"
    "from sr.train.distribute import make_strategy\n"
    "make_strategy('multi_worker', cluster_timeout_s=float(sys.argv[1]))\n"
)


def join(listener: socket.socket, timeout_s: float) -> subprocess.Popen:
    """A process that makes the ``multi_worker`` strategy of a 2-worker cluster whose peer is
    ``listener``: something that answers TCP but is no TensorFlow worker, so TensorFlow's set-up
    waits for it to register."""
    conf = json.dumps(cluster([free_port(), listener.getsockname()[1]]))
    return subprocess.Popen(
        [sys.executable, "-c", JOIN, str(timeout_s)],
        env=dict(ENV, TF_CONFIG=conf),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.slow
def test_tensorflow_set_up_is_bounded_and_ctrl_c_ends_it_at_once():
    """Two processes, started together, each waiting in TensorFlow's set-up for a peer that
    answered: one has a 4-second bound, the other gets a SIGINT after 3 s."""
    with (
        socket.create_server(("127.0.0.1", 0)) as listener,
        socket.create_server(("127.0.0.1", 0)) as listener2,
    ):
        bounded, stopped = join(listener, timeout_s=4), join(listener2, timeout_s=120)
        out = read_until(stopped, "joining the cluster of TF_CONFIG")
        time.sleep(3)  # inside TensorFlow's set-up
        sent = time.monotonic()
        stopped.send_signal(signal.SIGINT)
        code = stopped.wait(30)
        took = time.monotonic() - sent
        assert code == -signal.SIGINT, out  # the signal's default action: the shell shows 130
        assert took < 60, took  # at once, not at its 120 s bound (whatever the machine's load)

        out = read_until(bounded, "joining the cluster of TF_CONFIG")
        code = bounded.wait(60)
        out += bounded.stdout.read()
    assert code == 1, out
    assert "Timeout (0:00:04)!" in out  # faulthandler's traceback, naming where it hung
    assert "join_cluster" in out
