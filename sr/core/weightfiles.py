"""Reading and writing PyTorch weight files: the one reader of ``.safetensors`` and ``.pth``
files, and the one writer of ``.safetensors``. Architectures are read from the tensors by
``sr.models.state_dicts``; this module only turns a file into a flat state dict of NumPy arrays.

Files:

- ``.safetensors`` (Hugging Face's format: an 8-byte little-endian header length, a JSON header
  of names, dtypes, shapes and byte offsets, then the raw tensors): read with
  ``safetensors.numpy`` (no torch, no pickle). bfloat16 tensors, which NumPy has no type for,
  are widened to float32 from their bytes (the upper 16 bits of a float32).
- ``.pth`` / ``.pt`` (``torch.save``: a zip of pickles): read with ``torch.load(path,
  weights_only=True, map_location="cpu")`` when torch is installed (``pip install -e
  ".[torch]"``). ``weights_only=True`` unpickles tensors, dicts, lists and numbers only and
  refuses any other object, so that a file cannot run code when it is opened (a plain pickle
  can); a file that holds a whole pickled ``nn.Module`` is refused for the same reason.

Layouts of the dict inside, as the official code saves them (BasicSR's ``save_network``,
Real-ESRGAN's released files): a bare state dict ``{name: tensor}``, ``{"params": state}`` or
``{"params_ema": state}``; with both, ``params_ema`` (the exponential moving average of the
weights, which the official models are) is taken and the reader is told so.

Every floating tensor comes out float32 (float16, bfloat16 and float64 are cast, and the reader
is told how many were); other dtypes (an ``int64`` step counter) are kept as they are. A file
with a NaN or an infinite value in any floating tensor is refused, naming the tensors and their
counts: such weights upscale into NaN (written as black before this check), start a fine-tune
from NaN or export a NaN model. fp16 casts of float32 weights are where they come from most often
(a weight beyond fp16's 65504 becomes inf).
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SAFETENSORS = ".safetensors"
PICKLES = (".pth", ".pt")
SUFFIXES = (SAFETENSORS, *PICKLES)
"""File name endings read as PyTorch weights (anything else given where a run or a weight file
is expected is neither)."""

WRAPPERS = ("params_ema", "params")  # BasicSR's keys around a state dict, the preferred first
TORCH_EXTRA = 'pip install -e ".[torch]"'
RUN_CONFIG = Path(".hydra", "config.yaml")  # what makes a folder a run of train.py


class WeightFileError(ValueError):
    """A weight file that cannot be read: missing, truncated, not of its format, a pickle that
    is not a state dict, or a ``.pth`` without torch installed. The message names the file and
    the fix; the scripts and ``train.py`` exit with code 2 on it (a ``ValueError``)."""


@dataclass(frozen=True)
class WeightFile:
    """A weight file read into memory.

    Attributes:
        path: the file.
        state: name -> NumPy array in PyTorch's layout (NCHW, OIHW), floats as float32.
        metadata: the ``.safetensors`` header's ``__metadata__`` (string to string; empty for a
            ``.pth``).
        wrapper: ``params_ema`` or ``params`` when the state dict was under that key, else None.
        notes: what the reader should be told: the wrapper taken, the tensors cast.
    """

    path: Path
    state: dict[str, np.ndarray]
    metadata: dict[str, str] = field(default_factory=dict)
    wrapper: str | None = None
    notes: tuple[str, ...] = ()


def is_weight_file(path) -> bool:
    """Whether ``path`` names a PyTorch weight file by its ending (:data:`SUFFIXES`), whether
    or not it exists. A folder so named is taken as one too (:func:`existing_weight_file` then
    says it is a folder where a weight file was expected), unless it is a run folder (it holds
    ``.hydra/config.yaml``)."""
    path = Path(str(path)).expanduser()
    return path.suffix.lower() in SUFFIXES and not (path / RUN_CONFIG).is_file()


def existing_weight_file(path) -> Path:
    """``path`` (``~`` expanded) if it is a file; read nothing (the scripts check a weight file
    with it before they import TensorFlow).

    Raises:
        WeightFileError: if there is no such file, or it is a folder (naming it and the fix).
    """
    path = Path(str(path)).expanduser()
    if path.is_dir():
        raise WeightFileError(
            f"{path} is a folder where a weight file was expected: give the path of the .pth or "
            f".safetensors file itself (the folder holds {_listing(path)})"
        )
    if not path.is_file():
        raise WeightFileError(f"{path}: no such weight file; give the path of a .pth or "
                              ".safetensors file")  # fmt: skip
    return path


def _listing(folder: Path) -> str:
    """The first names in ``folder``, weight files first: what to give instead."""
    names = sorted(p.name for p in folder.iterdir())
    names.sort(key=lambda n: Path(n).suffix.lower() not in SUFFIXES)
    if not names:
        return "nothing"
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def read_weights(path) -> WeightFile:
    """Read a ``.safetensors`` or ``.pth`` weight file.

    Args:
        path: the file (``.safetensors``, ``.pth`` or ``.pt``).

    Returns:
        :class:`WeightFile`: the flat state dict (floats as float32), metadata, notes.

    Raises:
        WeightFileError: a missing file; a truncated or corrupt one ("download it again");
            a ``.pth`` without torch (naming the ``[torch]`` extra); a pickle that holds no
            state dict (a whole model, an optimizer); nested values that are not tensors; a
            floating tensor holding NaN or inf (:func:`check_finite`).
    """
    path = existing_weight_file(path)
    if path.suffix.lower() == SAFETENSORS:
        (raw, bf16), metadata = _read_safetensors(path), _safetensors_metadata(path)
    elif path.suffix.lower() in PICKLES:
        (raw, bf16), metadata = _read_pickle(path), {}
    else:
        raise WeightFileError(
            f"{path}: not a weight file by its name (expected {', '.join(SUFFIXES)})"
        )
    state, wrapper, notes = _unwrap(path, raw)
    check_finite(path, state)
    widened = sum(id(v) in bf16 for v in state.values())
    state, cast = _as_float32(state)
    if widened:
        cast["bf16"] = widened
    if cast:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(cast.items()))
        notes.append(f"cast {kinds} tensor(s) to float32")
    return WeightFile(path, state, metadata, wrapper, tuple(notes))


def _safetensors_header(path: Path) -> dict:
    """The JSON header of a ``.safetensors`` file (format: 8-byte little-endian length, then
    that many bytes of JSON); checks that the tensors' bytes are all there."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _damaged(path, "shorter than a header")
        (length,) = struct.unpack("<Q", head)
        if length > size - 8:
            raise _damaged(path, f"its header says {length} bytes, the file has {size}")
        try:
            header = json.loads(f.read(length))
        except ValueError as e:
            raise _damaged(path, f"its header is not JSON ({e})") from e
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
              default=0)  # fmt: skip
    if 8 + length + end > size:
        raise _damaged(path, f"its tensors need {8 + length + end} bytes, the file has {size}")
    return header


