"""sr.train.rundir: one owner per run directory, default directories that cannot collide, a
resume that is refused when it cannot restore the run, and the run's first config kept; under
--multirun, one owner per sweep and per job directory, and no resume."""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import hydra
import pytest
import tensorflow as tf
from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import setup_globals
from hydra.types import RunMode
from omegaconf import OmegaConf, open_dict, read_write

from sr.core.errors import RunDirError
from sr.core.runfiles import load_run_config
from sr.loading.models import load_model_from_run
from sr.train.rundir import (
    LOCK_FILE,
    RunDirBusy,
    RunDirCallback,
    RunDirLock,
    check_sweep,
    claim,
    sweep_job_dirs,
)
from tests.conftest import ROOT

TINY = ("data=generator", "data.batch_size=4", "train.steps=2", "train.log_every=1")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


RUNS = """
import base64, contextlib, io, json, logging, os, runpy, shutil, sys
from pathlib import Path
from hydra.core.global_hydra import GlobalHydra
results = []
for argv, env, watched, copied in json.loads(sys.argv[1]):
    if copied:
        shutil.copytree(copied, watched)
    os.environ.update(env)
    sys.argv = [argv[0], *argv[1:]]
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as e:
            code = e.code
    for key in env:
        del os.environ[key]
    GlobalHydra.instance().clear()
    for handler in logging.root.handlers[:]:  # as a new process: no handler of the last run's
        logging.root.removeHandler(handler)
        handler.close()
    files = {
        str(p.relative_to(watched)): base64.b64encode(p.read_bytes()).decode()
        for p in Path(watched).rglob("*")
        if p.is_file()
    }
    results.append((code, out.getvalue(), files))
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def runs(folders, tmp_path_factory) -> dict[str, tuple]:
    """Four train.py runs, one after the other in one process (``train.py`` run as
    ``__main__``, its ``SystemExit`` caught, Hydra's and the logging's state cleared between
    them; a refusal's exit code through a process of its own: test_train_refusals.py's
    test_train_py_refuses_before_any_work_naming_the_key): ``trained``, a
    finished 2-step ESPCN run; ``held``, a new run into a directory this process holds;
    ``tf_config``, the finished run given with a malformed TF_CONFIG
    (``train.strategy=multi_worker``), refused at start-up; ``resumed``, a copy of the finished
    run (made after those) resumed to step 3 (``resume=`` alone: no ``hydra.run.dir``). For
    each: its directory, its exit code and output, and the files of the directory it ran in
    right after it; and ``held_before``, the files of the held directory before the runs."""
    trained = tmp_path_factory.mktemp("trained") / "run"
    held = tmp_path_factory.mktemp("held") / "run"
    resumed = tmp_path_factory.mktemp("resumed") / "run"
    runs = {
        "trained": (trained, (), {}),
        "held": (held, (), {}),
        "tf_config": (
            trained,
            ("train.strategy=multi_worker",),
            {"TF_CONFIG": '{"cluster": {"worker": ['},
        ),
        "resumed": (resumed, (f"resume={resumed}", "train.steps=3"), {}),
    }
    calls = [
        (
            [
                str(ROOT / "train.py"),
                f"data.hr_dir={folders / 'train'}",
                f"data.val_dir={folders / 'val'}",
                *TINY,
                *overrides,
                *([] if run_dir == resumed else [f"hydra.run.dir={run_dir}"]),
            ],
            env,
            str(run_dir),
            str(trained) if run_dir == resumed else None,
        )
        for run_dir, overrides, env in runs.values()
    ]
    with RunDirLock(held):
        held_before = snapshot(held)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        proc = subprocess.run(
            [sys.executable, "-c", RUNS, json.dumps(calls)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(proc.stdout.splitlines()[-1])
    done = {
        name: (run_dir, code, out, {k: base64.b64decode(v) for k, v in files.items()})
        for (name, (run_dir, _, _)), (code, out, files) in zip(runs.items(), results)
    }
    return {**done, "held_before": held_before}


@pytest.fixture(scope="module")
def trained(runs) -> Path:
    """A finished 2-step ESPCN run."""
    run, code, out, _ = runs["trained"]
    assert code == 0, out
    return run


@pytest.fixture(scope="module")
def refused(runs, trained) -> tuple[dict[str, bytes], tuple[int, str]]:
    """A train.py run given the finished run that must be refused at start-up (a malformed
    TF_CONFIG with ``hydra.run.dir=`` the run): the run's files before it (and right after it),
    and its (exit code, output)."""
    *_, before = runs["trained"]
    _, code, out, after = runs["tf_config"]
    assert after == before, out
    return before, (code, out)


@pytest.mark.slow
def test_a_held_directory_is_refused_naming_the_holder_and_left_untouched(runs):
    run, code, out, after = runs["held"]  # after: as the run left them, the lock still held
    assert code == 2, out
    holder = f"pid {os.getpid()} on host {socket.gethostname()} since "
    assert f"run directory {run} is in use by another run: {holder}" in out
    before = runs["held_before"]
    assert after == before == {LOCK_FILE: (run / LOCK_FILE).read_bytes()}
    with RunDirLock(run):
        with pytest.raises(RunDirBusy, match=f"in use by another run: {holder}"):
            RunDirLock(run).acquire()  # another open of the file: refused in-process too
    assert RunDirLock(run).holder() is None  # released on leaving the context


def test_a_lock_file_left_by_a_killed_process_does_not_block(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    hold_and_die = (
        "import fcntl, os, signal, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        'os.write(fd, b\'{"pid": %d, "host": "h", "since": "t"}\' % os.getpid())\n'
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", hold_and_die, str(run / LOCK_FILE)])
    assert proc.returncode == -9 and '"host": "h"' in (run / LOCK_FILE).read_text()
    lock = RunDirLock(run)
    assert lock.holder() is None
    with lock:
        assert json.loads((run / LOCK_FILE).read_text())["pid"] == os.getpid()


@pytest.mark.slow
def test_a_start_up_failure_given_a_finished_run_leaves_its_files_byte_identical(trained, refused):
    """A malformed TF_CONFIG with ``hydra.run.dir=`` a finished run: the guard's own error is a
    refusal (exit 2) before Hydra writes; every file of the run, ``.hydra/config.yaml`` and
    ``train.log`` included, stays byte-identical (Hydra turned the exception into a warning and
    rewrote them when the guard caught its own errors only)."""
    before, (code, out) = refused
    assert code == 2, out
    assert "error: " in out and "TF_CONFIG" in out
    assert snapshot(trained) == before


def test_a_new_run_in_a_directory_holding_checkpoints_is_refused(tmp_path, compose):
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("seed: 0\n")
    claim(compose("data=generator"), run).release()  # failed before a checkpoint: reusable
    step = tf.Variable(1)
    tf.train.CheckpointManager(tf.train.Checkpoint(step=step), run / "checkpoints", 1).save()
    lock_before = (run / LOCK_FILE).read_bytes()
    with pytest.raises(RunDirError, match=f"hydra.run.dir={run} already holds a run with"):
        claim(compose("data=generator"), run)
    assert (run / LOCK_FILE).read_bytes() == lock_before  # refused before taking the lock


def test_default_run_dirs_composed_in_the_same_second_differ():
    setup_globals()  # Hydra's ${now:} resolver
    with hydra.initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        first, second = (hydra.compose("config", return_hydra_config=True) for _ in range(2))
        resumed = hydra.compose("config", ["resume=/runs/a"], return_hydra_config=True)
    dirs = [cfg.hydra.run.dir for cfg in (first, second)]
    assert dirs[0] != dirs[1]
    for run_dir in dirs:
        assert re.fullmatch(r"outputs/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d-\d{6}", run_dir), run_dir
    assert first.hydra.output_subdir == ".hydra"
    assert resumed.hydra.run.dir == "/runs/a"
    subdir = resumed.hydra.output_subdir
    assert re.fullmatch(r"\.hydra/resume-\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d-\d{6}", subdir), subdir
    assert OmegaConf.select(first, "hydra.callbacks.run_dir._target_") == (
        "sr.train.rundir.RunDirCallback"
    )


@pytest.mark.slow
def test_a_resume_with_another_model_is_refused_and_the_run_still_loads(
    folders, trained, refused, compose
):
    """``resume=`` the finished run with another model: refused by the guard train.py's Hydra
    callback runs before any work (``claim``, in this process; that its refusals reach the
    terminal with exit code 2 and leave the run's files byte-identical: the train.py runs of
    test_a_held_directory_is_refused_naming_the_holder_and_left_untouched and
    test_a_start_up_failure_given_a_finished_run_leaves_its_files_byte_identical)."""
    config = trained / ".hydra" / "config.yaml"
    before, _ = refused
    cfg = compose(
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        *TINY,
        f"resume={trained}",
        "model=edsr_lite",
    )
    with pytest.raises(RunDirError) as info:
        claim(cfg, trained)
    out = str(info.value)
    assert f"resume={trained}: a resume continues the run as it was defined" in out
    assert "model.arch: 'espcn' -> 'edsr'" in out
    assert "model.blocks" not in out  # the keys of the other architecture: its own business
    assert f"train.init_from={trained}" in out
    assert snapshot(trained) == before  # nothing written: config, logs, lock all unchanged
    assert config.read_bytes() == before[".hydra/config.yaml"]
    model, cfg, step = load_model_from_run(trained)  # what scripts/evaluate.py loads
    assert step == 2 and cfg.model.arch == "espcn"


@pytest.mark.slow
def test_a_resume_keeps_the_first_config_and_writes_its_own_beside_it(runs):
    original = runs["tf_config"][3][".hydra/config.yaml"]  # the finished run's, before
    run, code, out, _ = runs["resumed"]  # a copy of the finished run, resumed to step 3
    assert code == 0, out
    assert f"resumed from {run / 'checkpoints' / 'ckpt-2'} at step 2" in out
    assert (run / ".hydra" / "config.yaml").read_bytes() == original
    assert load_run_config(run).resume is None
    (resume_dir,) = (run / ".hydra").glob("resume-*")
    assert load_run_config(run).train.steps == 2
    assert OmegaConf.load(resume_dir / "config.yaml").train.steps == 3
    assert f"resume={run}" in OmegaConf.load(resume_dir / "overrides.yaml")
    assert load_model_from_run(run)[2] == 3


# --multirun (-m): the sweep's directory and each job's, resume refused

SWEEP = ("train.lr=1e-3,2e-3",)  # two jobs


SWEEPS = """
import contextlib, io, json, logging, os, runpy, sys, time
from pathlib import Path
from hydra.core.global_hydra import GlobalHydra
train_py, common, first, gate = json.loads(sys.argv[1])
def sweep(overrides, log):
    sys.argv = [train_py, "-m", *common, *overrides]
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            runpy.run_path(train_py, run_name="__main__")
        except SystemExit as e:
            code = e.code
    GlobalHydra.instance().clear()
    for handler in logging.root.handlers[:]:  # as a new process: no handler of the last run's
        logging.root.removeHandler(handler)
        handler.close()
    Path(log).write_text(out.getvalue())
    Path(log + ".tmp").write_text(json.dumps(code))
    os.replace(log + ".tmp", log + ".code")
