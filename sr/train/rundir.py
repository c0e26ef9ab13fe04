"""One owner per run directory, and a resume that cannot damage the run it continues.

Hydra creates the run directory and writes ``<run>/<hydra.output_subdir>/{config,hydra,
overrides}.yaml`` and ``train.log`` before ``train.py``'s ``main`` runs, so the checks here run
earlier, in :class:`RunDirCallback` (``hydra.callbacks.run_dir`` in ``conf/config.yaml``, called
by Hydra's ``on_run_start``). A run that is refused exits with code 2 having written nothing
into the directory:

- the directory is held by another run (``<run>/.lock``, ``fcntl.flock``: a crashed or killed
  holder releases it with its process, so a stale lock file never blocks);
- a new run (no ``resume=``) is pointed at a directory that holds another run's checkpoints;
- ``train.init_from=<run>`` naming a run without a checkpoint, or of another model, scale or
  channels;
- ``resume=<run>`` with another value of a key that defines the run (:data:`RUN_KEYS`: the model
  and its hyperparameters, ``data.scale``, ``data.channels``, the degradation, the loss, the
  optimizer's type) than the run's ``.hydra/config.yaml``, or which has no checkpoint.

The original ``.hydra/config.yaml`` is never overwritten: a resumed run's Hydra files go to
``.hydra/resume-<DATE>_<TIME>`` (``hydra.output_subdir``, the ``sr_hydra_subdir`` resolver of
``sr.config``), so ``load_run_config`` and ``scripts/evaluate.py`` keep reading the first run's.

``--multirun`` (``-m``). Hydra 1.3 calls ``on_multirun_start`` (not ``on_run_start``) once, before
its sweeper writes ``<sweep dir>/multirun.yaml``; then for each job ``run_job`` creates the job
directory, opens its ``train.log``, writes its ``.hydra/`` files and only then calls
``on_job_start``. So:

- the default sweep directory is ``outputs/multirun/<DATE>/<TIME>-<microseconds>`` (``conf/
  config.yaml``): two sweeps started in the same second do not share job folders;
- at ``on_multirun_start``, before anything is written, the sweep is refused (exit code 2, every
  problem named) for ``resume=`` (a resume is one run, in its own directory), for a sweep
  directory held by another sweep, and, with Hydra's basic sweeper (the default), whose jobs
  :func:`sweep_job_dirs` computes as Hydra will, for two jobs sharing a directory, a job directory
  held by another run, or holding another run's checkpoints. The sweep then holds ``<sweep
  dir>/.lock`` until it ends: a second sweep into the same directory is refused at its start;
- each job holds ``<job dir>/.lock`` from ``on_job_start`` to ``on_job_end``, and is checked
  again there. What this protects only at job time (after Hydra wrote the job's ``.hydra/`` files
  and opened its ``train.log``, which may be another run's): a job directory that another run
  (``hydra.run.dir=``) took or trained into after the sweep started, and every job of a sweeper
  whose jobs are not known in advance (Optuna, Ax, ...). A job refused there exits the sweep with
  code 2 (``SystemExit``: Hydra would turn an exception of a callback into a warning and go on):
  the jobs before it are finished and kept, the jobs after it do not run. ``train.py``'s own
  refusals and stops (exit codes 2, 3, 128 + N) end a sweep the same way; an unexpected exception
  in a job is Hydra's to report: the other jobs of the batch run, then the sweep exits with 1.
"""

from __future__ import annotations

import atexit
import itertools
import os
import sys
from pathlib import Path
from typing import Any

from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from sr.core.errors import ConfigError, RunDirError
from sr.core.lock import FileLock, LockBusy
from sr.core.runfiles import check_checkpoint, latest_checkpoint, load_run_config
from sr.core.weightfiles import is_weight_file
from sr.loading.checkpoints import CHECKPOINT_DIR, find_checkpoint, read_best
from sr.losses.legacy import comparable
from sr.models.registry import spec_of
from sr.train.init_from import check_resume_init_from, init_from_choice, init_from_fix
from sr.train.pretrained import check_init_file

LOCK_FILE = ".lock"
REFUSED_EXIT_CODE = 2


class RunDirBusy(RunDirError):
    """The run directory is held by another live run (names the holder)."""


