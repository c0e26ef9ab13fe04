"""``train.init_from``: which checkpoint of a run a new run starts from, what to do when it is
damaged, and its refusal beside ``resume=`` (reading the weights: ``sr.loading``)."""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from sr.core.errors import RunDirError
from sr.core.runfiles import checkpoint_state
from sr.loading.checkpoints import BEST_DIR, CHECKPOINT_DIR, best_dir


def init_from_choice(value) -> tuple[Path, str | None]:
    """``(run folder, checkpoint)`` of a ``train.init_from`` value: ``RUN`` (its best, else its
    newest: checkpoint None), ``RUN/checkpoints/best`` (``best``), ``RUN/checkpoints/last``
    (``last``: the newest of the rotation, a finished run's final weights, where Real-ESRGAN's
    GAN stage starts) or ``RUN/checkpoints/ckpt-N`` (``ckpt-N``, one of the rotation's: e.g. when
    ``best`` is damaged); ``checkpoint`` as :func:`sr.loading.checkpoints.find_checkpoint` takes
    it."""
    path = Path(value).expanduser()
    name = path.name
    named = name in (BEST_DIR, "last") or _CKPT.fullmatch(name)
    if path.parent.name == CHECKPOINT_DIR and named:
        return path.parent.parent, name
    return path, None


_CKPT = re.compile(r"ckpt-\d+")


def init_from_fix(run_dir, path: str) -> str:
    """:func:`sr.loading.checkpoints.damaged_fix` for ``train.py``: the other checkpoints of the
    run as the ``train.init_from=RUN/checkpoints/ckpt-N`` values that start from them."""
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    _, rotation = checkpoint_state(ckpt_dir)
    others = [Path(p).name for p in rotation if Path(p) != Path(path)]
    if not others:
        return "the run has no other checkpoint: start from another run, or drop train.init_from"
    what = "the best checkpoint is damaged: " if Path(path).parent == best_dir(run_dir) else ""
    more = f" (or another of {', '.join(others)})" if len(others) > 1 else ""
    return (
        f"{what}start from another of its checkpoints with train.init_from="
        f"{ckpt_dir / others[-1]}{more}"
    )


def check_resume_init_from(cfg: DictConfig, saved: DictConfig) -> None:
    """``resume=`` never loads ``train.init_from``: refuse one other than the run's own start.

    Raises:
        RunDirError: naming both keys, the run's own ``train.init_from`` and the two ways on.
    """
    given = cfg.train.get("init_from")
    own = OmegaConf.select(saved, "train.init_from", default=None)
    same = own and Path(own).expanduser().resolve() == Path(given or "").expanduser().resolve()
    if not given or same:
        return  # the command that started the run, with resume= added: its start, as it was
    started = f"the run started from train.init_from={own}" if own else "the run has none"
    raise RunDirError(
        f"resume={cfg.resume} with train.init_from={given}: a resume continues the run from its "
        f"own checkpoint (weights, optimizer, step) and never loads train.init_from ({started}). "
        f"Drop train.init_from to resume the run, or drop resume= to start a new run from "
        f"{given}'s weights"
    )