sweep(first, "first.log")
deadline = time.monotonic() + 300
while not Path(gate).exists():
    if time.monotonic() > deadline:
        sys.exit("no gate")
    time.sleep(0.05)
sweep(*json.loads(Path(gate).read_text()))
"""


def start_sweeps(folders, first, *, cwd: Path) -> subprocess.Popen:
    """Two ``python train.py -m`` sweeps on the tiny folders, one after the other in one
    process started in ``cwd`` (``train.py`` run as ``__main__``, its ``SystemExit`` caught,
    Hydra's and the logging's state cleared between them): the first with the overrides
    ``first``; the second once :func:`second_sweep` opens its gate. Each sweep's output goes to
    ``cwd/<name>.log``, its exit code to ``cwd/<name>.log.code`` when it ends."""
    common = [f"data.hr_dir={folders / 'train'}", f"data.val_dir={folders / 'val'}", *TINY]
    args = [str(ROOT / "train.py"), common, list(first), str(cwd / "gate")]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    with open(cwd / "process.log", "w") as out:  # a file, not a pipe: never blocks the sweeps
        return subprocess.Popen(
            [sys.executable, "-c", SWEEPS, json.dumps(args)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
        )


def sweep_code(proc: subprocess.Popen, cwd: Path, name: str) -> tuple[int, str]:
    """(exit code, output) of the sweep ``name`` of :func:`start_sweeps` once it has ended."""
    code = cwd / f"{name}.log.code"
    while not code.exists():
        assert proc.poll() is None, (cwd / "process.log").read_text()
        time.sleep(0.05)
    return json.loads(code.read_text()), (cwd / f"{name}.log").read_text()


def second_sweep(proc: subprocess.Popen, overrides, *, cwd: Path) -> tuple[int, str]:
    """The second sweep of :func:`start_sweeps` with ``overrides``: its (exit code, output)."""
    gate = cwd / "gate"
    (cwd / "gate.tmp").write_text(json.dumps([list(overrides), str(cwd / "second.log")]))
    os.replace(cwd / "gate.tmp", gate)
    assert proc.wait(timeout=300) == 0, (cwd / "process.log").read_text()
    return sweep_code(proc, cwd, "second")


def multirun_jobs(*overrides: str):
    """The sweep config ``python train.py -m <overrides>`` starts with, and its jobs as
    :func:`sweep_job_dirs` computes them (inside Hydra's global state, as under ``-m``)."""
    setup_globals()
    with hydra.initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        config = (
            GlobalHydra.instance()
            .config_loader()
            .load_configuration(
                "config", [*overrides, "hydra.mode=MULTIRUN"], run_mode=RunMode.MULTIRUN
            )
        )
        return config, sweep_job_dirs(config)


def test_default_sweep_dirs_composed_in_the_same_second_differ():
    setup_globals()
    with hydra.initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        first, second = (hydra.compose("config", return_hydra_config=True) for _ in range(2))
    dirs = [cfg.hydra.sweep.dir for cfg in (first, second)]
    assert dirs[0] != dirs[1]
    for sweep_dir in dirs:
        pattern = r"outputs/multirun/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d-\d{6}"
        assert re.fullmatch(pattern, sweep_dir), sweep_dir
    assert OmegaConf.to_container(first.hydra.sweep)["subdir"] == "${hydra.job.num}"


def test_sweep_job_dirs_are_hydras_and_shared_or_resumed_ones_are_refused(tmp_path):
    config, jobs = multirun_jobs(*SWEEP, "data=generator", f"hydra.sweep.dir={tmp_path}")
    assert [d for d, _ in jobs] == [tmp_path / "0", tmp_path / "1"]
    assert [job.train.lr for _, job in jobs] == [1e-3, 2e-3]
    check_sweep(config, jobs)  # new directories: accepted, nothing written
    assert list(tmp_path.iterdir()) == []

    config, jobs = multirun_jobs(
        *SWEEP, "data=generator", f"hydra.sweep.dir={tmp_path}", "hydra.sweep.subdir=lr"
    )
    with pytest.raises(RunDirError, match=f"jobs 0 and 1 would share the directory {tmp_path}/lr"):
        check_sweep(config, jobs)

    config, jobs = multirun_jobs("data=generator", "resume=/runs/a,/runs/b")
    assert [job.resume for _, job in jobs] == [
        "/runs/a",
        "/runs/b",
    ]  # swept: only the jobs have it
    with pytest.raises(RunDirError, match="resume=/runs/a cannot be used with --multirun"):
        check_sweep(config, jobs)


def test_a_job_claims_its_directory_at_job_start_and_releases_it_at_job_end(tmp_path, capsys):
    _, jobs = multirun_jobs(*SWEEP, "data=generator", f"hydra.sweep.dir={tmp_path}")
    (job_dir, job), (other_dir, other) = jobs
    for path, cfg in jobs:  # what run_job sets before on_job_start
        with read_write(cfg.hydra), open_dict(cfg.hydra):
            cfg.hydra.runtime.output_dir = str(path)
    callback = RunDirCallback()
    callback.on_job_start(config=job, task_function=None)
    assert RunDirLock(job_dir).holder().startswith(f"pid {os.getpid()} on host ")
    assert pickle.loads(pickle.dumps(callback)).job_lock is None  # no fd sent to other processes
    callback.on_job_end(config=job, job_return=None)
    assert RunDirLock(job_dir).holder() is None

    # trained into by another run after the sweep started: refused at job start, exit code 2
    step = tf.Variable(1)
    tf.train.CheckpointManager(tf.train.Checkpoint(step=step), other_dir / "checkpoints", 1).save()
    with pytest.raises(SystemExit) as stopped:
        callback.on_job_start(config=other, task_function=None)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"error: multirun job directory {other_dir} already holds a run with checkpoints" in err
    assert f"choose another hydra.sweep.dir than {tmp_path}" in err
    assert "the sweep is stopped" in err
    assert not (other_dir / LOCK_FILE).exists()  # refused before taking the lock


@pytest.mark.slow
def test_a_sweep_holds_each_job_dir_and_a_sweep_into_it_again_is_refused(folders, tmp_path):
    """A two-job sweep holds its directory and each job's while the job runs; a second sweep
    into its directory, with ``resume=`` too, while another run holds that directory and the
    directory of a third job, is refused naming every problem, each job's checkpoints among
    them, before anything is written. The two sweeps run in one process (:func:`start_sweeps`;
    a refusal's exit code through a process of its own: test_train_refusals.py's
    test_train_py_refuses_before_any_work_naming_the_key)."""
    proc = start_sweeps(folders, SWEEP, cwd=tmp_path)
    try:
        first_code = tmp_path / "first.log.code"
        seen = None  # (job lock holder, sweep lock holder) seen while a job runs
        while proc.poll() is None and not first_code.exists() and seen is None:
            for lock in tmp_path.glob("outputs/multirun/*/*/[01]/.lock"):
                holder = RunDirLock(lock.parent).holder()
                if holder is not None:
                    seen = holder, RunDirLock(lock.parent.parent).holder()
            time.sleep(0.02)
        code, out = sweep_code(proc, tmp_path, "first")
        assert code == 0, out
        (sweep_dir,) = tmp_path.glob("outputs/multirun/*/*")  # the default: a new directory
        date_time = r"\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d-\d{6}"
        assert re.fullmatch(date_time, str(sweep_dir.relative_to(tmp_path / "outputs/multirun")))
        owner = f"pid {proc.pid} on host {socket.gethostname()} since "
        assert seen is not None and all(h.startswith(owner) for h in seen), seen
        for num, lr in enumerate((1e-3, 2e-3)):
            job_dir = sweep_dir / str(num)
            assert OmegaConf.load(job_dir / ".hydra" / "config.yaml").train.lr == lr
            assert tf.train.latest_checkpoint(str(job_dir / "checkpoints")).endswith("ckpt-2")
            assert json.loads((job_dir / LOCK_FILE).read_text())["pid"] == proc.pid
            assert RunDirLock(job_dir).holder() is None  # released at job end
        assert RunDirLock(sweep_dir).holder() is None

        # a second sweep into it, with resume= and its directory and a new job's held by another
        # run (this process): refused before the launcher, naming each problem, nothing written
        run = tmp_path / "run"
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "config.yaml").write_text("seed: 0\n")
        run_before = snapshot(run)
        with RunDirLock(sweep_dir), RunDirLock(sweep_dir / "2"):
            before = snapshot(sweep_dir)
            overrides = (
                "train.lr=5e-3,6e-3,7e-3",
                f"resume={run}",
                f"hydra.sweep.dir={sweep_dir}",
            )
            code, out = second_sweep(proc, overrides, cwd=tmp_path)
            assert code == 2, out
            for num in (0, 1):
                job_dir = sweep_dir / str(num)
                assert (
                    f"error: multirun job directory {job_dir} already holds a run with checkpoints"
                    f" ({job_dir / 'checkpoints' / 'ckpt-2'}): choose another hydra.sweep.dir than"
                    f" {sweep_dir}"
                ) in out
                assert f"continue that run alone with python train.py resume={job_dir}" in out
            assert f"error: resume={run} cannot be used with --multirun (-m)" in out
            assert "resume each run alone, python train.py resume=<run dir>" in out
            holder = f"is in use by another run: pid {os.getpid()} on host {socket.gethostname()}"
            assert f"error: sweep directory {sweep_dir} {holder}" in out
            assert f"error: run directory {sweep_dir / '2'} {holder}" in out
            assert "or choose another hydra.sweep.dir" in out
            assert "Launching" not in out  # refused before the launcher
            # configs, multirun.yaml, logs, locks all unchanged
            assert snapshot(sweep_dir) == before
            assert snapshot(run) == run_before
    finally:
        if proc.poll() is None:  # a failure before the second sweep: it waits for its gate
            proc.kill()
            proc.wait()


