"""A trained model written as PyTorch weights: ``scripts/export.py RUN DIR --format
safetensors`` writes ``DIR/model.safetensors``, the reference architecture's state dict
(the layout its architecture declares, ``sr.models.registry``: the keys of the official class,
which it loads with ``strict=True`` and spandrel's ``ModelLoader`` reads), and ``DIR/export.json``.

The file's ``__metadata__`` holds ``format: pt`` (the Hugging Face convention for a PyTorch
state dict), ``arch``, the hyperparameters (``model``, JSON), ``scale``, ``channels`` (``rgb``,
or ``y``: a 1-channel model that reads BT.601 Y) and ``source`` (JSON: run, checkpoint, step,
weights). spandrel reads no metadata: it detects the architecture from the keys, as we do.

The export is checked before it is published: the file read back (``sr.core.weightfiles``)
holds exactly the tensors of the model's state dict, and is detected as the same architecture
and hyperparameters; a failed check leaves nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import keras
import numpy as np
from omegaconf import DictConfig, OmegaConf

from sr.cli import STATE_DICT
from sr.core.weightfiles import read_weights
from sr.deploy.export import ExportCheckError
from sr.deploy.publish import check_out, write_export
from sr.models.state_dicts import found_from_config, save_file

FILE = "model.safetensors"


def export_state_dict(model: keras.Model, cfg: DictConfig, out, source: dict) -> dict:
    """Write ``model`` (of the run config ``cfg``) as ``out/model.safetensors`` and
    ``out/export.json``, checked by reading it back.

    Args:
        model: the Keras model (restored weights).
        cfg: its config (``model`` group, ``data.scale``, ``data.channels``).
        out: the folder to create (absent or empty).
        source: what the model is (run, checkpoint, step, weights), stored as given.

    Returns:
        The ``export.json`` record (``format``, ``file``, ``arch``, ``model``, ``scale``,
        ``channels``, ``check``, ``source``).

    Raises:
        ValueError: an ``out`` that is not empty.
        StateDictError: a model with no PyTorch layout here, or of a scale other than x4.
        ExportCheckError: the file read back differs from the model's state dict.
    """
    out = check_out(out)
    channels = "rgb" if cfg.data.get("channels", "y") == "rgb" else "y"
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    layout, found = found_from_config(
        model_cfg, int(cfg.data.scale), 3 if channels == "rgb" else 1
    )
    metadata = {
        "format": "pt",
        "arch": found.arch,
        "model": json.dumps(found.model, sort_keys=True),
        "scale": str(found.scale),
        "channels": channels,
        "source": json.dumps(source, sort_keys=True),
    }

    def write(folder: Path) -> dict:
        path = save_file(folder / FILE, model, layout, found, metadata)
        tensors = check_round_trip(path, layout.dump(model, found))
        return {
            "format": STATE_DICT,
            "file": FILE,
            "arch": found.arch,
            "model": found.model,
            "scale": found.scale,
            "channels": channels,
            "check": {"round_trip": "identical", "tensors": tensors},
            "source": source,
        }

    return write_export(out, write)


def check_round_trip(path: Path, state: dict[str, np.ndarray]) -> int:
    """Read ``path`` back and compare it with ``state`` tensor by tensor (bit for bit);
    returns the number of tensors.

    Raises:
        ExportCheckError: naming the keys that differ, are missing or extra.
    """
    back = read_weights(path).state
    differ = sorted(set(back) ^ set(state))
    differ += [k for k in state if k in back and not np.array_equal(back[k], state[k])]
    if differ:
        raise ExportCheckError(
            f"{path} read back differs from the model's state dict at {', '.join(differ[:5])}"
            f"{' ...' if len(differ) > 5 else ''}; nothing was exported"
        )
    return len(state)