def _read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], int]:
    """Every tensor of a ``.safetensors`` file (by ``safetensors.numpy``; bfloat16 from its
    bytes, as NumPy has no bfloat16), and the ``id`` of each array
    that was bfloat16."""
    from safetensors import SafetensorError, safe_open

    header = _safetensors_header(path)
    out = {}
    try:
        with safe_open(str(path), framework="numpy") as f:
            for key in f.keys():
                if header[key]["dtype"] == "BF16":
                    out[key] = _bfloat16(path, header, key)
                else:
                    out[key] = f.get_tensor(key)
    except SafetensorError as e:
        raise _damaged(path, str(e)) from e
    return out, {id(v) for k, v in out.items() if header[k]["dtype"] == "BF16"}


def _bfloat16(path: Path, header: dict, key: str) -> np.ndarray:
    """A bfloat16 tensor of a ``.safetensors`` file as float32: its 16 bits are the upper half
    of a float32's."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
    start, end = header[key]["data_offsets"]
    with open(path, "rb") as f:
        f.seek(8 + length + start)
        half = np.frombuffer(f.read(end - start), dtype="<u2")
    return (half.astype(np.uint32) << 16).view(np.float32).reshape(header[key]["shape"])


def _safetensors_metadata(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return dict(f.metadata() or {})


def _read_pickle(path: Path) -> tuple[object, int]:
    """``torch.load(path, weights_only=True, map_location="cpu")``, tensors to NumPy, and the
    ``id`` of each array widened from bfloat16."""
    try:
        import torch
    except ImportError:
        raise WeightFileError(
            f"{path} is a PyTorch pickle: reading it needs torch, which is not installed: "
            f"{TORCH_EXTRA} (or use the model's .safetensors file)"
        ) from None
    try:
        obj = torch.load(str(path), weights_only=True, map_location="cpu")
    except Exception as e:  # torch's zip reader, its unpickler, its weights-only checks
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).split(". ")[0].splitlines()
        text = text[0] if text else type(e).__name__
        if "weights_only" in str(e) or "Unsupported global" in str(e):
            raise WeightFileError(
                f"{path} holds objects other than tensors (a whole pickled model or training "
                f"state), which are not unpickled here because unpickling them could run code "
                f"({text[:200]}); save its state_dict() with torch.save, or as .safetensors, "
                f"in an environment that trusts the file"
            ) from e
        raise _damaged(path, text[:300]) from e
    widened: set = set()
    return _to_numpy(obj, torch, widened), widened


def _to_numpy(obj, torch, widened: set):
    """Tensors of a loaded pickle (nested dicts) to NumPy arrays; bfloat16, which NumPy lacks,
    widened to float32 (the ``id`` of each such array added to ``widened``)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu()
        if t.dtype == torch.bfloat16:
            array = t.float().numpy()
            widened.add(id(array))
            return array
        return t.numpy()
    if isinstance(obj, Mapping):
        return {str(k): _to_numpy(v, torch, widened) for k, v in obj.items()}
    return obj


