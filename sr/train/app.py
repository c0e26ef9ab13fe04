"""What ``python train.py`` does, as a function of the composed config (testable without a
subprocess)."""

from __future__ import annotations

import logging
from pathlib import Path

import keras
import tensorflow as tf
from omegaconf import DictConfig, OmegaConf

from sr.config import ConfigError, build_source, validate
from sr.core.weightfiles import is_weight_file
from sr.data.demo import ensure_demo_for
from sr.loading.models import build_model, load_model, load_model_from_run
from sr.models import registry
from sr.models.complexity import parameters
from sr.train import distribute
from sr.train.init_from import init_from_choice, init_from_fix
from sr.train.loop import Trainer
from sr.train.precision import setup_precision
from sr.train.pretrained import record_init
from sr.train.rundir import check_init_from, check_resume

log = logging.getLogger(__name__)


def run(cfg: DictConfig, run_dir: str | Path) -> dict:
    """Build data, model and trainer from ``cfg`` and train; returns ``Trainer.fit``'s result.

    The ``train`` values are checked first, then the data folders (training and validation
    images; TFRecord shards built) before any model is built, so that a bad value or path fails
    in seconds.

    Raises:
        ConfigError: for a config value out of range (names the key).
        RunDirError: for ``resume=`` or ``train.init_from`` naming a run that cannot be used
            (no checkpoint, no config, a key of ``sr.train.rundir.RUN_KEYS`` changed, or for
            ``train.init_from`` a run of another model, scale or channels).
        ImageFolderError: for a missing or empty image folder, or an unreadable or too small
            validation image (names the file).
        FileNotFoundError: for ``resume=`` pointing at a run without checkpoints.
        NonFiniteError: the loss or weights became NaN/inf (``sr.train.saving``); nothing
            non-finite saved.
        ValidationError: a validation image failed mid-run, after the step was saved.
    """
    validate(cfg)  # every key by its schema, before any data work or model
    if cfg.resume and (Path(cfg.resume) / ".hydra" / "config.yaml").is_file():
        check_resume(cfg)  # as train.py's callback did (which refuses a run without a config)
    elif cfg.train.get("init_from"):
        check_init_from(cfg)
    run_dir = Path(run_dir)
    record_init(cfg, run_dir)  # weight files of train/discriminator.init_from: init_from.json
    strategy = distribute.setup(cfg.train)  # first: multi-worker needs it before any op
    log.info("strategy: %s", distribute.describe(strategy))
    if cfg.seed is not None:
        keras.utils.set_random_seed(int(cfg.seed))
    if cfg.train.deterministic_ops:  # process-wide; GPU kernels take their deterministic paths
        tf.config.experimental.enable_op_determinism()
    loader = build_source(cfg)
    distribute.replica_batch(loader.batch_size, strategy)  # raises if the batch does not split
    ensure_demo_for([loader.hr_dir, loader.val_dir], cfg.demo_dir)
    loader.prepare()  # checks the training and validation folders, builds shards
    loader.check_pipelines(distribute.input_pipelines(strategy))
    precision = setup_precision(cfg.train.precision, strategy)  # before any model is built
    start = None
    if cfg.train.get("init_from") and not cfg.resume:
        source = cfg.train.init_from
        if is_weight_file(source):  # a PyTorch file (sr.train.pretrained)
            start = load_model(source)[0]
        else:  # a run's best (or the chosen checkpoint), its averages where saved
            start = load_model_from_run(*init_from_choice(source), fix=init_from_fix)[0]
    with strategy.scope():
        model = build_model(cfg)
        if start is not None:
            model.set_weights(start.get_weights())
            log.info(
                "train.init_from=%s: the %s weights of its %s; a fresh step, optimizer and data "
                "position", cfg.train.init_from, start.sr_weights, start.sr_checkpoint,
            )  # fmt: skip
    trained, deployed = model.count_params(), parameters(model)
    extra = f" ({deployed} as deployed, re-parameterised)" if deployed != trained else ""
    log.info("model %s: %d parameters%s", model.name, trained, extra)
    check_model_input(model, cfg, getattr(loader, "frames", 1))
    trainer = Trainer(cfg, loader, model, run_dir, mixed=precision.loss_scale, strategy=strategy)
    if cfg.resume:
        trainer.restore()
    return trainer.fit()


def check_model_input(model: keras.Model, cfg: DictConfig, frames: int) -> None:
    """Check that the model takes the data's samples: one LR image ``[B, h, w, 1]`` when
    ``frames`` is 1, a window ``[B, frames, h, w, 1]`` otherwise.

    Raises:
        ConfigError: naming ``model=`` and ``data.frames`` and the fix.
    """
    shape = tuple(model.inputs[0].shape)
    takes = shape[1] if len(shape) == 5 else 1
    if takes == frames:
        return
    name = registry.spec_of(cfg.model).name
    if takes == 1:
        fix = "use a multi-frame model (model=espcn_mf) or data.frames=1"
    else:
        fix = f"set the model's frames to {frames} (model=espcn_mf follows data.frames)"
    raise ConfigError(
        f"the model ({name}) takes {takes} LR frame(s) per sample but the data give {frames} "
        f"(data.frames={frames}): {fix}"
    )


def describe(cfg: DictConfig) -> str:
    """The config as YAML with interpolations resolved (logged at start)."""
    return OmegaConf.to_yaml(cfg, resolve=True)
