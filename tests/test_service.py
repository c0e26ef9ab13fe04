"""The tf.data service (``data.service``): the data=tfrecord pipeline served by a dispatcher and
two workers on 127.0.0.1, the sharding between consumers, the errors, and the server script."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
import pytest
import tensorflow as tf

import sr.data.source
from sr.config import ConfigError, build_source, compose
from sr.core.degrade import make_lr
from sr.data import service
from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "data_service.py"
B, P, S = 4, 96, 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVERS = """
import threading
from sr.core.quiet import quiet_tensorflow
quiet_tensorflow()
from sr.data import service
dispatcher = service.start_dispatcher(0)
port = service.dispatcher_port(dispatcher)
workers = [
    service.start_worker(f"127.0.0.1:{port}", service.free_port(), "127.0.0.1") for _ in range(2)
]
print(f"dispatcher serving at grpc://127.0.0.1:{port}", flush=True)
threading.Event().wait()
"""


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """A dispatcher and two workers on 127.0.0.1, the servers of ``sr.data.service`` that
    ``scripts/data_service.py`` starts, all three in one process (one TensorFlow start-up; the
    script's own processes: test_the_script_serves_the_pipeline_with_a_worker_that_has_no_...),
    whose clients are the tests' own iterators and a train.py run; yields the dispatcher's
    address.

    A process, not servers in this one, so that the end of the module kills them at once: an
    in-process worker's stop() waits, idle and holding this process, for the tasks of jobs that
    it still runs (measured at this module's end: 0.3 s to 160 s, in no order of its tests)."""
    log = tmp_path_factory.mktemp("service") / "servers.log"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    with open(log, "w") as out:  # a file: a server nobody reads never blocks on a full pipe
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVERS], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        port = _wait_for_line(log, r"dispatcher serving at grpc://\S+:(\d+)")
        address = f"grpc://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while len(service.check_reachable(address, 5)["workers"]) < 2:
            assert time.monotonic() < deadline, "workers did not register"
            time.sleep(0.2)
        yield address
    finally:
        proc.kill()
        proc.wait()


def _wait_for_line(log, pattern: str, timeout: float = 120) -> str:
    """The first group of ``pattern`` once a line of the file ``log`` matches it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, log.read_text())
        if m:
            return m[1]
        time.sleep(0.1)
    raise AssertionError(f"no {pattern!r} in {log}:\n{log.read_text()}")


def _overrides(folders, *extra):
    return (
        "data=tfrecord",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        f"data.data_root={folders / 'root'}",
        "data.num_shards=2",
        f"data.batch_size={B}",
        *extra,
    )


@pytest.fixture(scope="module")
def source(folders):
    """The data=tfrecord source as train.py builds it (shards built), without data.service:
    the tests apply :func:`service.distribute` themselves."""
    src = build_source(compose(*_overrides(folders, "data.deterministic=true")))
    src.prepare()
    return src


def folders_of(source):
    """The ``folders`` fixture's root, from a source built on it."""
    return source.hr_dir.parent


def _digest(pair) -> str:
    return hashlib.sha1(b"".join(t.numpy().tobytes() for t in pair)).hexdigest()


@pytest.mark.slow  # the servers fixture: three processes to start
def test_service_batches_keep_the_pipeline_contract(servers, source):
    ds = service.distribute(sr.data.source.pairs_dataset(source), servers)
    assert ds.element_spec[0].shape.as_list() == [B, P // S, P // S, 1]
    assert ds.element_spec[1].shape.as_list() == [B, P, P, 1]
    it = iter(ds)
    for _ in range(3):
        lr, hr = next(it)
        assert lr.dtype == tf.float32 and hr.dtype == tf.float32
        assert lr.shape == (B, P // S, P // S, 1) and hr.shape == (B, P, P, 1)
        lr, hr = lr.numpy() * 255, hr.numpy() * 255
        for x in (lr, hr):
            assert 0 <= x.min() and x.max() <= 255
            assert np.abs(x - np.round(x)).max() < 1e-3  # the 8-bit grid
        # the project's LR operator of the (flipped) HR partner, away from the patch border
        # (the pair's LR was made from a crop with margin), as tests/test_loader.py checks
        own = make_lr(hr, S).numpy()
        diff = np.abs(lr - own)[:, 2:-2, 2:-2]
        assert diff.max() <= 1.0 + 1e-3 and (diff > 0.5).mean() < 0.01
    del it


@pytest.mark.slow
def test_realesrgan_rgb_pairs_are_made_on_the_service_workers(servers, folders):
    """Real-ESRGAN's degradation is TensorFlow ops only (JPEG, stateless draws, while loops):
    the workers run it from the serialized graph."""
    src = build_source(
        compose(*_overrides(folders, "degradation=realesrgan", "data.channels=rgb"))
    )
    src.prepare()
    it = iter(service.distribute(sr.data.source.pairs_dataset(src), servers))
    for _ in range(2):
        lr, hr = next(it)
        assert lr.shape == (B, P // S, P // S, 3) and hr.shape == (B, P, P, 3)
        x = lr.numpy() * 255
        assert 0 <= x.min() and x.max() <= 255 and np.abs(x - np.round(x)).max() < 1e-3
    del it


@pytest.mark.slow
def test_consumers_of_one_job_get_different_batches(servers, source):
    # each element is tagged on the worker that makes it: the time it was made, in ns, plus its
    # position (not a random draw: a global seed set earlier in the process would make the two
    # workers draw alike): a batch delivered to both consumers would show its tag twice
    tagged = (
        sr.data.source.pairs_dataset(source)
        .enumerate()
        .map(
            lambda i, pair: (
                *pair,
                tf.cast(tf.timestamp() * 1e9, tf.int64) * 1000 + i % 1000,
            )
        )
    )
    ds = service.distribute(tagged, servers, job_name="two")
    first, second = iter(ds), iter(ds)
    a = [int(next(first)[2]) for _ in range(8)]
    b = [int(next(second)[2]) for _ in range(8)]
    del first, second
    assert len(set(a)) == len(a) and len(set(b)) == len(b)
    assert not set(a) & set(b)


@pytest.mark.slow
def test_workers_do_not_make_the_same_batches(servers, source):
    # data.deterministic=true and 2 shard files for 2 workers: the worst case. With data.service
    # set, the source leaves its read shuffles unseeded and pairs_dataset builds them without
    # the global seed (service.unseeded), so that two workers (and two jobs) handed the same
    # shard files do not shuffle them alike. The global seed is set, as train.py sets it: it
    # used to fix the "unseeded" shuffles' seeds in the graph every worker runs (batches
    # repeated in 4 of 4 runs without service.unseeded, 0, 3 and 7 of 24 in three shorter ones)
    # 100 patches (stride 8), not 4: with so few records two workers' unseeded shuffles could
    # still meet by chance
    tf.random.set_seed(1)
    folders = folders_of(source)
    src = build_source(
        compose(
            "data=tfrecord",
            f"data.hr_dir={folders / 'train'}",
            "data.val_dir=null",
            f"data.data_root={folders / 'root-stride8'}",
            "data.num_shards=2",
            "data.stride=8",
            f"data.batch_size={B}",
            "data.deterministic=true",
            f"data.service={servers}",
        )
    )
    src.prepare()
    assert not src.checkpoint_iterator  # the position lives on the service: not checkpointed
    ds = sr.data.source.pairs_dataset(src)  # distributed by pairs_dataset itself
    first, second = iter(ds), iter(ds)
    batches = [_digest(next(it)) for _ in range(24) for it in (first, second)]
    del first, second
    repeated = len(batches) - len(set(batches))
    assert repeated == 0, f"{repeated} of {len(batches)} batches repeated"


def test_unseeded_leaves_seedless_shuffles_to_each_iterator():
    def build(unseeded: bool) -> list[int]:
        tf.random.set_seed(1)  # each worker runs the graph as built under this global seed
        make = lambda: tf.data.Dataset.range(1000).shuffle(1000).batch(1000)  # noqa: E731
        ds = service.unseeded(make) if unseeded else make()
        return next(iter(ds)).numpy().tolist()

    assert build(False) == build(False)  # seed=None under a global seed: alike everywhere
    fresh = build(True), build(True)
    assert fresh[0] != fresh[1] and sorted(fresh[0]) == list(range(1000))
    assert tf.compat.v1.get_seed(None)[0] == 1  # the process keeps its global seed


@pytest.mark.slow
def test_pairs_dataset_with_data_service_waits_for_a_worker(folders):
    """data.service sends the pipeline to the service: with no worker registered no batch comes
    (a local pipeline would give one at once), and the first worker to register serves it."""
    dispatcher = service.start_dispatcher(0)
    address = f"grpc://127.0.0.1:{service.dispatcher_port(dispatcher)}"
    src = build_source(compose(*_overrides(folders, f"data.service={address}")))
    src.prepare()
    worker = None
    with ThreadPoolExecutor(1) as pool:
        try:
            first = pool.submit(lambda: next(iter(sr.data.source.pairs_dataset(src))))
            done, _ = wait([first], timeout=5)
            assert not done, "a batch without any tf.data service worker: not sent to the service"
            worker = service.start_worker(address, 0, "127.0.0.1")
            lr, hr = first.result(timeout=120)
            assert lr.shape == (B, P // S, P // S, 1) and hr.shape == (B, P, P, 1)
        finally:
            if worker is None:  # the iterator waits forever without one: give it one to end
                worker = service.start_worker(address, 0, "127.0.0.1")
            first.result(timeout=120)
            worker.stop()
            dispatcher.stop()


def test_unsuitable_sharding_and_bad_addresses_are_refused():
    ds = tf.data.Dataset.range(3)
    with pytest.raises(ValueError, match="sharding 'file' is not usable"):
        service.distribute(ds, "grpc://127.0.0.1:1", sharding="file")
    assert service.parse_address("127.0.0.1:5050") == "grpc://127.0.0.1:5050"
    for bad in ("http://h:5050", "h", "grpc://h:0", "grpc://h:5050/x", ""):
        with pytest.raises(ValueError, match=r"data.service=.*expected grpc://HOST:PORT"):
            service.parse_address(bad)


@pytest.mark.slow
def test_unreachable_dispatcher_is_a_clear_error_within_a_bounded_time(source):
    port = _free_port()  # nothing listens there: TF alone would retry for an hour
    address = f"grpc://127.0.0.1:{port}"
    start = time.monotonic()
    with pytest.raises(service.ServiceError) as info:
        service.distribute(sr.data.source.pairs_dataset(source), address, check_timeout_s=5)
    assert time.monotonic() - start < 30
    message = str(info.value)
    assert address in message and f"--dispatcher-port {port}" in message
    assert "cannot connect" in message
    # something listens but never answers (no accept, no gRPC): the call's deadline
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        start = time.monotonic()
        with pytest.raises(service.ServiceError, match="no gRPC answer within 2 s"):
            service.check_reachable(f"127.0.0.1:{silent.getsockname()[1]}", timeout_s=2)
        assert time.monotonic() - start < 30


@pytest.mark.slow  # the servers fixture: three processes to start
def test_a_workers_port_is_not_taken_for_the_dispatcher(servers):
    worker = service.check_reachable(servers, 5)["workers"][0]
    with pytest.raises(service.ServiceError, match="not a dispatcher"):
        service.check_reachable(worker, 5)


def test_generator_mode_refuses_the_service(folders):
    cfg = compose(
        "data=generator", f"data.hr_dir={folders / 'train'}", "data.service=grpc://127.0.0.1:1"
    )
    with pytest.raises(ConfigError, match="data=tfrecord"):
        build_source(cfg)


def _read_until(proc, pattern: str, timeout: float = 60) -> tuple[re.Match, str]:
    seen, deadline = [], time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m, "".join(seen)
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"no {pattern!r} in:\n{''.join(seen)}")


def _script(*args, block_project=False):
    """``scripts/data_service.py`` in a subprocess; ``block_project``: with every import of the
    ``sr`` package failing (a worker needs TensorFlow only)."""
    code = (
        "import runpy, sys\n"
        + ("sys.modules['sr'] = None\n" if block_project else "")
        + f"sys.argv = [{str(SCRIPT)!r}, *{list(args)!r}]\n"
        + f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_the_script_serves_the_pipeline_with_a_worker_that_has_no_project_code(source):
    dispatcher = _script("--dispatcher-port", "0")
    worker = None
    try:
        m, _ = _read_until(dispatcher, r"dispatcher serving at grpc://\S+:(\d+)")
        address = f"127.0.0.1:{m[1]}"
        worker = _script("--worker", "--dispatcher", address, block_project=True)
        port, _ = _read_until(worker, r"worker serving at localhost:(\d+)")
        assert service.check_reachable(address, 5)["workers"] == [f"localhost:{port[1]}"]
        lr, hr = next(iter(service.distribute(sr.data.source.pairs_dataset(source), address)))
        assert lr.shape == (B, P // S, P // S, 1) and hr.shape == (B, P, P, 1)
        for proc in (worker, dispatcher):
            proc.send_signal(signal.SIGTERM)
            rest, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0, rest
            assert "SIGTERM received: stopping" in rest and "stopped" in rest
    finally:
        for proc in (worker, dispatcher):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_the_script_refuses_a_worker_without_a_dispatcher(caplog):
    """The script's ``main`` in this process (the test above runs it as a process): exit code 2,
    naming the command that starts the missing dispatcher."""
    from tests.fake_run import load_script

    port = _free_port()
    with caplog.at_level(logging.INFO):
        code = load_script("data_service").main(["--worker", "--dispatcher", f"127.0.0.1:{port}"])
    assert code == 2, caplog.text
    assert f"--dispatcher-port {port}" in caplog.text


TIMING = re.compile(r"\] step (\d+)/3  loss [\d.]+  step [\d.]+ ms  data-wait [\d.]+ ms")


@pytest.mark.slow
def test_train_py_runs_on_the_service(servers, source, folders, tmp_path, caplog):
    """train.py's run in this process (``train``: the exit code its ``main`` exits with, and
    the lines it logs) with ``data.service=`` the servers: its batches come from the service."""
    from tests.fake_run import load_script

    cfg = compose(
        *_overrides(folders),
        f"data.service={servers}",
        "model=espcn",
        "train.steps=3",
        "train.log_every=1",
    )
    with caplog.at_level(logging.INFO):
        code, final = load_script("train", ".").train(cfg, tmp_path / "run")
    out = caplog.text
    assert code == 0 and final["step"] == 3, out
    assert [int(m) for m in TIMING.findall(out)] == [1, 2, 3], out
    assert f"tf.data service at {servers}: 2 worker(s)" in out, out  # sent to the service
    assert (tmp_path / "run" / "checkpoints" / "ckpt-3.index").is_file()


def test_train_py_refuses_an_unreachable_dispatcher_at_start_up(folders, tmp_path, caplog):
    """train.py's run in this process (``train``: the exit code its ``main`` exits with; the
    exit code 2 of the process is proven by tests/test_faults.py and tests/test_train.py)."""
    from tests.fake_run import load_script

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = compose(*_overrides(folders), f"data.service=grpc://127.0.0.1:{port}", "train.steps=2")
    with caplog.at_level(logging.INFO):
        code, final = load_script("train", ".").train(cfg, tmp_path / "run")
    assert (code, final) == (2, {}), caplog.text
    assert f"no tf.data service dispatcher at data.service=grpc://127.0.0.1:{port}" in caplog.text
    assert "parameters" not in caplog.text  # refused before any model was built