class RunDirLock:
    """Exclusive ownership of a run directory: the lock file ``<run_dir>/.lock``
    (:class:`sr.core.lock.FileLock`, ``fcntl.flock``), which holds the owner's
    ``{"pid", "host", "since"}`` as JSON.

    The kernel releases the lock when its process ends, however it ends (SIGKILL included), so a
    lock file left by a dead process does not block. Use as a context manager, or call
    :meth:`acquire` and :meth:`release` (idempotent).
    """

    def __init__(
        self, run_dir: str | Path, setting: str = "hydra.run.dir", kind: str = "run directory"
    ):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.setting = setting  # the setting a refusal tells the user to change
        self.kind = kind  # what the directory is, in a refusal
        self.file_lock = FileLock(self.path)  # the file stays, with the last owner's record

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self.file_lock.held

    def holder(self) -> str | None:
        """The other process holding the lock, as ``pid N on host H since T``; None when free.

        Reads only: nothing is created or written.
        """
        record = self.file_lock.holder()
        return None if record is None else describe_holder(record)

    def busy_message(self, holder: str) -> str:
        """The refusal for a directory held by ``holder`` (:meth:`holder`): names the
        directory, the holder, the lock file and the ways out."""
        return (
            f"{self.kind} {self.run_dir} is in use by another run: {holder} (lock {self.path});"
            f" wait for that run to end or stop it, or choose another {self.setting}"
        )

    def check_free(self) -> None:
        """Refuse a directory another process holds. Reads only.

        Raises:
            RunDirBusy: naming the holder (:meth:`busy_message`).
        """
        holder = self.holder()
        if holder:
            raise RunDirBusy(self.busy_message(holder))

    def acquire(self) -> RunDirLock:
        """Take the lock (creating the directory and the lock file) and record this process.

        Raises:
            RunDirBusy: if another process holds it, naming that process.
        """
        try:
            self.file_lock.acquire(blocking=False)
        except LockBusy as e:
            raise RunDirBusy(self.busy_message(describe_holder(e.holder))) from None
        return self

    def release(self) -> None:
        """Release the lock (the file stays, with the last owner's record)."""
        self.file_lock.release()

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def describe_holder(record: dict) -> str:
    """A lock holder's record as ``pid N on host H since T``."""
    try:
        return f"pid {record['pid']} on host {record['host']} since {record['since']}"
    except KeyError:
        return "a process that has not recorded itself yet"


# The keys that define a run: its model, its input and output, and its validation. A resume
# (``resume=RUN``) must give each the value the run has in its .hydra/config.yaml
# (``sr.train.rundir.check_resume``); ``train.init_from=RUN`` starts a new run from RUN's
# weights under other values. Every other key may change on a resume (docs/training.md).
RUN_KEYS = (
    "model",
    "data.scale",
    "data.channels",
    "degradation",
    "loss",
    "optimizer._target_",
    "discriminator",
)
# Of them, the keys that decide the model's variables: train.init_from=RUN needs them equal.
ARCHITECTURE_KEYS = ("model", "data.scale", "data.channels")
# Leaves of the run keys that say how the pairs are made, not what they are (the accelerator's
# device stage makes the input pipeline's pairs exactly, the TensorFlow JPEG libjpeg's pixels):
# a resume may change them.
HOW_KEYS = ("degradation.device", "degradation.jpeg")
# The value of a run key in a run saved before the key existed.
RUN_KEY_DEFAULTS = {
    "data.channels": "y",
    "degradation._target_": "sr.degradations.Bicubic",
    "discriminator.explode_loss": 100.0,
    "discriminator.init_from": None,
}
ABSENT = "<absent>"


def _leaves(cfg: DictConfig, key: str) -> dict[str, Any]:
    """``{dotted key: plain value}`` of ``key`` in ``cfg``, a node flattened to its leaves,
    interpolations resolved where they can be."""
    node = OmegaConf.select(cfg, key, default=ABSENT)
    if isinstance(node, DictConfig):
        try:
            node = OmegaConf.to_container(node, resolve=True)
        except Exception:  # an interpolation that does not resolve here: compare as written
            node = OmegaConf.to_container(node, resolve=False)
    leaves = _flat(node, key)
    if key == "model" and f"{key}._target_" in leaves and f"{key}.arch" not in leaves:
        try:  # a run saved before the registry: its builder's name becomes its architecture
            arch = spec_of({"_target_": leaves[f"{key}._target_"]}).name
        except ConfigError:
            arch = None  # a builder no longer registered: compared as written
        if arch is not None:
            del leaves[f"{key}._target_"]
            leaves[f"{key}.arch"] = arch
    return leaves


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}"))
        return out
    return {prefix: value}


