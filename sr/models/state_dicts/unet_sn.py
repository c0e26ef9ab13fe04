"""Real-ESRGAN's discriminator state dicts: ``UNetDiscriminatorSN`` of
``basicsr/archs/discriminator_arch.py`` (registered by Real-ESRGAN's
``realesrgan/archs/discriminator_arch.py``), the layout of ``RealESRGAN_x4plus_netD.pth``.

Keys, for F features and C image channels (``torch.nn.utils.spectral_norm`` on conv1..conv8):

- ``conv0.weight`` ``[F, C, 3, 3]``, ``conv0.bias`` ``[F]``;
- ``convK.weight_orig`` (the trained weight), ``convK.weight_u`` ``[out]`` and
  ``convK.weight_v`` ``[in kh kw]`` (the power iteration's buffers), no bias, for the three
  4x4 stride-2 convs down (K = 1, 2, 3: F -> 2F -> 4F -> 8F), the three 3x3 convs after each
  2x bilinear upsampling (K = 4, 5, 6: 8F -> 4F -> 2F -> F) and two 3x3 convs (K = 7, 8: F);
- ``conv9.weight`` ``[1, F, 3, 3]``, ``conv9.bias`` ``[1]``.

F and C are read from ``conv0.weight``. The skip connections have no tensors, so the state dict
cannot tell them: they are taken as on (the reference's default and every released file), and
the reader is told so. The builder is :func:`sr.models.discriminator.build_unet_discriminator`,
whose layers carry the reference's names, its spectral norm
(:class:`sr.models.spectral_norm.SpectralNorm`) PyTorch's: ``weight_orig`` is the wrapped
conv's kernel; ``weight_u`` is the same vector; ``weight_v`` indexes the kernel's
``(C_in, kh, kw)`` in PyTorch and ``(kh, kw, C_in)`` here, so it is permuted both ways.
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.discriminator import build_unet_discriminator
from sr.models.state_dicts.base import Found, State, StateDictError, check_keys, conv_in, conv_out

arch = "unet_sn"
kind = "discriminator"
TARGET = "sr.models.discriminator.build_unet_discriminator"
SKIP_NOTE = (
    "skip_connection is not in a UNetDiscriminatorSN state dict: taken as true (the "
    "reference's default); set discriminator.skip_connection=false for a model without"
)


def conv_shapes(f: int) -> dict[str, tuple[int, int, int, int]]:
    """``convK`` (K = 1..8, spectrally normalised) -> its ``weight_orig`` shape
    ``[out, in, kh, kw]`` for F = ``f`` features (the reference's ``__init__``)."""
    sizes = [(2 * f, f, 4), (4 * f, 2 * f, 4), (8 * f, 4 * f, 4), (4 * f, 8 * f, 3),
             (2 * f, 4 * f, 3), (f, 2 * f, 3), (f, f, 3), (f, f, 3)]  # fmt: skip
    return {f"conv{k}": (o, i, s, s) for k, (o, i, s) in enumerate(sizes, start=1)}


def shapes(found: Found) -> dict[str, tuple[int, ...]]:
    """The reference's ``state_dict()`` keys and shapes, in its order."""
    c, f = found.channels, found.model["features"]
    out: dict[str, tuple[int, ...]] = {"conv0.weight": (f, c, 3, 3), "conv0.bias": (f,)}
    for name, (o, i, kh, kw) in conv_shapes(f).items():
        out[f"{name}.weight_orig"] = (o, i, kh, kw)
        out[f"{name}.weight_u"] = (o,)
        out[f"{name}.weight_v"] = (i * kh * kw,)
    out.update({"conv9.weight": (1, f, 3, 3), "conv9.bias": (1,)})
    return out


def detect(state: State) -> Found | None:
    """F, C (and the skip connections, assumed) of a ``UNetDiscriminatorSN`` state dict; None
    for another architecture.

    Raises:
        StateDictError: ``conv0.weight`` is not ``[F, C, 3, 3]`` with C = 1 or 3.
    """
    if not all(k in state for k in ("conv0.weight", "conv1.weight_orig", "conv9.weight")):
        return None
    w = np.shape(state["conv0.weight"])
    if len(w) != 4 or w[2:] != (3, 3) or w[1] not in (1, 3):
        raise StateDictError(
            f"a UNetDiscriminatorSN whose conv0.weight is {list(w)}: [F, 3 or 1, 3, 3] is read"
        )
    model = {"_target_": TARGET, "features": int(w[0]), "skip_connection": True}
    return Found(arch, kind, model, 1, int(w[1]), (SKIP_NOTE,))


def build(found: Found) -> keras.Model:
    """:func:`sr.models.discriminator.build_unet_discriminator` of ``found``."""
    m = found.model
    return build_unet_discriminator(
        found.channels, int(m["features"]), bool(m.get("skip_connection", True))
    )


def check(state: State, found: Found) -> None:
    """Raise :class:`StateDictError` naming the missing, extra and misshapen keys of
    ``state`` against ``found``'s discriminator."""
    check_keys(
        state,
        shapes(found),
        f"UNetDiscriminatorSN of {found.model['features']} features on {found.channels} channels",
        "Give the complete file as Real-ESRGAN saves it (RealESRGAN_x4plus_netD.pth)",
    )


def v_in(v: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """PyTorch's ``weight_v`` (``(C_in, kh, kw)`` order) for a ``weight_orig`` of ``shape``
    ``[out, in, kh, kw]`` in the order of the Keras kernel ``[kh, kw, in, out]``."""
    _, i, kh, kw = shape
    return np.ascontiguousarray(np.transpose(np.reshape(v, (i, kh, kw)), (1, 2, 0)).reshape(-1),
                                dtype=np.float32)  # fmt: skip


def v_out(v: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of :func:`v_in`."""
    _, i, kh, kw = shape
    return np.ascontiguousarray(np.transpose(np.reshape(v, (kh, kw, i)), (2, 0, 1)).reshape(-1),
                                dtype=np.float32)  # fmt: skip


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set every variable of ``model`` (:func:`build`) from ``state``, the power iteration's
    buffers included; nothing is set if a key is missing, extra or misshapen."""
    check(state, found)
    for name in ("conv0", "conv9"):
        w, b = state[f"{name}.weight"], state[f"{name}.bias"]
        model.get_layer(name).set_weights([conv_in(w), np.asarray(b, np.float32)])
    for name, shape in conv_shapes(found.model["features"]).items():
        layer = model.get_layer(name)
        layer.layer.kernel.assign(conv_in(state[f"{name}.weight_orig"]))
        layer.weight_u.assign(np.asarray(state[f"{name}.weight_u"], np.float32))
        layer.weight_v.assign(v_in(state[f"{name}.weight_v"], shape))


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """``model`` as the reference's state dict (C-contiguous float32), in its key order."""
    out: dict[str, np.ndarray] = {}
    for name in ("conv0",):
        kernel, bias = model.get_layer(name).get_weights()
        out.update({f"{name}.weight": conv_out(kernel), f"{name}.bias": bias.astype(np.float32)})
    for name, shape in conv_shapes(found.model["features"]).items():
        layer = model.get_layer(name)
        out[f"{name}.weight_orig"] = conv_out(layer.layer.kernel.numpy())
        out[f"{name}.weight_u"] = np.ascontiguousarray(layer.weight_u.numpy(), np.float32)
        out[f"{name}.weight_v"] = v_out(layer.weight_v.numpy(), shape)
    kernel, bias = model.get_layer("conv9").get_weights()
    out.update({"conv9.weight": conv_out(kernel), "conv9.bias": bias.astype(np.float32)})
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}
