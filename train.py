"""Train a super-resolution model: ``python train.py [data=tfrecord|generator] [model=...] [k=v]``.

See docs/config.md for the config groups and common overrides.

Exit codes:
- 0: done;
- 1: an unexpected error (a traceback), or a ``--multirun`` whose overrides do not compose;
- 2: a config value, data folder, validation image or ``resume=`` path at fault (the message
  names it; a validation image failing mid-run is reported after the step is saved): an option
  a group does not have (``model=foo``: the group's options listed), an unknown key, a value of
  the wrong type or out of range (each key checked by its schema before any work), a key that
  moved into a config group (``train.loss=``: ``loss=charbonnier``), a resume that changes a key
  defining the run (``sr.train.rundir.RUN_KEYS``: use ``train.init_from=RUN``), a file of the
  run read back (``checkpoints/best/best.json``, truncated or malformed);
- 3: the loss or the weights became NaN or infinite (nothing non-finite is saved; the message
  names the step, its learning rate and the last good checkpoint to resume from);
- 4: the run diverged once more after ``train.guard_max_rollbacks`` rollbacks of the divergence
  guard (or with no good checkpoint left to roll back to); ``checkpoints/best`` holds the best
  validated weights, and the message names it;
- 5: ``train.strategy=multi_worker``: tasks of ``TF_CONFIG`` did not answer within
  ``train.cluster_timeout_minutes`` (the message names them and their addresses);
- 128 + N: stopped by signal N (SIGINT 130, SIGTERM 143) after saving a checkpoint.

The command line is composed and checked (``sr.config``, which imports no TensorFlow) before
TensorFlow and the trainer are imported: a refusal (exit code 2) costs no TensorFlow start-up
(docs/config.md, "Schemas").
"""

import functools
import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from sr.config import ConfigError, check_overrides, load  # registers the schemas; no TensorFlow
from sr.core.quiet import quiet_tensorflow

EXIT_BAD_INPUT = 2  # a config value, folder, image or resume path at fault
EXIT_NONFINITE = 3  # NaN/inf loss or weights: stopped, last good checkpoint kept
EXIT_DIVERGED = 4  # diverged after train.guard_max_rollbacks rollbacks; checkpoints/best kept
EXIT_CLUSTER = 5  # multi_worker: TF_CONFIG peers missing after train.cluster_timeout_minutes

log = logging.getLogger("train")
logging.getLogger("absl").setLevel(logging.WARNING)  # checkpoint-writer chatter


@functools.cache
def exit_codes() -> tuple[tuple[tuple[type[BaseException], ...], int], ...]:
    """The errors that end a run with a message and no traceback, and their exit codes, in this
    order: ``((errors, code), ...)``. Their modules import TensorFlow, so they are imported here,
    once the command line has been checked (:func:`check_command_line`)."""
    from sr.core.errors import RunDirError
    from sr.core.images import ImageFolderError
    from sr.core.runfiles import RunFileError
    from sr.data.service import ServiceError
    from sr.train.distribute import ClusterTimeoutError
    from sr.train.guard import DivergenceError
    from sr.train.saving import NonFiniteError

    bad_input = (
        ConfigError,
        RunDirError,
        ImageFolderError,
        ServiceError,
        FileNotFoundError,
        RunFileError,
    )
    return (
        (bad_input, EXIT_BAD_INPUT),
        ((NonFiniteError,), EXIT_NONFINITE),
        ((DivergenceError,), EXIT_DIVERGED),
        ((ClusterTimeoutError,), EXIT_CLUSTER),
    )


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from sr.train.app import describe  # TensorFlow: after the command line is checked

    run_dir = HydraConfig.get().runtime.output_dir
    log.info("run directory %s\n%s", run_dir, describe(cfg))
    code, final = train(cfg, run_dir)
    if code:
        sys.exit(code)
    return final.get("val/psnr")


def train(cfg: DictConfig, run_dir) -> tuple[int, dict]:
    """``sr.train.app.run`` and the exit code of its outcome (the module docstring's): an error
    of :func:`exit_codes` is logged (its message, no traceback) and gives its code and ``{}``;
    a run stopped by signal N gives 128 + N; a finished run 0. Anything else propagates (exit
    code 1 and a traceback)."""
    from sr.train.app import run

    codes = exit_codes()
    try:
        final = run(cfg, run_dir)
    except tuple(error for errors, _ in codes for error in errors) as e:
        log.error("%s", e)
        return next(code for errors, code in codes if isinstance(e, errors)), {}
    if final.get("interrupted"):
        return 128 + int(final["interrupted"]), final
    return 0, final


def check_command_line(argv: list[str]) -> None:
    """Refuse a bad command line before Hydra creates the run directory: a key that moved or an
    option a group does not have; for a single run (no flag such as ``-m``) also a wrong type,
    an unknown key or a value out of range (``sr.config.load``; ``run`` checks them again).

    Raises:
        ConfigError: naming the key (or the group and its options).
    """
    check_overrides(argv)
    if any(arg.startswith("-") for arg in argv):  # --multirun, --cfg, --help: Hydra's own
        return
    try:
        load(*argv)
    except ConfigError:
        raise
    except Exception:  # what only Hydra's run can compose (${hydra:...}): checked by run()
        pass


if __name__ == "__main__":
    try:  # before Hydra, whose messages do not name the key and its allowed values
        check_command_line(sys.argv[1:])
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    quiet_tensorflow()  # before anything imports TensorFlow: its INFO lines hidden
    main()