# a resumed sweep into held directories: the second sweep of
# test_a_sweep_holds_each_job_dir_and_a_sweep_into_it_again_is_refused


@pytest.mark.parametrize(
    "arguments",
    [
        ["train.lr=1e-3,2e-3"],
        ["a=1,2", "b=x", "c=3,4,5"],
        ["a=1,2", "b=x", "a=7,8,9"],  # a key given twice: its first place, its last value
        ["model=espcn,edsr_lite", "+x=[1,2]", "y=choice(p,q)", "z=null"],
        [],
    ],
)
def test_job_overrides_are_those_of_hydras_basic_sweeper(arguments):
    """sweep_job_dirs computes a basic sweep's jobs with public API (Override); this fails when
    Hydra (1.3.x here) changes how its basic sweeper splits a sweep into jobs."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from sr.train.rundir import job_overrides

    overrides = OverridesParser.create().parse_overrides(arguments)
    (hydras,) = BasicSweeper.split_arguments(overrides, None)
    assert job_overrides(overrides) == hydras


def test_only_the_basic_sweeper_has_jobs_known_in_advance(tmp_path):
    config, jobs = multirun_jobs(*SWEEP, "data=generator", f"hydra.sweep.dir={tmp_path}")
    assert config.hydra.runtime.choices["hydra/sweeper"] == "basic" and len(jobs) == 2
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.runtime.choices["hydra/sweeper"] = "optuna"
    assert sweep_job_dirs(config) is None
