"""The config: structured schemas (Hydra ConfigStore), composition for scripts, building the data
source with its checks, and the config tables of docs/config.md.

A typo, a wrong type or a key of the other data mode in an override is an error at start-up, not
a silent default; a value out of range is a :class:`ConfigError` naming the key. The YAML files of
``conf/`` extend these schemas through their defaults lists (``- base_tfrecord``,
``- base_train``); the data schemas are each mode's of ``sr.data.schemas``. No module read here
imports TensorFlow (building a source or a degradation does): ``train.py`` refuses a bad command
line before it imports the trainer. ``${sr_root:}`` resolves to the project's root folder (the
parent of the ``sr`` package), so that default paths work from any working directory.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from hydra.core.config_store import ConfigStore
from hydra.errors import (
    ConfigCompositionException,
    InstantiationException,
    OverrideParseException,
)
from omegaconf import MISSING, DictConfig, OmegaConf

from sr.core.errors import ConfigError
from sr.core.schema import bounded, check_node, composition_error, override_parse_error
from sr.data import schemas as data_schemas
from sr.data.schemas import SCHEMAS as DATA_MODES
from sr.degradations import registry as degradation_registry
from sr.degradations.registry import DegradationConfig
from sr.losses import legacy as legacy_loss
from sr.losses import registry as loss_terms
from sr.losses import rules as loss_rules
from sr.models import registry
from sr.models.gan_schemas import DOWNSAMPLING, DiscriminatorConfig

if TYPE_CHECKING:
    from sr.data.source import PatchSource

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MODEL_PRESETS = PROJECT_ROOT / "conf" / "model"  # the model group's presets (sr.models.registry)

# The schema of each conf/data/<mode>.yaml (named by its defaults list and sr.data.SOURCES)
DATA_SCHEMAS = {f"base_{mode}": schema for mode, schema in DATA_MODES.items()}


def _unit_open(value) -> str | None:
    """Why ``value`` is not a number in (0, 1), or None."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1
    return None if ok else "must be a number in (0, 1)"