def config_differences(
    saved: DictConfig, cfg: DictConfig, keys=RUN_KEYS
) -> dict[str, tuple[Any, Any]]:
    """The leaves of ``keys`` whose values differ between a run's ``saved`` config and ``cfg``:
    ``{key: (run's value, new value)}``, :data:`ABSENT` for a key on one side only; of a group
    whose option (``_target_``, or the model's ``arch``) differs, only that key. A key the
    saved config lacks (a run saved before it existed) has its :data:`RUN_KEY_DEFAULTS` value,
    and a whole group it lacks (``loss``, ``optimizer``) is not compared."""
    differ = {}
    for key in keys:
        run, new = _leaves(saved, key), _leaves(cfg, key)
        if run == {key: ABSENT} and key not in ("data.channels", "degradation", "discriminator"):
            continue  # a group the run predates
        found = {}
        for leaf in sorted((set(run) | set(new)) - set(HOW_KEYS)):
            old = run.get(leaf, ABSENT)
            if old == ABSENT:
                old = RUN_KEY_DEFAULTS.get(leaf, ABSENT)
            if old != new.get(leaf, ABSENT):
                found[leaf] = (old, new.get(leaf, ABSENT))
        option = [f"{key}.{name}" for name in ("_target_", "arch") if f"{key}.{name}" in found]
        # another option of the group (another class, another architecture): its keys differ too
        differ.update({option[0]: found[option[0]]} if option else found)
    return differ


def check_resume(cfg: DictConfig) -> None:
    """Check that ``cfg`` can continue the run ``cfg.resume``: it holds a checkpoint and a config,
    and every key of :data:`RUN_KEYS` has the run's value. Reads only.

    Raises:
        RunDirError: naming the run, the missing file, or every differing key as ``run's value
            -> new value``, with the way to start from the run under the new values
            (``train.init_from=RUN``).
        RunFileError: if ``checkpoints/best/best.json`` is truncated or malformed.
    """
    run_dir = Path(cfg.resume)
    ckpt_dir = run_dir / CHECKPOINT_DIR
    read_best(run_dir)  # a damaged best.json: RunFileError, before anything is written
    if latest_checkpoint(ckpt_dir) is None:
        raise RunDirError(
            f"resume={run_dir}: no checkpoint in {ckpt_dir}; resume a run directory of train.py"
            " that has saved one (outputs/DATE/TIME)"
        )
    saved = load_run_config(run_dir)
    check_resume_init_from(cfg, saved)
    differ = config_differences(comparable(saved), comparable(cfg))  # the loss by its terms
    if differ:
        overrides = run_dir / ".hydra" / "overrides.yaml"
        started = ""
        if overrides.is_file():
            started = " ".join(str(o) for o in OmegaConf.load(overrides))
            started = f" (the run was started with: {started or 'no overrides'})"
        lines = "; ".join(f"{key}: {run!r} -> {new!r}" for key, (run, new) in differ.items())
        raise RunDirError(
            f"resume={run_dir}: a resume continues the run as it was defined, and these keys "
            f"differ from {run_dir / '.hydra' / 'config.yaml'}: {lines}. Resume with the run's "
            f"values{started}, or start a new run from its weights under the new ones with "
            f"train.init_from={run_dir} (weights only: a fresh step, optimizer and data position)"
        )


def check_init_from(cfg: DictConfig) -> None:
    """Check, before any work, that the run of ``train.init_from`` (``RUN`` or one of its
    checkpoints, ``RUN/checkpoints/ckpt-N``) has a whole checkpoint and the model,
    ``data.scale`` and ``data.channels`` of ``cfg`` (its weights then fit the model).

    Raises:
        RunDirError: if the run has no config or no such checkpoint (naming it), or naming each
            differing key, ``run's value -> new value``.
        RunFileError: if the checkpoint is damaged (naming the other checkpoints to start from).
    """
    if is_weight_file(cfg.train.init_from):  # a .pth / .safetensors file: sr.train.pretrained
        check_init_file(cfg)
        return
    run_dir, checkpoint = init_from_choice(cfg.train.init_from)
    differ = config_differences(load_run_config(run_dir), cfg, ARCHITECTURE_KEYS)
    if differ:
        lines = "; ".join(f"{key}: {run!r} -> {new!r}" for key, (run, new) in differ.items())
        raise RunDirError(
            f"train.init_from={run_dir}: its weights do not fit this model ({lines}); start from "
            "a run of the same model, data.scale and data.channels, or drop train.init_from"
        )
    path = find_checkpoint(run_dir, checkpoint)
    check_checkpoint(path, init_from_fix(run_dir, path))  # a damaged one: before any work


