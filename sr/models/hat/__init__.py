"""HAT: X. Chen, X. Wang, J. Zhou, Y. Qiao and C. Dong, "Activating More Pixels in Image
Super-Resolution Transformer", CVPR 2023. Official code: github.com/XPixelGroup/HAT
``hat/archs/hat_arch.py`` (spandrel copies it in ``spandrel/architectures/HAT/__arch/HAT.py``):
the architecture's schema and registration; the network is :mod:`sr.models.hat.net` (on
SwinIR's pieces, :mod:`sr.models.swinir.blocks`), the official state-dict layout
:mod:`sr.models.hat.layout`.

Presets (x4 RGB parameters, equal to the official class's): ``conf/model/hat.yaml`` (HAT,
20,772,507), ``hat_s.yaml`` (HAT-S, 9,621,183), ``hat_tiny.yaml`` (CPU tests)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register
from sr.models.swinir import rules as swin_rules


@dataclass
class HATConfig(ModelConfig):
    """Keys of ``model=hat`` (its presets: conf/model/hat*.yaml)."""

    embed_dim: int = bounded(180, minimum=1, integer=True)  # channels of the Transformer
    depths: list[int] = bounded([6, 6, 6, 6, 6, 6], minimum=1, integer=True)  # blocks per group
    heads: list[int] = bounded([6, 6, 6, 6, 6, 6], minimum=1, integer=True)  # heads per group
    window: int = bounded(16, minimum=2, integer=True)  # window side (shift: half of it)
    compress_ratio: int = bounded(3, minimum=1, integer=True)  # conv block: embed_dim / this
    squeeze_factor: int = bounded(30, minimum=1, integer=True)  # channel attention: dim / this
    conv_scale: float = bounded(0.01, minimum=0)  # weight of the conv block beside attention
    overlap_ratio: float = bounded(0.5, minimum=0, maximum=1)  # OCAB window: w + int(w * this)
    mlp_ratio: float = bounded(2.0, minimum=0, above=True)  # MLP hidden channels / embed_dim
    qkv_bias: bool = True  # the q, k, v projections have a bias
    patch_norm: bool = True  # a layer norm after the first conv
    resi_connection: str = bounded("1conv", choices=("1conv", "identity"))  # conv after groups
    num_feat: int = bounded(64, minimum=1, integer=True)  # channels of the upsampler
    img_range: float = bounded(1.0, minimum=0, above=True)  # factor on the mean-free input
    drop_path_rate: float = bounded(0.1, minimum=0, maximum=0.99)  # stochastic depth (training)
    img_size: int = bounded(64, minimum=1, integer=True)  # the reference's (no buffer of it)


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why HAT cannot be built with these keys, or None."""
    why = swin_rules({**keys, "upsampler": "pixelshuffle"}, scale, channels)
    if why:
        return why
    dim, w = keys["embed_dim"], keys["window"]
    if dim // keys["compress_ratio"] < 1 or dim // keys["squeeze_factor"] < 1:
        return (f"model.embed_dim={dim} over model.compress_ratio and model.squeeze_factor "
                "must leave at least one channel")  # fmt: skip
    if int(w * keys["overlap_ratio"]) % 2:
        ratio = keys["overlap_ratio"]
        return (f"model.window={w} times model.overlap_ratio={ratio} must round down to an "
                "even number (the reference's unfold pads half of it each side)")  # fmt: skip
    return None


SPEC = register(
    ModelSpec(
        "hat",
        HATConfig,
        build="sr.models.hat.net:build",
        layout="sr.models.hat.layout",
        rules=rules,
        local=False,  # channel attention over the whole image; windows padded to the image
    )
)