def _unwrap(path: Path, raw) -> tuple[dict[str, np.ndarray], str | None, list[str]]:
    """The flat state dict of ``raw`` (a bare dict, or under ``params`` / ``params_ema``)."""
    notes: list[str] = []
    if not isinstance(raw, Mapping):
        raise WeightFileError(
            f"{path} holds a {type(raw).__name__}, not a state dict; save the model's "
            "state_dict() instead"
        )
    wrapper = None
    present = [k for k in WRAPPERS if isinstance(raw.get(k), Mapping)]
    if present:
        wrapper = present[0]
        raw = raw[wrapper]
        also = ""
        if len(present) > 1:
            also = f" ({present[1]} is also there; the moving average is what was released)"
        notes.append(f"took the weights under {wrapper!r}{also}")
    state, bad = {}, []
    for key, value in raw.items():
        if isinstance(value, np.ndarray):
            state[key] = value
        else:
            bad.append(key)
    if bad or not state:
        listed = ", ".join(bad[:6]) + (" ..." if len(bad) > 6 else "")
        raise WeightFileError(
            f"{path} is not a state dict of tensors"
            + (f": {listed} are not tensors" if bad else ": it holds no tensor")
            + f" (top-level keys: {', '.join(list(raw)[:6])}); give a file of a model's weights"
            " (a bare state dict, or one under 'params' / 'params_ema' as BasicSR saves)"
        )
    return state, wrapper, notes


def check_finite(path, state: Mapping[str, np.ndarray]) -> None:
    """Refuse weights with a NaN or infinite value in a floating tensor (checked in the file's
    own dtype: an fp16 inf is caught as it is).

    Raises:
        WeightFileError: naming the file, each such tensor (the first 6) with its count of
            non-finite values and size, and the fix.
    """
    bad = []
    for key, value in state.items():
        if np.issubdtype(value.dtype, np.floating):
            count = int(value.size - np.count_nonzero(np.isfinite(value)))
            if count:
                bad.append(f"{key} ({count} of {value.size} values)")
    if bad:
        listed = ", ".join(bad[:6]) + (f" and {len(bad) - 6} more" if len(bad) > 6 else "")
        raise WeightFileError(
            f"{path} holds NaN or infinite weights: {listed}; a model with them outputs NaN. "
            "Use a float32 copy of the weights (an fp16 cast overflows to inf beyond 65504), "
            "or download the file again"
        )


def _as_float32(state: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Floating arrays as float32; ``{dtype name: count}`` of those cast."""
    out, cast = {}, {}
    for key, value in state.items():
        if np.issubdtype(value.dtype, np.floating) and value.dtype != np.float32:
            name = {np.dtype("float16"): "fp16", np.dtype("float64"): "fp64"}.get(
                value.dtype, str(value.dtype)
            )
            cast[name] = cast.get(name, 0) + 1
            value = value.astype(np.float32)
        out[key] = value
    return out, cast


def _damaged(path: Path, problem: str) -> WeightFileError:
    return WeightFileError(
        f"{path} is truncated or corrupt ({problem}); download it again, or check it against "
        "the checksum its release lists"
    )


def write_safetensors(path, state: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> Path:
    """Write ``state`` as a ``.safetensors`` file atomically: into a temporary file beside it,
    then renamed over ``path``, so that an interrupted write leaves no partial file.

    Tensors are written C-contiguous (safetensors refuses strided views: spandrel PR #157, a
    transposed kernel being one), in their dtype.

    Args:
        path: the file to write (its folder must exist).
        state: name -> NumPy array.
        metadata: string -> string (the header's ``__metadata__``; spandrel reads none, but
            keeps it).

    Returns:
        ``path``.

    Raises:
        ValueError: a metadata value that is not a string.
    """
    from safetensors.numpy import save_file

    path = Path(path)
    bad = [k for k, v in metadata.items() if not isinstance(v, str)]
    if bad:
        raise ValueError(f"safetensors metadata must be strings; not: {', '.join(bad)}")
    # ascontiguousarray makes a 0-d array (BatchNorm's num_batches_tracked) 1-d: reshaped back
    tensors = {k: np.ascontiguousarray(v).reshape(np.shape(v)) for k, v in state.items()}
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        save_file(tensors, str(tmp), metadata=dict(metadata))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