def check_new_run(
    cfg: DictConfig, run_dir: str | Path, sweep_dir: str | Path | None = None
) -> None:
    """Refuse to start a run in a directory that holds another run's checkpoints (unless it is
    that run being resumed); a run that failed before its first checkpoint may be started again
    in its directory. Reads only.

    Args:
        sweep_dir: for a multirun job, its sweep directory (``hydra.sweep.dir``): the message
            then tells to choose another sweep directory.

    Raises:
        RunDirError: naming the directory, its checkpoint and the ways out.
    """
    run_dir = Path(run_dir)
    same = cfg.get("resume") and Path(cfg.resume).resolve() == run_dir.resolve()
    latest = latest_checkpoint(run_dir / CHECKPOINT_DIR)
    if latest is None or same:
        return
    if sweep_dir is None:
        raise RunDirError(
            f"hydra.run.dir={run_dir} already holds a run with checkpoints ({latest}): continue"
            f" it with resume={run_dir}, or choose another hydra.run.dir"
        )
    raise RunDirError(
        f"multirun job directory {run_dir} already holds a run with checkpoints ({latest}):"
        f" choose another hydra.sweep.dir than {sweep_dir} (the default, outputs/multirun/DATE/"
        f"TIME-MICROSECONDS, is new for each sweep), or continue that run alone with"
        f" python train.py resume={run_dir}"
    )


def claim(cfg: DictConfig, run_dir: str | Path, sweep_dir: str | Path | None = None) -> RunDirLock:
    """All the checks, then the lock: returns the held :class:`RunDirLock` of ``run_dir``.

    Nothing is written into ``run_dir`` unless every check passes. ``sweep_dir``: see
    :func:`check_new_run`.

    Raises:
        RunDirBusy: if another run holds ``run_dir``.
        RunDirError: see :func:`check_new_run` and :func:`check_resume`.
    """
    lock = RunDirLock(run_dir, "hydra.run.dir" if sweep_dir is None else "hydra.sweep.dir")
    lock.check_free()
    check_new_run(cfg, run_dir, sweep_dir)
    if cfg.get("resume"):
        check_resume(cfg)
    elif OmegaConf.select(cfg, "train.init_from"):
        check_init_from(cfg)
    return lock.acquire()


def worker_dir(config: DictConfig) -> Path | None:
    """For a non-chief worker of a ``train.strategy=multi_worker`` cluster (``TF_CONFIG``): point
    ``hydra.run.dir`` at ``<run dir>/workers/<type>-<index>`` (its Hydra files, log, lock and
    temporary checkpoints), so that every worker started with the same ``hydra.run.dir`` (or
    ``resume=``) leaves the run directory to the chief. Returns that folder, or None (chief, or
    no cluster)."""
    from sr.train import distribute

    if OmegaConf.select(config, "train.strategy") != "multi_worker" or distribute.is_chief():
        return None
    kind, index = distribute.task_of()
    path = run_dir_of(config) / "workers" / f"{kind}-{index}"
    with open_dict(config), read_write(config):
        config.hydra.run.dir = str(path)
    return path


def run_dir_of(config: DictConfig) -> Path:
    """The absolute run directory Hydra is about to create (``hydra.run.dir``)."""
    return Path(os.path.abspath(str(OmegaConf.select(config, "hydra.run.dir"))))


def is_basic_sweeper(config: DictConfig) -> bool:
    """Whether a multirun goes through Hydra's basic sweeper (the default), whose jobs are known
    in advance: the option chosen for the ``hydra/sweeper`` config group
    (``hydra.runtime.choices``) is ``basic``."""
    choices = OmegaConf.select(config, "hydra.runtime.choices") or {}
    return choices.get("hydra/sweeper") == "basic"


