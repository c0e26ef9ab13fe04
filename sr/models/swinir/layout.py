"""SwinIR's state-dict layout, as the official code saves it (JingyunLiang/SwinIR
``models/network_swinir.py``) and spandrel reads it (``spandrel/architectures/SwinIR``):
``conv_first``, ``patch_embed.norm``, ``layers.<i>.residual_group.blocks.<b>`` (``norm1``,
``attn.relative_position_bias_table``, ``attn.qkv``, ``attn.proj``, ``norm2``, ``mlp.fc1``,
``mlp.fc2``; the buffers ``attn.relative_position_index`` and, in shifted blocks,
``attn_mask``), ``layers.<i>.conv``, ``norm``, ``conv_after_body`` and the upsampler's convs.

Read from the keys and shapes, as spandrel's loader: the upsampler (``conv_before_upsample``
with ``conv_up1``: nearest+conv, without: pixelshuffle; ``upsample.0`` alone:
pixelshuffledirect), the embed dim (``conv_first.weight`` ``[dim, C, 3, 3]``), the image
channels, the MLP ratio (``mlp.fc1.bias`` over dim), the window (``relative_position_index``
``[w^2, w^2]``), ``img_size`` (``attn_mask`` ``[(img/w)^2, ...]``), depths and heads per group
(the bias tables' second dimension), ``resi_connection`` (``conv_after_body.weight``: 1conv,
else 3conv) and the scale (only x4). spandrel's ``img_range`` rule (255 for window 7, the JPEG
models) is kept. The buffers are checked by shape and recomputed on dump.
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.registry import build_model
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, State, StateDictError
from sr.models.swinir import blocks

arch = "swinir"
kind = "generator"

BLOCK = "layers.0.residual_group.blocks.0"
KEYS = (f"{BLOCK}.norm1.weight", f"{BLOCK}.mlp.fc1.bias", f"{BLOCK}.attn.relative_position_index")
BUFFERS = (
    "relative_position_index",
    "attn_mask",
    "relative_position_index_SA",
    "relative_position_index_OCA",
)  # HAT's last two
FEAT = 64  # the reference's num_feat of its pixelshuffle and nearest+conv upsamplers
SCALE = 4


def is_buffer(key: str) -> bool:
    """A tensor the reference computes (not a parameter)."""
    return key.endswith(BUFFERS)


def _conv(out: int, c_in: int, k: int = 3) -> dict:
    return {"weight": (out, c_in, k, k), "bias": (out,)}


def _add(shapes: dict, prefix: str, parts: dict) -> None:
    shapes.update({f"{prefix}.{k}": tuple(v) for k, v in parts.items()})


def resi_shapes(shapes: dict, prefix: str, dim: int, kind: str) -> None:
    """The conv after a group or the body (``1conv``, ``3conv``; ``identity`` none)."""
    if kind == "1conv":
        _add(shapes, prefix, _conv(dim, dim))
    elif kind == "3conv":
        _add(shapes, f"{prefix}.0", _conv(dim // 4, dim))
        _add(shapes, f"{prefix}.2", _conv(dim // 4, dim // 4, 1))
        _add(shapes, f"{prefix}.4", _conv(dim, dim // 4))


def upsampler_shapes(shapes: dict, m: dict, channels: int, scale: int, feat: int) -> None:
    """The reference's upsampler convs (:func:`sr.models.swinir.blocks.upsampled`)."""
    dim, up = m["embed_dim"], m.get("upsampler", "pixelshuffle")
    if up == "pixelshuffledirect":
        _add(shapes, "upsample.0", _conv(channels * scale * scale, dim))
        return
    _add(shapes, "conv_before_upsample.0", _conv(feat, dim))
    if up == "nearest+conv":
        for i in range(scale.bit_length() - 1):
            _add(shapes, f"conv_up{i + 1}", _conv(feat, feat))
        _add(shapes, "conv_hr", _conv(feat, feat))
    else:
        factors = [3] if scale == 3 else [2] * (scale.bit_length() - 1)
        for i, f in enumerate(factors):
            _add(shapes, f"upsample.{2 * i}", _conv(feat * f * f, feat))
    _add(shapes, "conv_last", _conv(channels, feat))