def _unit_half_open(value) -> str | None:
    """Why ``value`` is not a number in [0, 1), or None."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1
    return None if ok else "must be a number in [0, 1)"


def _ema(value) -> str | None:
    """Why ``value`` is not a decay of ``train.ema``, or None."""
    why = "must be null (no weight averaging) or a decay in (0, 1) such as 0.999"
    return None if _unit_open(value) is None else why


def _guard_lr_factor(value) -> str | None:
    """Why ``value`` is not a ``train.guard_lr_factor``, or None."""
    why = "must be a number in (0, 1) (each rollback multiplies the learning rate by it)"
    return None if _unit_open(value) is None else why


def _count(default: int, minimum: int = 1):
    return bounded(default, minimum=minimum, integer=True)


def _positive(default):
    return bounded(default, minimum=0, above=True)


@dataclass
class TrainConfig:
    """Keys of the ``train`` group (schema; defaults written here only)."""

    steps: int = _count(5000)  # training steps (a resumed run continues to this step)
    lr: float = _positive(1e-3)  # initial learning rate
    # cosine: to lr / 100 over the steps; step: halve each lr_decay_steps; constant
    lr_schedule: str = bounded("cosine", choices=("cosine", "step", "constant"))
    lr_decay_steps: int = _count(200_000)  # step schedule: halve every this many steps
    # cosine schedule: linear warm-up from 0 over this many steps
    lr_warmup_steps: int = _count(0, minimum=0)
    log_every: int = _count(100)  # timing line and TensorBoard scalars every N steps
    val_every: int = _count(1000)  # PSNR/SSIM on data.val_dir every N steps (and at the end)
    # checkpoint every N steps (and at the end, and on Ctrl-C / SIGTERM)
    ckpt_every: int = _count(1000)
    max_to_keep: int = _count(3)  # checkpoints kept
    val_images: int = _count(3, minimum=0)  # validation images shown in TensorBoard
    xla: bool = False  # jit_compile the train step
    # the layers' compute dtype (variables stay float32): bfloat16 on a CPU with AMX or
    # AVX512-BF16, a TPU or a GPU of compute capability >= 8.0, else float32 with a warning;
    # float16 (with loss scaling) on a GPU (docs/training.md, "Precision")
    precision: str = bounded("float32", choices=("float32", "bfloat16", "float16"))
    # wall-time budget of the loop (summed over resumes): the LR schedule runs over it, and the
    # run stops when it ends (saved, validated)
    max_minutes: float | None = _positive(None)
    # exponential moving average of the weights with this decay (e.g. 0.999), validated and saved
    # beside them; evaluate/upscale/export use it when present (--weights live for the others)
    ema: float | None = bounded(None, check=_ema)
    # the average's decay warms up, min(ema, (1 + n) / (10 + n)) after n updates; false: ema from
    # the first update, as BasicSR (Real-ESRGAN's recipes)
    ema_warmup: bool = bounded(True, choices=(True, False))
    # a run directory: start a new run from its weights (checkpoints/best, or its newest; its
    # train.ema averages where it has them) with a fresh step, optimizer and data position; its
    # model, data.scale and data.channels must be this run's (not resume=, which continues it);
    # RUN/checkpoints/ckpt-N (or last, its newest) starts from that checkpoint of its rotation
    init_from: str | None = None
    # NaN/inf loss: stop (exit 3, last good checkpoint kept) or skip the step's update
    on_nonfinite: str = bounded("stop", choices=("stop", "skip"))
    deterministic_ops: bool = False  # TensorFlow op determinism: bit-identical, slower on GPU
    # auto: mirrored over 2+ GPUs, else one device; multi_worker: the cluster of TF_CONFIG
    strategy: str = bounded("auto", choices=("auto", "mirrored", "multi_worker", "one_device"))
    devices: list[str] | None = None  # mirrored / one_device: ["/gpu:0", "/gpu:1"]; null: all
    # split the CPU into N logical devices (multi-replica without GPUs)
    logical_cpus: int = _count(0, minimum=0)
    profile_steps: list[int] | None = None  # [START, STOP]: profiler trace into tb/ (chief)
    # multi_worker: how long a worker waits for its peers (TF_CONFIG) before exiting non-zero
    cluster_timeout_minutes: float = _positive(10.0)
    # clip the gradient to this global L2 norm (all variables together, after the sum over the
    # replicas, on unscaled gradients under mixed precision); null: no clipping
    clip_norm: float | None = _positive(None)
    # divergence guard (docs/training.md): a loss explosion or spike, or a validation collapse,
    # restores the last good checkpoint, scales the learning rate by guard_lr_factor and goes on
    guard: bool = True
    # the loss-spike rules judge from this many steps after the run's own first step (a resumed
    # run: after the step it resumed at): the first steps' loss falls fast and erratically
    guard_from: int = _count(1000, minimum=0)
    # a log window's mean loss above this x the lowest window mean
    guard_loss_factor: float = bounded(2.0, minimum=1, above=True)
    # one step's loss above this x the previous window's mean
    guard_step_factor: float = bounded(5.0, minimum=1, above=True)
    # a log window's mean loss above this x the run's lowest loss (its first step's or a window
    # mean) is an explosion, judged from the first window on, whatever guard_from says
    guard_explode_factor: float = bounded(100.0, minimum=1, above=True)
    # validation PSNR more than this many dB below the best so far, judged as soon as a best
    # exists (a resumed run: its checkpoints/best)
    guard_val_drop: float = _positive(3.0)
    # the GAN stage (discriminator=unet_sn): validation PSNR more than this many dB below the
    # stage's start (its train.init_from weights); a GAN gives up a dB or two for texture
    guard_gan_val_drop: float = _positive(5.0)
    # each rollback multiplies the learning rate by this, in (0, 1)
    guard_lr_factor: float = bounded(0.5, check=_guard_lr_factor)
    guard_max_rollbacks: int = _count(3, minimum=0)  # one more divergence stops the run (exit 4)


# The allowed values of the ``train`` keys that name a choice, from the schema's fields.
TRAIN_CHOICES = {
    f.name: f.metadata["choices"]
    for f in dataclasses.fields(TrainConfig)
    if f.metadata.get("choices")
}


@dataclass
class LossConfig:
    """Keys of the ``loss`` group (``conf/loss/<preset>.yaml``): its terms, each term's keys by
    its schema in ``sr.losses`` (``sr.losses.registry``)."""

    _target_: str = legacy_loss.TARGET  # the class the trainer builds: sr.losses.Loss
    # term name -> its keys (weight, target, its own): l1, l2, charbonnier, perceptual, gan, fft
    terms: dict[str, Any] = field(default_factory=dict)


@dataclass
class AdamConfig:
    """Keys of every option of the ``optimizer`` group (``conf/optimizer/<name>.yaml``, a class of
    ``sr.train.optimizers``)."""

    _target_: str = MISSING
    # decay of the first-moment estimate, in [0, 1)
    beta_1: float = bounded(0.9, check=_unit_half_open)
    # decay of the second-moment estimate, in [0, 1)
    beta_2: float = bounded(0.999, check=_unit_half_open)


@dataclass
class AdamWConfig(AdamConfig):
    """Keys of ``optimizer=adamw``."""

    # decoupled weight decay per step, times the lr (Keras's default)
    weight_decay: float = bounded(0.004, minimum=0)


BICUBIC_TARGET = degradation_registry.get("bicubic").target  # a run without the group: bicubic

# The schemas of the ``loss``, ``optimizer``, ``model`` and ``degradation`` groups (each option's
# defaults list names one).
LOSS_SCHEMAS = {"base_loss": LossConfig}
OPTIMIZER_SCHEMAS = {"base_adam": AdamConfig, "base_adamw": AdamWConfig}
# The schema whose bounds check an option's values, by the class the option names (``_target_``).
GROUP_SCHEMAS = {
    "optimizer": {
        "sr.train.optimizers.Adam": AdamConfig,
        "sr.train.optimizers.AdamW": AdamWConfig,
    },
}


# The schema of each registered degradation (``sr.degradations.registry``): ``base_<name>``
DEGRADATION_SCHEMAS = {
    "base_degradation": DegradationConfig,
    **{f"base_{spec.name}": spec.schema for spec in degradation_registry.specs()},
}

# Keys that moved (into a config group, or another key): an override naming one is refused with
# the new name.
MOVED_KEYS = {
    "train.loss": "the loss is the config group `loss`: choose it as loss=<name>, e.g. "
    "loss=charbonnier (conf/loss/)",
    "train.beta_1": "Adam's betas moved to the optimizer group: optimizer.beta_1=<value>",
    "train.beta_2": "Adam's betas moved to the optimizer group: optimizer.beta_2=<value>",
    "data.flip": "random flips are data.flips=hv|h|none (vertical and horizontal, horizontal "
    "only, none): data.flip=false is data.flips=none",
    **{
        f"loss.{old}": f"the loss is its terms since issue 44: {new} (docs/config.md, 'Loss')"
        for old, new in (
            ("eps", "loss.terms.charbonnier.eps"),
            ("l1_weight", "loss.terms.l1.weight"),
            ("perceptual_weight", "loss.terms.perceptual.weight (0: ~loss.terms.perceptual)"),
            ("vgg_weights", "loss.terms.perceptual.vgg_weights"),
            ("vgg_layer_weights", "loss.terms.perceptual.layer_weights"),
            ("gan_weight", "loss.terms.gan.weight (no GAN: ~loss.terms.gan)"),
            ("l1_gt_usm", "loss.terms.l1.target=gt_usm|gt"),
            ("percep_gt_usm", "loss.terms.perceptual.target=gt_usm|gt"),
            ("gan_gt_usm", "loss.terms.gan.target=gt|gt_usm"),
        )
    },
    "train.mixed_precision": "the compute precision is train.precision=float32|bfloat16|float16 "
    "(train.mixed_precision=true was train.precision=float16: float16 with loss scaling on a "
    "GPU; train.precision=bfloat16 also runs on a CPU with AMX or AVX512-BF16)",
}


GROUPS = ("data", "model", "train", "loss", "optimizer", "degradation", "discriminator")


def group_choices(group: str) -> list[str]:
    """The options of a config group: the names of ``conf/<group>/*.yaml``, and for ``model``
    the registered architectures too (``model=<arch>``, ``sr.models.registry.schema_nodes``)."""
    names = {p.stem for p in (PROJECT_ROOT / "conf" / group).glob("*.yaml")}
    if group == "model":
        names |= set(registry.schema_nodes(MODEL_PRESETS)) - {f"base_{n}" for n in names}
        names = {n for n in names if not n.startswith("base_")}
    return sorted(names)


def check_overrides(overrides) -> None:
    """Refuse an override of a key that moved (:data:`MOVED_KEYS`), naming where it went, and an
    option that its config group does not have (``model=foo``), listing the group's options.

    Raises:
        ConfigError: for ``train.loss=...``, ``train.beta_1=...``, ``train.beta_2=...`` or
            ``train.mixed_precision=...`` or ``data.flip=...`` (also with ``+``, ``++`` or ``~``);
            for ``<group>=<option>`` (a sweep's options too) without
            ``conf/<group>/<option>.yaml``.
    """
    registry.import_plugins(registry.plugins_of(overrides))  # their models are options
    for override in overrides:
        text = str(override)
        key, _, value = text.lstrip("+~").partition("=")
        key = key.strip()
        if key in MOVED_KEYS:
            raise ConfigError(f"{key} is no longer a key: {MOVED_KEYS[key]}")
        if key not in (*GROUPS, "experiment") or not value or text.startswith("~") or "(" in value:
            continue
        choices = group_choices(key)
        for option in (v.strip() for v in value.split(",")):  # a sweep: model=espcn,span
            if option not in choices and not (key == "experiment" and option == "null"):
                raise ConfigError(
                    f"{key}={option}: the {key} group has no option {option!r}; choose one of "
                    f"{', '.join(choices)} (conf/{key}/)"
                )


def validate_train(cfg: DictConfig) -> None:
    """Check every ``train.*``, ``loss.*`` and ``optimizer.*`` value of the composed config,
    before any data or model work.

    Structured configs check types only (``train.steps=abc``); this checks ranges and choices.
    Every interval (``steps``, ``log_every``, ``val_every``, ``ckpt_every``, ``max_to_keep``,
    ``lr_decay_steps``) is an integer >= 1; ``lr_warmup_steps`` and ``val_images`` >= 0; ``lr``
    a finite number > 0; ``max_minutes`` and ``clip_norm`` null or > 0; ``ema`` null or in
    (0, 1); ``guard_from`` and ``guard_max_rollbacks`` integers >= 0, ``guard_loss_factor``,
    ``guard_step_factor`` and ``guard_explode_factor`` > 1, ``guard_val_drop`` and
    ``guard_gan_val_drop`` > 0,
    ``guard_lr_factor`` in (0, 1);
    ``optimizer.beta_1`` and ``optimizer.beta_2`` in [0, 1), ``optimizer.weight_decay`` >= 0;
    ``loss.eps`` > 0.

    Args:
        cfg: the composed config (its ``train``, ``loss`` and ``optimizer`` groups).

    Raises:
        ConfigError: for the first value out of range, naming the key, the allowed range or
            values, and the value given (``train.steps must be an integer >= 1, got -5``).
    """
    check_node(OmegaConf.to_container(cfg.train, resolve=True), TrainConfig, "train")
    _check_devices(cfg.train)
    schema = GROUP_SCHEMAS["optimizer"].get(OmegaConf.select(cfg, "optimizer._target_"))
    if schema is not None:  # a class of one's own checks its own arguments
        check_node(OmegaConf.to_container(cfg.optimizer, resolve=True), schema, "optimizer")
    loss_rules.check_loss(cfg)


def _check_devices(t) -> None:
    """``train.profile_steps`` and ``train.devices``."""
    if t.profile_steps is not None:
        steps = list(t.profile_steps)
        if not (
            len(steps) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in steps)
            and 1 <= steps[0] < steps[1]
        ):
            raise ConfigError(
                f"train.profile_steps must be [START, STOP] with 1 <= START < STOP (steps), "
                f"got {steps!r}"
            )
        if steps[1] > t.steps:
            raise ConfigError(
                f"train.profile_steps={steps!r} ends after train.steps={t.steps}: the trace "
                "would never be written; choose steps within the run"
            )
    if t.devices is not None and (not t.devices or t.strategy not in ("mirrored", "one_device")):
        raise ConfigError(
            f"train.devices={list(t.devices)!r} needs train.strategy=mirrored or one_device and "
            "at least one device name (e.g. [/gpu:0,/gpu:1])"
        )


def validate(cfg: DictConfig) -> None:
    """Check every value of the composed config that its schema's types cannot, before any data
    or model work: the ``train``, ``loss`` and ``optimizer`` keys (:func:`validate_train`) and
    the model's hyperparameters (its architecture's schema and rules, ``sr.models.registry``), the
    degradation's values (:func:`check_degradation`), the ``data`` values by their mode's
    schema, its bounds and rules (:func:`check_data`); :func:`build_source` checks them again.

    Raises:
        ConfigError: for the first value out of range, naming the key, the allowed values and
            the value given (``model.blocks must be an integer >= 1, got -1``).
    """
    validate_train(cfg)
    channels = 3 if OmegaConf.select(cfg, "data.channels", default="y") == "rgb" else 1
    scale = OmegaConf.select(cfg, "data.scale", default=4)
    model = OmegaConf.to_container(cfg.model, resolve=True)
    patch = OmegaConf.select(cfg, "data.patch_size", default=None)
    try:
        registry.check_model(model, scale, channels, patch)
    except ConfigError as e:
        raise followed_key_error(e, cfg.model, "model") from None
    if cfg.get("discriminator") is not None:
        check_node(
            OmegaConf.to_container(cfg.discriminator, resolve=True),
            DiscriminatorConfig,
            "discriminator",
        )
    check_adversary(cfg)
    check_degradation(cfg)
    check_data(cfg)


_FOLLOWS = re.compile(r"\$\{(?:oc\.select:)?([\w.]+)(?:,[^}]*)?\}")


def followed_key_error(error: ConfigError, node: DictConfig, group: str) -> ConfigError:
    """``error`` about a key of ``group`` that follows another key by interpolation
    (``model.frames: ${oc.select:data.frames,1}``) restated for the key the user typed:
    ``data.frames must be an integer >= 1, got 0 (model.frames follows it)``."""
    text = str(error)
    for key, value in OmegaConf.to_container(node, resolve=False).items():
        source = _FOLLOWS.fullmatch(value) if isinstance(value, str) else None
        if source and text.startswith(f"{group}.{key} "):
            rest = text[len(f"{group}.{key}") :]
            return ConfigError(f"{source[1]}{rest} ({group}.{key} follows it)")
    return error


def check_adversary(cfg: DictConfig) -> None:
    """The one rule of the adversarial part: a GAN term (``loss.terms.gan``) and a
    discriminator (``discriminator=unet_sn``) come together, and the discriminator takes HR
    patches it can halve three times (``sr.models.discriminator.DOWNSAMPLING``). What is
    configured chooses the way of training (``sr.train.parts.training_part``).

    Raises:
        ConfigError: a discriminator without a GAN term, a GAN term without a discriminator,
            or a ``data.patch_size`` that is not a multiple of 8 with a discriminator.
    """
    has_d = bool(OmegaConf.select(cfg, "discriminator._target_", default=None))
    loss_rules.adversary_rule(loss_rules.adversarial_terms(cfg), has_d)
    patch = OmegaConf.select(cfg, "data.patch_size", default=None)
    if has_d and isinstance(patch, int) and patch % DOWNSAMPLING:
        scale = OmegaConf.select(cfg, "data.scale", default=1)
        step = math.lcm(DOWNSAMPLING, scale if isinstance(scale, int) and scale > 0 else 1)
        near = sorted({max(step, patch // step * step), -(-patch // step) * step})
        raise ConfigError(
            f"data.patch_size={patch}: discriminator=unet_sn halves the HR patch three times "
            f"and joins its U-Net's skips, so the patch must be a multiple of {DOWNSAMPLING}: "
            f"use {' or '.join(map(str, near))}"
        )


def load(*overrides: str) -> DictConfig:
    """The config of ``python train.py <overrides>`` with every key checked by its schema: what
    ``train.py`` refuses (exit code 2) before any work, the data values aside
    (:func:`build_source`).

    Raises:
        ConfigError: for an option a group does not have, a key that moved, a wrong type or
            unknown key (:func:`composition_error`), or a value out of range (:func:`validate`).
    """
    try:
        cfg = compose(*overrides)
    except ConfigCompositionException as e:
        raise loss_rules.key_error(e) or composition_error(e) from e
    except OverrideParseException as e:  # a value Hydra's grammar cannot read: how to quote it
        raise override_parse_error(e) from e
    validate(cfg)
    return cfg


@dataclass
class Config:
    """The root of the config (``conf/config.yaml``)."""

    data: Any = MISSING
    model: Any = MISSING
    train: TrainConfig = field(default_factory=TrainConfig)
    loss: Any = MISSING
    optimizer: Any = MISSING
    degradation: Any = MISSING  # the LR operator: bicubic (default) or realesrgan
    discriminator: Any = MISSING  # none (default) or unet_sn: the GAN stage's discriminator
    seed: int | None = 0  # seeds shuffles, crops, flips and weights (null: none)
    resume: str | None = None  # a run directory (outputs/DATE/TIME): continue from its checkpoint
    demo_dir: str = "${sr_root:}/data/demo"  # built from scikit-image's photos when used
    # modules to import before composing: a user's packages that register models (model=<name>)
    plugins: list[str] = field(default_factory=list)


def _hydra_subdir(resume: str | None) -> str:
    """``hydra.output_subdir``: ``.hydra`` for a new run; for ``resume=`` a folder of its own,
    ``.hydra/resume-<DATE>_<TIME>-<microseconds>``, so the run's first config stays in place."""
    from datetime import datetime

    return f".hydra/resume-{datetime.now():%Y-%m-%d_%H-%M-%S-%f}" if resume else ".hydra"


# the registry's model schemas last stored in Hydra's ConfigStore (None: nothing stored yet);
# storing converts every dataclass to a config node (about 0.1 s on a 2-core EPYC), once
_STORED_MODELS: dict | None = None


def register() -> None:
    """Register the resolvers (``sr_root``, ``sr_or``, ``sr_hydra_subdir``) and the schemas
    (idempotent: the schemas are stored again only when the model registry changed, as a
    plug-in's import changes it)."""
    global _STORED_MODELS
    if not OmegaConf.has_resolver("sr_root"):
        OmegaConf.register_new_resolver("sr_root", lambda: str(PROJECT_ROOT))
    if not OmegaConf.has_resolver("sr_or"):  # first argument that is not null
        OmegaConf.register_new_resolver("sr_or", lambda *args: next((a for a in args if a), None))
    if not OmegaConf.has_resolver("sr_hydra_subdir"):  # hydra.output_subdir: see sr/train/rundir
        OmegaConf.register_new_resolver("sr_hydra_subdir", _hydra_subdir, use_cache=True)
    models = registry.schema_nodes(MODEL_PRESETS)
    if models == _STORED_MODELS:
        return
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    for name, node in DATA_SCHEMAS.items():
        cs.store(group="data", name=name, node=node)
    cs.store(group="train", name="base_train", node=TrainConfig)
    for group, schemas in (
        ("loss", LOSS_SCHEMAS),
        ("optimizer", OPTIMIZER_SCHEMAS),
        ("model", models),
        ("degradation", DEGRADATION_SCHEMAS),
        ("discriminator", {"base_discriminator": DiscriminatorConfig}),
    ):
        for name, node in schemas.items():
            cs.store(group=group, name=name, node=node)
    _STORED_MODELS = models


register()


def compose(*overrides: str) -> DictConfig:
    """The config that ``python train.py <overrides>`` would run with, for scripts and tests.

    Composes ``conf/config.yaml`` of the project (``PROJECT_ROOT / "conf"``, whatever the working
    directory) against the schemas above, without starting a Hydra run (no output directory, no
    ``hydra`` node). Must not be called from inside a ``@hydra.main`` application.

    Args:
        overrides: Hydra overrides as on the command line, e.g. ``"data=generator"``,
            ``"data.hr_dir=/data/DIV2K/DIV2K_train_HR"``.

    Returns:
        The composed config (interpolations such as ``${sr_root:}`` unresolved until read).

    Raises:
        hydra.errors.ConfigCompositionException: for an unknown group option or key
            (``data.pach=64``), or a value of the wrong type (``data.patch_size=abc``).
        ConfigError: for a key that moved into a group (``train.loss=l2``: ``loss=l2``).
    """
    registry.import_plugins(registry.plugins_of(overrides))
    register()  # the plugins' models as options of the model group
    check_overrides(overrides)
    # composed once per process (conf/ and the schemas do not change); the caller's own copy
    return copy.deepcopy(_composed(tuple(overrides)))


@functools.lru_cache(maxsize=64)
def _composed(overrides: tuple[str, ...]) -> DictConfig:
    with hydra.initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return hydra.compose("config", overrides=list(overrides))


def build_source(cfg: DictConfig) -> PatchSource:
    """Instantiate ``cfg.data`` (the data source of the chosen mode), which checks every
    ``data.*`` value.

    Raises:
        ConfigError: for a key the mode does not take (``+data.pool_size=16`` with
            ``data=tfrecord``) or a value out of range, naming the key and the fix.
    """
    check_data(cfg, hydra.utils.get_class(cfg.data._target_).schema)
    degradation = build_degradation(cfg)
    try:
        source = hydra.utils.instantiate(cfg.data, degradation=degradation)
    except InstantiationException as e:
        if isinstance(e.__cause__, ValueError):
            raise ConfigError(str(e.__cause__)) from e
        raise
    if degradation.gt_usm:  # a sharpened target; a term may take the HR as it is (target: gt)
        terms = OmegaConf.select(cfg, "loss.terms", default=None)
        if terms is not None:
            settings = loss_terms.term_settings(OmegaConf.to_container(terms, resolve=True))
            source.plain_target = any(s.target == "gt" for s in settings.values())
    return source


def check_data(cfg: DictConfig, schema: type | None = None) -> None:
    """The ``data.*`` values checked without TensorFlow by their mode's schema (``schema``, else
    the structured config's own): keys, bounds and cross-key rules (``sr.data.schemas.check``),
    and against the degradation's declared geometry (margin, least crop, pool). Raises
    ConfigError naming the keys and the fix."""
    node = cfg.get("data")
    schema = schema or (OmegaConf.get_type(node) if node is not None else None)
    if isinstance(schema, type) and issubclass(schema, data_schemas.DataConfig):
        values = OmegaConf.to_container(node, resolve=True)
        data_schemas.check(schema, values)
        node = cfg.get("degradation")
        keys = {} if node is None else OmegaConf.to_container(node, resolve=True)
        data_schemas.check_degradation_fit(schema, values, keys.pop("_target_", None), keys)


def check_degradation(cfg: DictConfig) -> None:
    """The ``degradation.*`` values checked without TensorFlow: a registered degradation's by
    its declared check (``sr.degradations.registry``: ``degradation=realesrgan``'s
    ``realesrgan_params.check_keys``, the class's own; bicubic takes no key); a class of one's
    own is built (``sr.degradations.registry.check``). Raises ConfigError naming the key."""
    node = cfg.get("degradation")
    degradation_registry.check(node and OmegaConf.to_container(node, resolve=True))


def build_degradation(cfg: DictConfig):
    """The run's LR operator: ``cfg.degradation`` instantiated (``sr.degradations.Bicubic`` for a
    config without the group, as runs saved before it existed: ``sr.degradations.registry.build``).

    Raises:
        ConfigError: for a bad ``degradation.*`` key or value, naming it.
    """
    return degradation_registry.build(cfg.get("degradation"))


def degradation_named(name: str, *overrides: str):
    """The degradation ``name`` (``conf/degradation/<name>.yaml``) with ``degradation.*``
    overrides, for scripts (``scripts/evaluate.py --degradation``).

    Raises:
        ConfigError: for an unknown name (listing the choices) or a bad key.
    """
    choices = group_choices("degradation")
    if name not in choices:
        raise ConfigError(f"unknown degradation {name!r}: choose one of {', '.join(choices)}")
    return build_degradation(load(f"degradation={name}", *overrides))