def job_overrides(overrides: list[Override]) -> list[list[str]]:
    """The overrides of each job of a basic sweep, in job order: per key (in the order keys
    first appear, the last value of a key given twice) the values of its discrete sweep
    (``a=1,2``) or its one value, then the cartesian product over the keys. As Hydra 1.3's
    basic sweeper splits its arguments (``tests/test_rundir.py`` compares the two).

    Raises:
        ValueError: for a range or interval sweep, which the basic sweeper refuses too.
    """
    values: dict[str, list[str]] = {}
    for override in overrides:
        key = override.get_key_element()
        if not override.is_sweep_override():
            values[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            values[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            raise ValueError(f"{key}: the basic sweeper sweeps lists (a=1,2) only")
    return [list(job) for job in itertools.product(*values.values())]


def sweep_job_dirs(config: DictConfig) -> list[tuple[Path, DictConfig]] | None:
    """The jobs of a multirun as Hydra's basic sweeper and launcher will run them: ``(absolute
    job directory, job config)`` in job order, computed the way they do it (the same override
    parsing and cartesian product, ``load_sweep_config`` with the sweep's ``${now:}`` values,
    ``hydra.job.num``, ``hydra.sweep.dir`` / ``hydra.sweep.subdir``). Writes nothing.

    Returns None when the jobs cannot be known in advance: another sweeper (Optuna, Ax, ...
    choose their jobs as they go), or overrides Hydra will itself refuse.
    """
    if not is_basic_sweeper(config):
        return None
    saved = HydraConfig.instance().cfg
    try:
        loader = GlobalHydra.instance().config_loader()
        params = OmegaConf.select(config, "hydra.sweeper.params") or {}
        arguments = [f"{k}={v}" for k, v in params.items()]
        arguments += OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
        overrides = OverridesParser.create(config_loader=loader).parse_overrides(arguments)
        jobs = []
        for num, overrides_of_job in enumerate(job_overrides(overrides)):
            job = loader.load_sweep_config(config, overrides_of_job)
            with open_dict(job):
                job.hydra.job.id = num
                job.hydra.job.num = num
            HydraConfig.instance().set_config(job)  # as run_job: for ${hydra:...} in the dirs
            job_dir = os.path.join(str(job.hydra.sweep.dir), str(job.hydra.sweep.subdir))
            jobs.append((Path(os.path.abspath(job_dir)), job))
        return jobs
    except Exception:  # Hydra reports its own errors (an override that does not compose, ...)
        return None
    finally:
        HydraConfig.instance().cfg = saved


def check_no_resume(configs: list[DictConfig]) -> None:
    """Refuse ``resume=`` under ``--multirun`` (in any of ``configs``: the sweep's, its jobs'):
    a resume continues one run in its own directory, which a sweep's job directories are not.

    Raises:
        RunDirError: naming the ``resume=`` value and the way to resume.
    """
    resumed = [r for r in (OmegaConf.select(c, "resume") for c in configs) if r]
    if resumed:
        raise RunDirError(
            f"resume={resumed[0]} cannot be used with --multirun (-m): a resume continues one run"
            f" in its own directory, a sweep's jobs get new ones under hydra.sweep.dir; resume"
            f" each run alone, python train.py resume=<run dir> [its overrides]"
        )


def check_sweep(config: DictConfig, jobs: list[tuple[Path, DictConfig]] | None) -> None:
    """Everything a multirun can be refused for before it starts. Reads only.

    ``resume=`` (:func:`check_no_resume`), the sweep directory held by another sweep, and with
    ``jobs`` (:func:`sweep_job_dirs`): two jobs sharing one directory, a job directory held by
    another run, or holding another run's checkpoints.

    Raises:
        RunDirError: listing every problem, one a line, each naming its directory.
    """
    sweep_dir = Path(os.path.abspath(str(config.hydra.sweep.dir)))
    problems = []
    try:
        check_no_resume([config, *(job for _, job in jobs or [])])
    except RunDirError as e:
        problems.append(str(e))
    try:
        RunDirLock(sweep_dir, "hydra.sweep.dir", "sweep directory").check_free()
    except RunDirBusy as e:
        problems.append(str(e))
    first_job: dict[Path, int] = {}
    for num, (job_dir, job) in enumerate(jobs or []):
        if job_dir in first_job:
            problems.append(
                f"jobs {first_job[job_dir]} and {num} would share the directory {job_dir}:"
                " give each job its own hydra.sweep.subdir (the default is ${hydra.job.num})"
            )
            continue
        first_job[job_dir] = num
        try:
            if job_dir != sweep_dir:  # else the sweep's own lock
                RunDirLock(job_dir, "hydra.sweep.dir").check_free()
            check_new_run(job, job_dir, sweep_dir)
        except Exception as e:  # any error of the guard: a refusal
            problems.append(str(e))
    if problems:
        raise RunDirError("\n".join(problems))


class RunDirCallback(Callback):
    """Hydra callback: :func:`claim` the run directory before Hydra writes into it, release it
    when the run ends (or at process exit). A refusal prints the reason to stderr and exits with
    code 2.

    Under ``--multirun``: :func:`check_sweep` at ``on_multirun_start`` (before anything is
    written; the sweep directory is then held, ``<sweep dir>/.lock``, until the sweep ends), and
    each job :func:`claim`-s its directory at ``on_job_start`` (after Hydra has written the job's
    ``.hydra/`` files and opened its ``train.log``: the job-time checks only catch what changed
    since the start of the sweep, or the jobs of a sweeper whose jobs are not known in advance),
    released at ``on_job_end``. A refused job stops the sweep with exit code 2: the jobs before it
    are finished and kept, the jobs after it do not run.
    """

    def __init__(self) -> None:
        self.lock: RunDirLock | None = None  # the single run's, or the sweep directory's
        self.job_lock: RunDirLock | None = None  # the running multirun job's
        self._at_exit = False

    def __getstate__(self) -> dict[str, Any]:
        # a launcher that pickles the callbacks to other processes must not carry our locks'
        # file descriptors there: each job process takes its own
        return {"lock": None, "job_lock": None, "_at_exit": False}

    def _release_at_exit(self) -> None:
        if not self._at_exit:
            atexit.register(self.release)
            self._at_exit = True

    def release(self) -> None:
        """Release the locks this callback holds (idempotent)."""
        for lock in (self.job_lock, self.lock):
            if lock is not None:
                lock.release()

    @staticmethod
    def _refuse(e: Exception) -> None:
        lines = str(e).splitlines() or [""]
        print("\n".join(f"error: {line}" for line in lines), file=sys.stderr, flush=True)
        sys.exit(REFUSED_EXIT_CODE)  # SystemExit: Hydra turns exceptions into warnings

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Any exception of the guard is a refusal: Hydra turns a callback's exception into a
        # warning and goes on writing into the run folder (a malformed TF_CONFIG did).
        try:
            worker_dir(config)  # a non-chief worker of a cluster writes into a folder of its own
            self.lock = claim(config, run_dir_of(config))
        except Exception as e:  # any error of the guard: a refusal
            self._refuse(e)  # no train.log: nothing written
        self._release_at_exit()

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.lock is not None:
            self.lock.release()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # resolved here first, on the config the sweeper and every job take ${now:} from
        sweep_dir = Path(os.path.abspath(str(config.hydra.sweep.dir)))
        try:
            check_sweep(config, sweep_job_dirs(config))
            self.lock = RunDirLock(sweep_dir, "hydra.sweep.dir", "sweep directory").acquire()
        except Exception as e:  # any error of the guard: a refusal
            self._refuse(e)  # before the sweeper: nothing written, not even multirun.yaml
        self._release_at_exit()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.lock is not None:
            self.lock.release()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if OmegaConf.select(config, "hydra.mode") != RunMode.MULTIRUN:
            return  # a single run: claimed at on_run_start
        job_dir = Path(str(config.hydra.runtime.output_dir))
        sweep_dir = Path(os.path.abspath(str(config.hydra.sweep.dir)))
        try:
            check_no_resume([config])
            if self.lock is not None and self.lock.held and job_dir == self.lock.run_dir:
                check_new_run(config, job_dir, sweep_dir)  # held already, as the sweep's
                return
            self.job_lock = claim(config, job_dir, sweep_dir)
        except Exception as e:  # any error of the guard: a refusal
            self._refuse(
                f"{e} (Hydra had already written this job's {config.hydra.output_subdir}/ files"
                " and train.log into it; the sweep is stopped: the jobs before it are kept, the"
                " jobs after it did not run)"
            )
        self._release_at_exit()

    def on_job_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.job_lock is not None:
            self.job_lock.release()
            self.job_lock = None