def block_shapes(m: dict, heads: int) -> dict:
    """One Swin block's parameters (suffix -> shape)."""
    dim, hidden, w = m["embed_dim"], int(m["embed_dim"] * m["mlp_ratio"]), m["window"]
    shapes = {"norm1.weight": (dim,), "norm1.bias": (dim,)}
    shapes["attn.relative_position_bias_table"] = ((2 * w - 1) ** 2, heads)
    shapes["attn.relative_position_index"] = (w * w, w * w)
    shapes["attn.qkv.weight"] = (3 * dim, dim)
    if m.get("qkv_bias", True):
        shapes["attn.qkv.bias"] = (3 * dim,)
    shapes |= {"attn.proj.weight": (dim, dim), "attn.proj.bias": (dim,)}
    shapes |= {"norm2.weight": (dim,), "norm2.bias": (dim,)}
    shapes |= {"mlp.fc1.weight": (hidden, dim), "mlp.fc1.bias": (hidden,)}
    return shapes | {"mlp.fc2.weight": (dim, hidden), "mlp.fc2.bias": (dim,)}


def shapes_of(m: dict, channels: int, scale: int = SCALE) -> dict[str, tuple[int, ...]]:
    """Every tensor of the reference's state dict for the keys ``m`` (``model`` keys of
    ``sr.models.swinir.SwinIRConfig``), in its order: key -> shape (buffers included)."""
    dim, w, img = m["embed_dim"], m["window"], m["img_size"]
    shapes = {}
    _add(shapes, "conv_first", _conv(dim, channels))
    if m.get("patch_norm", True):
        shapes |= {"patch_embed.norm.weight": (dim,), "patch_embed.norm.bias": (dim,)}
    windows = (img // w) ** 2
    for i, depth in enumerate(m["depths"]):
        for b in range(depth):
            prefix = f"layers.{i}.residual_group.blocks.{b}"
            if b % 2:
                shapes[f"{prefix}.attn_mask"] = (windows, w * w, w * w)
            _add(shapes, prefix, block_shapes(m, m["heads"][i]))
        resi_shapes(shapes, f"layers.{i}.conv", dim, m["resi_connection"])
    shapes |= {"norm.weight": (dim,), "norm.bias": (dim,)}
    resi_shapes(shapes, "conv_after_body", dim, m["resi_connection"])
    upsampler_shapes(shapes, m, channels, scale, FEAT)
    return shapes


def parameters(shapes: dict) -> int:
    """The parameters among ``shapes`` (PyTorch's count: buffers aside)."""
    return sum(int(np.prod(s)) for k, s in shapes.items() if not is_buffer(k))


def _upsampler(state: State) -> str:
    if "conv_before_upsample.0.weight" in state:
        return "nearest+conv" if "conv_up1.weight" in state else "pixelshuffle"
    if "upsample.0.weight" in state:
        return "pixelshuffledirect"
    raise StateDictError(
        "a SwinIR state dict without an upsampler (no conv_before_upsample nor upsample.0): "
        "a denoising or JPEG model (scale 1), which this project does not run"
    )


def read_scale(state: State, up: str, channels: int, feat: int) -> int:
    """The scale of the upsampler ``up`` (spandrel's rules)."""
    if up == "nearest+conv":
        return 2 ** sum(1 for k in state if k.startswith("conv_up") and k.endswith(".weight"))
    if up == "pixelshuffledirect":
        out = pairs.shape_of(state, "upsample.0.weight", arch, 4)[0]
        return pairs.shuffle_scale(out, channels, "upsample.0.weight", arch)
    scale, i = 1, 0
    while f"upsample.{i}.weight" in state:
        scale *= pairs.shuffle_scale(np.shape(state[f"upsample.{i}.weight"])[0], feat,
                                     f"upsample.{i}.weight", arch)  # fmt: skip
        i += 2
    return scale


def _window(state: State, key: str) -> int:
    n = pairs.shape_of(state, key, arch, 2)[0]
    w = int(round(n**0.5))
    if w * w != n:
        raise StateDictError(f"{arch}: {key} has {n} rows, not a window side squared")
    return w


def detect(state: State) -> Found | None:
    """The SwinIR of ``state``'s keys and shapes, or None if it is not a SwinIR state dict.

    Raises:
        StateDictError: for a SwinIR of a scale other than 4, without an upsampler (denoising,
            JPEG), with a pixel-unshuffled input, or whose shifted blocks have no mask.
    """
    if not (all(k in state for k in KEYS) and "conv_first.weight" in state):
        if all(k in state for k in KEYS) and "conv_first.1.weight" in state:
            raise StateDictError("a SwinIR with a pixel-unshuffled input (conv_first.1): "
                                 "not supported; only x4 SR models are")  # fmt: skip
        return None
    if "relative_position_index_SA" in state:
        return None  # HAT
    up = _upsampler(state)
    dim, channels = pairs.shape_of(state, "conv_first.weight", arch, 4)[:2]
    window = _window(state, f"{BLOCK}.attn.relative_position_index")
    scale = read_scale(state, up, channels, FEAT)
    pairs.only_x4(scale, arch, f"the {up} upsampler's convs")
    groups = pairs.numbered(state, "layers.", arch, first=0)
    depths = [pairs.numbered(state, f"layers.{i}.residual_group.blocks.", arch, first=0)
              for i in range(groups)]  # fmt: skip
    table = "residual_group.blocks.0.attn.relative_position_bias_table"
    heads = [pairs.shape_of(state, f"layers.{i}.{table}", arch, 2)[1] for i in range(groups)]
    img_size = 64
    if any(d > 1 for d in depths):
        mask = "layers.0.residual_group.blocks.1.attn_mask" if depths[0] > 1 else None
        if mask is None or mask not in state:
            raise StateDictError(f"{arch}: a shifted block without its attn_mask buffer (the "
                                 "reference's image size is at most its window)")  # fmt: skip
        img_size = int(round(np.shape(state[mask])[0] ** 0.5)) * window
    model = {
        "arch": arch, "embed_dim": dim, "depths": depths, "heads": heads, "window": window,
        "mlp_ratio": float(np.shape(state[f"{BLOCK}.mlp.fc1.bias"])[0] / dim),
        "qkv_bias": f"{BLOCK}.attn.qkv.bias" in state,
        "patch_norm": "patch_embed.norm.weight" in state,
        "resi_connection": "1conv" if "conv_after_body.weight" in state else "3conv",
        "upsampler": up, "img_range": 255.0 if window == 7 else 1.0, "img_size": img_size,
    }  # fmt: skip
    notes = (f"upsampler {up}, window {window}, depths {depths}",)
    return Found(arch, kind, model, scale, channels, notes)


def build(found: Found) -> keras.Model:
    """``sr.models.swinir.net.build`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def _f32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a), dtype=np.float32)


def _plain(key: str, variable) -> pairs.Slot:
    shape = tuple(int(d) for d in variable.shape)
    return pairs.Slot(key, variable, shape, _f32, _f32)


def _flip(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a).T, dtype=np.float32)


def _dense(key: str, variable) -> pairs.Slot:
    c_in, c_out = (int(d) for d in variable.shape)
    return pairs.Slot(key, variable, (c_out, c_in), _flip, _flip)


def layer_slots(prefix: str, layer) -> list[pairs.Slot]:
    """The slots of one Keras layer as the PyTorch module at ``prefix`` (Conv2D, Dense,
    LayerNormalization)."""
    if isinstance(layer, keras.layers.LayerNormalization):
        return [_plain(f"{prefix}.weight", layer.gamma), _plain(f"{prefix}.bias", layer.beta)]
    if isinstance(layer, keras.layers.Conv2D):
        slots = [pairs.kernel(f"{prefix}.weight", layer.kernel)]
    elif isinstance(layer, keras.layers.Dense):
        slots = [_dense(f"{prefix}.weight", layer.kernel)]
    else:
        raise StateDictError(f"no PyTorch layout for the Keras layer {prefix} ({type(layer)})")
    if layer.use_bias:
        slots.append(pairs.bias(f"{prefix}.bias", layer.bias))
    return slots


def model_slots(model: keras.Model, channels: int, shuffles: dict) -> list[pairs.Slot]:
    """Every slot of ``model`` (layers named by their reference prefix; a block layer by its
    ``parts`` and ``torch_tensors()``); a conv named in ``shuffles`` (prefix -> factor) feeds a
    pixel shuffle: its output channels are reordered between the layouts."""
    slots = []
    for layer in model.layers:
        if hasattr(layer, "parts"):
            for suffix, part in layer.parts.items():
                slots += layer_slots(f"{layer.name}.{suffix}", part)
            slots += [_plain(f"{layer.name}.{s}", v) for s, v in layer.torch_tensors().items()]
        elif layer.weights:
            own = layer_slots(layer.name, layer)
            if layer.name in shuffles:
                factor = shuffles[layer.name]
                own = pairs.shuffled(own, int(layer.kernel.shape[-1]) // factor**2, factor)
            slots += own
    return slots


def shuffles_of(m: dict, channels: int, scale: int, feat: int = FEAT) -> dict:
    """The convs that feed a pixel shuffle: prefix -> factor."""
    up = m.get("upsampler", "pixelshuffle")
    if up == "pixelshuffledirect":
        return {"upsample.0": scale}
    if up == "nearest+conv":
        return {}
    factors = [3] if scale == 3 else [2] * (scale.bit_length() - 1)
    return {f"upsample.{2 * i}": f for i, f in enumerate(factors)}


def load_with(model, state: State, found: Found, shapes: dict, what: str) -> None:
    """Set ``model`` from ``state`` against ``shapes`` (the reference's keys): every parameter
    set, the buffers checked by shape."""
    slots = model_slots(model, found.channels, shuffles_of(found.model, found.channels,
                                                           found.scale))  # fmt: skip
    params = {k for k in shapes if not is_buffer(k)}
    if {s.key for s in slots} != params:
        raise StateDictError(f"the Keras model {model.name!r} is not the {what} of the file: "
                             "build it with the layout's build()")  # fmt: skip
    derived = {k: s for k, s in shapes.items() if is_buffer(k)}
    pairs.load(state, slots, what, derived)


def dump_with(model, found: Found, shapes: dict, buffers: dict) -> dict[str, np.ndarray]:
    """The reference state dict of ``model`` in the order of ``shapes``, with ``buffers``."""
    slots = model_slots(model, found.channels, shuffles_of(found.model, found.channels,
                                                           found.scale))  # fmt: skip
    state = pairs.dump(slots) | buffers
    return {k: state[k] for k in shapes}


def buffers_of(shapes: dict, m: dict) -> dict[str, np.ndarray]:
    """SwinIR's buffers: each block's relative position index and each shifted block's mask."""
    w, img = m["window"], m["img_size"]
    index = blocks.relative_index(w).astype(np.float32)
    mask = blocks.shift_mask_np(img, img, w, w // 2) if img > w else None
    out = {}
    for k in shapes:
        if k.endswith("relative_position_index"):
            out[k] = index
        elif k.endswith("attn_mask"):
            out[k] = mask
    return out


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set ``model`` (of :func:`build`) from ``state``.

    Raises:
        StateDictError: naming missing, extra and misshapen keys; nothing is set then.
    """
    load_with(model, state, found, shapes_of(found.model, found.channels, found.scale), arch)


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The reference state dict of ``model`` (buffers recomputed), loadable by the official
    class (``img_size`` = ``found.model['img_size']``) with ``strict=True``.

    Raises:
        StateDictError: for a scale other than 4, or an ``img_range`` other than spandrel's
            reading of the file (255 for a window of 7, else 1).
    """
    m = found.model
    want = 255.0 if m["window"] == 7 else 1.0
    faults = []
    if m.get("img_range", 1.0) != want:
        read = f"spandrel reads {want:g} for window {m['window']}"
        faults.append(f"model.img_range={m.get('img_range')} ({read})")
    pairs.refuse_unwritable(found, faults, "SwinIR", "the official one",
                            f"Train an x4 model with model.img_range={want:g}")  # fmt: skip
    shapes = shapes_of(found.model, found.channels, found.scale)
    return dump_with(model, found, shapes, buffers_of(shapes, found.model))
