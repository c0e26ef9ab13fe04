"""PyTorch weight files a training run starts from: ``train.init_from=FILE`` and
``discriminator.init_from=FILE`` checked against the run's config before any work (their
architecture, hyperparameters, scale and channels) and recorded in ``<run>/init_from.json``
(path, size, SHA-256, architecture, hyperparameters, notes), beside the config that names them.
Reading a model from a file or a run folder is :mod:`sr.loading.models`'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import keras
from omegaconf import DictConfig, OmegaConf

from sr.core.errors import ConfigError
from sr.core.weightfiles import WeightFileError, is_weight_file, read_weights
from sr.models.state_dicts import Found, StateDictError, describe, detect

log = logging.getLogger(__name__)

RECORD = "init_from.json"  # in a run folder: the weight files the run started from

__all__ = [
    "RECORD",
    "check_discriminator_file",
    "check_init_file",
    "init_discriminator",
    "record_init",
]

NOT_KEYS = ("_target_", "arch")  # of a Found.model: what names the architecture, not a key


def _read(path, key: str, kind: str):
    """The file of ``key`` read and detected; a ConfigError naming the key otherwise."""
    try:
        file = read_weights(path)
        return file, *detect(file.state, file.path, kind)
    except (WeightFileError, StateDictError) as e:
        raise ConfigError(f"{key}={path}: {e}") from None


def _differences(found: Found, model_cfg, channels: str | None = None, scale=None) -> list:
    """``(key, config's, file's)`` for each hyperparameter of ``found`` the config differs in
    (``data.scale`` and ``data.channels`` too when given)."""
    out = []
    for key, value in found.model.items():
        have = OmegaConf.select(model_cfg, key) if model_cfg is not None else None
        if have != value:
            out.append((key, have, value))
    if scale is not None and scale != found.scale:
        out.append(("data.scale", scale, found.scale))
    want = "rgb" if found.channels == 3 else "y"
    if channels is not None and channels != want:
        out.append(("data.channels", channels, want))
    return out


def check_init_file(cfg: DictConfig) -> dict:
    """Check that the weight file of ``train.init_from`` is a supported generator whose
    hyperparameters, scale and channels are the run's (before any work). Returns what
    :func:`record_init` records.

    Raises:
        ConfigError: an unreadable or unsupported file, or each differing key as ``model.KEY:
            config's -> file's`` with the overrides that fit the file.
    """
    path = cfg.train.init_from
    file, _, found = _read(path, "train.init_from", "generator")
    channels = cfg.data.get("channels", "y")
    differ = _differences(found, cfg.model, channels, int(cfg.data.scale))
    if differ:
        lines = "; ".join(
            f"{k if k.startswith('data.') else 'model.' + k}: {a!r} -> {b!r}" for k, a, b in differ
        )
        fit = " ".join(
            [f"model.{k}={v}" for k, v in found.model.items() if k not in NOT_KEYS]
            + [
                f"data.scale={found.scale}",
                f"data.channels={'rgb' if found.channels == 3 else 'y'}",
            ]
        )
        raise ConfigError(
            f"train.init_from={path}: the file is a {describe(found)}, and this run's config "
            f"differs ({lines}); start it with the model of the file ({_option(found)} {fit})"
        )
    return _record(file, found)


def _option(found: Found) -> str:
    return f"model={found.arch}" if found.kind == "generator" else f"discriminator={found.arch}"


def check_discriminator_file(cfg: DictConfig) -> dict | None:
    """Check ``discriminator.init_from`` (a discriminator of the run's ``discriminator``
    group's features and skip connections, of the run's channels); None if not set.

    Raises:
        ConfigError: as :func:`check_init_file`.
    """
    path = OmegaConf.select(cfg, "discriminator.init_from")
    if not path:
        return None
    file, _, found = _read(path, "discriminator.init_from", "discriminator")
    differ = _differences(found, cfg.discriminator, cfg.data.get("channels", "y"))
    if differ:
        lines = "; ".join(
            f"{k if k.startswith('data.') else 'discriminator.' + k}: {a!r} -> {b!r}"
            for k, a, b in differ
        )
        raise ConfigError(
            f"discriminator.init_from={path}: the file is a {describe(found)}, and this run's "
            f"config differs ({lines}); set the discriminator's keys to the file's"
        )
    return _record(file, found)


def _record(file, found: Found) -> dict:
    digest = hashlib.sha256()
    with open(file.path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {
        "file": str(file.path.resolve()),
        "bytes": file.path.stat().st_size,
        "sha256": digest.hexdigest(),
        "arch": found.arch,
        "kind": found.kind,
        "model": {k: v for k, v in found.model.items()},
        "scale": found.scale,
        "channels": found.channels,
        "wrapper": file.wrapper,
        "notes": [*file.notes, *found.notes],
    }


def init_discriminator(discriminator: keras.Model, cfg: DictConfig) -> None:
    """Set ``discriminator``'s weights from ``discriminator.init_from`` (nothing if unset or
    on a resume, whose checkpoint holds the discriminator).

    Raises:
        ConfigError: as :func:`check_discriminator_file`, or keys that do not fit.
    """
    path = OmegaConf.select(cfg, "discriminator.init_from")
    if not path or cfg.get("resume"):
        return
    file, layout, found = _read(path, "discriminator.init_from", "discriminator")
    try:
        layout.load(discriminator, file.state, found)
    except StateDictError as e:
        raise ConfigError(f"discriminator.init_from={path}: {e}") from None
    log.info("discriminator.init_from=%s: %s", path, describe(found, discriminator))


def record_init(cfg: DictConfig, run_dir) -> dict:
    """Check the weight files of ``train.init_from`` and ``discriminator.init_from`` and write
    ``<run_dir>/init_from.json`` (``{"generator": ..., "discriminator": ...}``, each: file,
    bytes, SHA-256, arch, model, scale, channels, wrapper, notes) if any is given (not on a
    resume). Returns the record (empty if none).

    Raises:
        ConfigError: as :func:`check_init_file` and :func:`check_discriminator_file`.
    """
    if cfg.get("resume"):
        return {}
    record = {}
    init_from = OmegaConf.select(cfg, "train.init_from")
    if init_from and is_weight_file(init_from):
        record["generator"] = check_init_file(cfg)
    discriminator = check_discriminator_file(cfg)
    if discriminator is not None:
        record["discriminator"] = discriminator
    if record:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        for role, r in record.items():
            hyper = " ".join(f"{k}={v}" for k, v in r["model"].items() if k not in NOT_KEYS)
            log.info("%s from %s (sha256 %s): %s", role, r["file"], r["sha256"][:12], hyper)
    return record
