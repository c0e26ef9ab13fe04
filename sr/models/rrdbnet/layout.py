"""RRDBNet (ESRGAN, Real-ESRGAN) state dicts: BasicSR's ``RRDBNet``
(``basicsr/archs/rrdbnet_arch.py``, the layout of ``RealESRGAN_x4plus.pth`` and
``ESRGAN_SRx4_DF2KOST_official.pth``), ESRGAN's 2019 layout (``RRDB_trunk.N.RDBk.convM``,
``trunk_conv``, ``upconv1``, ``HRconv``: ``RRDB_ESRGAN_x4.pth``, BSRGAN) and the old ESRGAN
layout of the 2018 code (``model.N.*``: ``model.0`` the first conv, ``model.1.sub.N.RDBk.convM.0``
the blocks, ``model.1.sub.<blocks>`` the trunk's last conv, ``model.3`` and ``model.6`` the
upsampling convs, ``model.8`` and ``model.10`` the last two), as spandrel reads them all
(``libs/spandrel/spandrel/architectures/ESRGAN/__init__.py``).

Every layout is renamed to BasicSR's keys (``conv_first``, ``body.N.rdbK.convM``, ``conv_body``,
``conv_up1``, ``conv_up2``, ``conv_hr``, ``conv_last``), from which the hyperparameters are read:
features (``conv_first`` out), growth (``body.0.rdb1.conv1`` out), blocks (the ``body.N``),
image channels (``conv_first`` in, ``conv_last`` out) and scale (x4: two upsampling convs and
as many input channels as output; BasicSR's x2 and x1 pixel-unshuffle the input, giving 4 or 16
times as many). Only x4 is read. The project's builder is
:func:`sr.models.rrdbnet.net.build_rrdbnet`, whose convolutions carry the same names (``.``
written ``_``). A model is written back in BasicSR's layout, which BasicSR's class loads with
``strict=True`` and spandrel reads.
"""

from __future__ import annotations

import re

import keras
import numpy as np

from sr.models.registry import build_model
from sr.models.state_dicts.base import (
    Found,
    State,
    StateDictError,
    check_keys,
    conv_in,
    conv_out,
)

arch = "rrdbnet"
kind = "generator"

ESRGAN_2019 = [  # ESRGAN's RRDBNet_arch.py of 2019 (and BSRGAN) -> BasicSR's names
    (r"^RRDB_trunk\.(\d+)\.RDB(\d)\.conv(\d)\.", r"body.\1.rdb\2.conv\3."),
    (r"^trunk_conv\.", "conv_body."),
    (r"^upconv(\d)\.", r"conv_up\1."),
    (r"^HRconv\.", "conv_hr."),
]
OLD_BLOCK = re.compile(r"^model\.1\.sub\.(\d+)\.RDB(\d)\.conv(\d)\.0\.(weight|bias)$")
OLD_CONV = re.compile(r"^model\.(\d+)\.(weight|bias)$")


def _from_old(state: State) -> dict[str, np.ndarray]:
    """The 2018 ``model.N.*`` layout renamed to BasicSR's; keys it does not know kept as
    they are (reported as extra)."""
    blocks = {int(m.group(1)) for k in state if (m := OLD_BLOCK.match(k))}
    body = max(blocks) + 1 if blocks else 0  # model.1.sub.<blocks>: the trunk's last conv
    convs = sorted({int(m.group(1)) for k in state if (m := OLD_CONV.match(k))})
    last = max(convs, default=0)
    names = {0: "conv_first", last: "conv_last", last - 2: "conv_hr"}
    ups = [n for n in convs if 0 < n < last - 2]
    names.update({n: f"conv_up{i}" for i, n in enumerate(ups, start=1)})
    out = {}
    for key, value in state.items():
        if m := OLD_BLOCK.match(key):
            out[f"body.{m.group(1)}.rdb{m.group(2)}.conv{m.group(3)}.{m.group(4)}"] = value
        elif m := re.match(rf"^model\.1\.sub\.{body}\.(weight|bias)$", key):
            out[f"conv_body.{m.group(1)}"] = value
        elif (m := OLD_CONV.match(key)) and int(m.group(1)) in names:
            out[f"{names[int(m.group(1))]}.{m.group(2)}"] = value
        else:
            out[key] = value
    return out


def canonical(state: State) -> tuple[dict[str, np.ndarray], str | None]:
    """``state`` in BasicSR's key names, and the layout it was in (None: BasicSR's, or not
    RRDBNet at all)."""
    if "model.0.weight" in state and any(OLD_BLOCK.match(k) for k in state):
        return _from_old(state), "the old ESRGAN layout (model.N.*)"
    if "conv_first.weight" in state and any(k.startswith("RRDB_trunk.") for k in state):
        out = {}
        for key, value in state.items():
            for pattern, repl in ESRGAN_2019:
                key = re.sub(pattern, repl, key)
            out[key] = value
        return out, "ESRGAN's 2019 layout (RRDB_trunk, trunk_conv, upconv, HRconv)"
    return dict(state), None


