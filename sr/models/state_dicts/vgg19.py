"""torchvision's VGG19 state dicts (``torchvision.models.vgg19``: ``vgg19-dcbb9e9d.pth``, the
weights of BasicSR's and Real-ESRGAN's perceptual loss, ``basicsr/archs/vgg_arch.py``), for the
perceptual loss (``loss.vgg_weights=PATH.pth|PATH.safetensors``).

Keys: ``features.N.weight`` ``[out, in, 3, 3]`` and ``features.N.bias`` ``[out]`` for the 16
convs at torchvision's indices of ``vgg19().features`` (:data:`INDICES`: a conv, its ReLU, and a
max pool after each block: 0, 2, 5, 7, 10, 12, 14, 16, 19, 21, 23, 25, 28, 30, 32, 34);
``classifier.*`` (the fully connected head) is ignored, and the reader told. The widths are
read from the shapes (VGG19's 64 ... 512, or a VGG19-shaped test net's); a VGG of another depth
(VGG16's convs sit at other indices) or with batch norm (``vgg19_bn``) is refused. The builder is
:func:`sr.models.vgg.build_torch_vgg_features`, with BasicSR's input normalisation.
"""

from __future__ import annotations

import re

import keras
import numpy as np

from sr.core.weightfiles import read_weights
from sr.models.state_dicts.base import Found, State, StateDictError, check_keys, conv_in, conv_out
from sr.models.vgg import BLOCKS, CONVS, LAYERS, TORCHVISION_URL, build_torch_vgg_features

arch = "vgg19"
kind = "features"
TARGET = "sr.models.vgg.build_torch_vgg_features"
FEATURE = re.compile(r"^features\.(\d+)\.(weight|bias|running_mean|running_var)$")


def _indices() -> tuple[int, ...]:
    """torchvision's ``features`` index of each conv of :data:`sr.models.vgg.CONVS`."""
    out, n = [], 0
    for convs in BLOCKS:
        for _ in range(convs):
            out.append(n)
            n += 2  # the conv and its ReLU
        n += 1  # the max pool
    return tuple(out)


INDICES = _indices()
"""``features.N`` of conv1_1 ... conv5_4."""


def detect(state: State) -> Found | None:
    """The widths of a torchvision VGG19 state dict; None for another architecture.

    Raises:
        StateDictError: a torchvision VGG that is not VGG19 (its convs at other indices), with
            batch norm, or whose convs do not chain (3 channels in, each conv's input the last
            one's output).
    """
    found = {int(m.group(1)) for k in state if (m := FEATURE.match(k)) and m.group(2) == "weight"}
    if "features.0.weight" not in state or not all(
        k.startswith(("features.", "classifier.")) for k in state
    ):
        return None
    if any(k.endswith(("running_mean", "running_var")) for k in state):
        raise StateDictError(
            "a VGG with batch norm (vgg19_bn) is not read: give torchvision's vgg19"
        )
    convs = sorted(i for i in found if np.ndim(state[f"features.{i}.weight"]) == 4)
    if tuple(convs) != INDICES:
        raise StateDictError(
            f"a torchvision VGG with {len(convs)} convs at features.{convs}: VGG19's 16 at "
            f"{list(INDICES)} are read ({TORCHVISION_URL})"
        )
    widths, c_in = [], 3
    for i in INDICES:
        shape = tuple(np.shape(state[f"features.{i}.weight"]))
        if shape[1:] != (c_in, 3, 3):
            raise StateDictError(
                f"features.{i}.weight is {list(shape)}: a 3x3 conv of {c_in} channels expected"
            )
        widths.append(int(shape[0]))
        c_in = shape[0]
    notes = ("classifier.* (the fully connected head) ignored",) if any(
        k.startswith("classifier.") for k in state
    ) else ()  # fmt: skip
    return Found(arch, kind, {"_target_": TARGET, "channels": widths}, 1, 3, notes)


def build(found: Found) -> keras.Model:
    """:func:`sr.models.vgg.build_torch_vgg_features` of ``found``'s widths (every conv built:
    outputs at :data:`sr.models.vgg.LAYERS`, the deepest conv5_4)."""
    return build_torch_vgg_features(found.model["channels"], LAYERS)


def shapes(found: Found) -> dict[str, tuple[int, ...]]:
    """The ``features.N`` keys and shapes of the convs, in torchvision's order."""
    out, c_in = {}, 3
    for i, width in zip(INDICES, found.model["channels"]):
        out[f"features.{i}.weight"] = (width, c_in, 3, 3)
        out[f"features.{i}.bias"] = (width,)
        c_in = width
    return out


def check(state: State, found: Found) -> None:
    """Raise :class:`StateDictError` naming the missing, extra and misshapen ``features.*``
    keys of ``state`` (``classifier.*`` is not read)."""
    ignore = [k for k in state if not k.startswith("features.")]  # the classifier
    check_keys(state, shapes(found), "VGG19's features", f"Give torchvision's {TORCHVISION_URL}",
               ignore=ignore)  # fmt: skip


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set the 16 convs of ``model`` (:func:`build`) from ``state``; nothing is set if a key
    is missing, extra or misshapen."""
    check(state, found)
    for conv, i in zip(CONVS, INDICES):
        w, b = state[f"features.{i}.weight"], state[f"features.{i}.bias"]
        model.get_layer(conv).set_weights([conv_in(w), np.asarray(b, np.float32)])


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The convs of ``model`` as torchvision's ``features.N`` (no classifier)."""
    out = {}
    for conv, i in zip(CONVS, INDICES):
        kernel, bias = model.get_layer(conv).get_weights()
        out[f"features.{i}.weight"] = conv_out(kernel)
        out[f"features.{i}.bias"] = np.ascontiguousarray(bias, dtype=np.float32)
    return out


def load_features(path) -> tuple[keras.Model, Found]:
    """torchvision's VGG19 from ``path`` (``.pth`` or ``.safetensors``, as
    :func:`sr.core.weightfiles.read_weights` reads them) as the pre-ReLU features model of
    :func:`build`, and what was found.

    Raises:
        WeightFileError: the file cannot be read (missing, truncated, ``.pth`` without torch).
        StateDictError: it is not a torchvision VGG19 (naming the file and its first keys).
    """
    file = read_weights(path)
    found = detect(file.state)
    if found is None:
        keys = ", ".join(f"{k} {list(np.shape(v))}" for k, v in list(file.state.items())[:4])
        raise StateDictError(
            f"{file.path}: not torchvision's VGG19 (first keys: {keys}); give "
            f"{TORCHVISION_URL} or a .safetensors of it"
        )
    model = build(found)
    try:
        load(model, file.state, found)
    except StateDictError as e:
        raise StateDictError(f"{file.path}: {e}") from None
    return model, Found(found.arch, found.kind, found.model, 1, 3, (*file.notes, *found.notes))
