"""SwinIR: J. Liang, J. Cao, G. Sun, K. Zhang, L. Van Gool and R. Timofte, "SwinIR: Image
Restoration Using Swin Transformer", ICCV Workshops 2021. Official code:
github.com/JingyunLiang/SwinIR ``models/network_swinir.py`` (BasicSR's
``basicsr/archs/swinir_arch.py`` is the same network; spandrel copies it in
``spandrel/architectures/SwinIR/__arch/SwinIR.py``): the architecture's schema and registration;
the network is :mod:`sr.models.swinir.net`, the official state-dict layout
:mod:`sr.models.swinir.layout`, the Swin pieces HAT shares :mod:`sr.models.swinir.blocks`.

Presets (x4 RGB parameters, equal to the official class's): ``conf/model/swinir.yaml``
(classical, 11,900,199), ``swinir_light.yaml`` (lightweight, 929,628), ``swinir_real.yaml``
(real-world M, ``nearest+conv``, 11,715,559), ``swinir_tiny.yaml`` (CPU tests)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register

UPSAMPLERS = ("pixelshuffle", "pixelshuffledirect", "nearest+conv")


@dataclass
class SwinIRConfig(ModelConfig):
    """Keys of ``model=swinir`` (its presets: conf/model/swinir*.yaml)."""

    embed_dim: int = bounded(180, minimum=1, integer=True)  # channels of the Transformer
    depths: list[int] = bounded([6, 6, 6, 6, 6, 6], minimum=1, integer=True)  # blocks per group
    heads: list[int] = bounded([6, 6, 6, 6, 6, 6], minimum=1, integer=True)  # heads per group
    window: int = bounded(8, minimum=2, integer=True)  # window side (shift: half of it)
    mlp_ratio: float = bounded(2.0, minimum=0, above=True)  # MLP hidden channels / embed_dim
    qkv_bias: bool = True  # the q, k, v projection has a bias
    patch_norm: bool = True  # a layer norm after the first conv
    resi_connection: str = bounded("1conv", choices=("1conv", "3conv"))  # conv after groups
    upsampler: str = bounded("pixelshuffle", choices=UPSAMPLERS)  # reconstruction
    img_range: float = bounded(1.0, minimum=0, above=True)  # factor on the mean-free input
    drop_path_rate: float = bounded(0.1, minimum=0, maximum=0.99)  # stochastic depth (training)
    img_size: int = bounded(64, minimum=1, integer=True)  # only the PyTorch mask buffer's size


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why SwinIR (or HAT, of the same keys) cannot be built with these keys, or None."""
    dim, heads, depths = keys["embed_dim"], keys["heads"], keys["depths"]
    if len(heads) != len(depths):
        return f"model.heads {heads} needs one value per residual group (model.depths {depths})"
    if any(dim % h for h in heads):
        return f"model.embed_dim={dim} must be a multiple of every model.heads value ({heads})"
    if keys.get("resi_connection") == "3conv" and dim < 4:
        return f"model.resi_connection=3conv needs model.embed_dim >= 4 (got {dim})"
    if keys["img_size"] <= keys["window"]:
        return (f"model.img_size={keys['img_size']} must exceed model.window={keys['window']} "
                "(the reference then drops the shift and shrinks the window)")  # fmt: skip
    up = keys.get("upsampler", "pixelshuffle")
    if up == "pixelshuffle" and scale not in (2, 3, 4, 8, 16):
        return f"scale {scale}: the pixelshuffle upsampler takes 2^n and 3"
    if up == "nearest+conv" and scale not in (2, 4, 8):
        return f"scale {scale}: the nearest+conv upsampler takes 2, 4 and 8"
    return None


SPEC = register(
    ModelSpec(
        "swinir",
        SwinIRConfig,
        build="sr.models.swinir.net:build",
        layout="sr.models.swinir.layout",
        rules=rules,
        local=False,  # window attention and padding to the window depend on the image size
    )
)