def detect(state: State) -> Found | None:
    """RRDBNet's hyperparameters from BasicSR's, ESRGAN's 2019 or the old ``model.N.*`` keys;
    None for another architecture.

    Raises:
        StateDictError: an RRDBNet of another scale than x4, ESRGAN+ (``conv1x1`` in its
            blocks), or different input and output channels.
    """
    s, variant = canonical(state)
    if not all(
        k in s for k in ("conv_first.weight", "body.0.rdb1.conv1.weight", "conv_last.weight")
    ):
        return None
    if any(".conv1x1." in k for k in state):
        raise StateDictError("an ESRGAN+ RRDBNet (conv1x1 in its blocks) is not read here")
    c_in, c_out = s["conv_first.weight"].shape[1], s["conv_last.weight"].shape[0]
    ups = sum(f"conv_up{n}.weight" in s for n in range(1, 5))
    found = f"an RRDBNet (ESRGAN) with {c_in} input and {c_out} output channels"
    if c_in in (4 * c_out, 16 * c_out) and variant is None:
        scale = 2 if c_in == 4 * c_out else 1  # BasicSR's pixel-unshuffled x2 and x1
        raise StateDictError(f"{found}: a x{scale} model (its input pixel-unshuffled by "
                             f"{int(np.sqrt(c_in // c_out))})")  # fmt: skip
    if ups != 2:
        scale = {1: "x2 (or x3)", 3: "x8"}.get(ups, f"{ups} upsampling stages")
        raise StateDictError(f"{found} and {ups} upsampling conv(s): a {scale} model")
    if c_in != c_out or c_in not in (1, 3):
        raise StateDictError(f"{found}: 3 (RGB) or 1 in and out are read")
    blocks = len({k.split(".")[1] for k in s if k.startswith("body.")})
    model = {
        "arch": arch,
        "features": int(s["conv_first.weight"].shape[0]),
        "blocks": blocks,
        "growth": int(s["body.0.rdb1.conv1.weight"].shape[0]),
    }
    notes = (f"read {variant} as BasicSR's RRDBNet",) if variant else ()
    return Found(arch, kind, model, 4, int(c_in), notes)


def shapes(found: Found) -> dict[str, tuple[int, ...]]:
    """BasicSR's ``RRDBNet(num_in_ch=C, num_out_ch=C, scale=4, num_feat=f, num_block=b,
    num_grow_ch=g).state_dict()`` keys and shapes, in its order."""
    c, f = found.channels, found.model["features"]
    b, g = found.model["blocks"], found.model["growth"]

    def conv(name, c_in, c_out):
        return {f"{name}.weight": (c_out, c_in, 3, 3), f"{name}.bias": (c_out,)}

    out = conv("conv_first", c, f)
    for i in range(b):
        for r in range(1, 4):
            for k in range(1, 6):
                out.update(conv(f"body.{i}.rdb{r}.conv{k}", f + (k - 1) * g, g if k < 5 else f))
    for name in ("conv_body", "conv_up1", "conv_up2", "conv_hr"):
        out.update(conv(name, f, f))
    out.update(conv("conv_last", f, c))
    return out


def build(found: Found) -> keras.Model:
    """:func:`sr.models.rrdbnet.net.build_rrdbnet` of ``found`` at x4."""
    return build_model(found.model, found.scale, found.channels)


def check(state: State, found: Found) -> None:
    """Raise :class:`StateDictError` naming the missing, extra and misshapen keys of
    ``state`` (in BasicSR's names) against ``found``'s model."""
    m = found.model
    check_keys(
        state,
        shapes(found),
        f"RRDBNet of {m['blocks']} blocks of {m['features']} features, growth {m['growth']}",
        "Give the complete file as BasicSR saves it",
    )


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set every conv of ``model`` (:func:`build`) from ``state``, in any of the three
    layouts; nothing is set if a key is missing, extra or misshapen."""
    s, _ = canonical(state)
    check(s, found)
    for key in shapes(found):
        if key.endswith(".weight"):
            name = key[: -len(".weight")]
            layer = model.get_layer(name.replace(".", "_"))
            layer.set_weights([conv_in(s[key]), np.asarray(s[f"{name}.bias"], np.float32)])


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """``model`` as BasicSR's RRDBNet state dict (C-contiguous float32)."""
    out = {}
    for key in shapes(found):
        if key.endswith(".weight"):
            name = key[: -len(".weight")]
            kernel, bias = model.get_layer(name.replace(".", "_")).get_weights()
            out[key] = conv_out(kernel)
            out[f"{name}.bias"] = np.ascontiguousarray(bias, dtype=np.float32)
    return out
