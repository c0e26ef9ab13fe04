"""DAT (Z. Chen, Y. Zhang, J. Gu, L. Kong, X. Yang and F. Yu, "Dual Aggregation Transformer for
Image Super-Resolution", ICCV 2023; github.com/zhengchen1999/DAT ``basicsr/archs/dat_arch.py``,
as spandrel copies it in ``spandrel/architectures/DAT/__arch/DAT.py``): the architecture's
schema and registration; the network is :mod:`sr.models.dat.net`, the official state-dict
layout :mod:`sr.models.dat.layout`. Presets: ``conf/model/dat.yaml`` (DAT, 14,802,051
parameters at x4 RGB), ``dat_s.yaml`` (DAT-S), ``dat_light.yaml`` (DAT-light, 572,766),
``dat_tiny.yaml`` (CPU tests)."""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.models.registry import ModelConfig, ModelSpec, register


def _split(value) -> str | None:
    a, b = (int(v) for v in value)
    if max(a, b) % min(a, b):
        return f"{list(value)}: the larger window side must be a multiple of the smaller"
    return None


@dataclass
class DATConfig(ModelConfig):
    """Keys of ``model=dat`` (its presets: conf/model/dat*.yaml)."""

    embed_dim: int = bounded(180, minimum=32, integer=True)  # channels of the Transformer
    depths: list[int] = bounded([6, 6, 6, 6, 6, 6], minimum=1, integer=True)  # blocks per group
    heads: list[int] = bounded([6, 6, 6, 6, 6, 6], minimum=2, integer=True)  # heads per group
    # the rectangle windows' sides (short, long) of the spatial attention
    split: list[int] = bounded([8, 32], minimum=1, integer=True, length=2, check=_split)
    expansion: float = bounded(4.0, minimum=0, above=True)  # feed-forward hidden / embed_dim
    qkv_bias: bool = True  # the q, k, v projection has a bias
    resi_connection: str = bounded("1conv", choices=("1conv", "3conv"))  # conv after groups
    upsampler: str = bounded("pixelshuffle", choices=("pixelshuffle", "pixelshuffledirect"))
    img_range: float = bounded(1.0, minimum=0, above=True)  # factor on the mean-free input
    drop_path_rate: float = bounded(0.1, minimum=0, maximum=0.99)  # stochastic depth (training)
    img_size: int = bounded(64, minimum=1, integer=True)  # only the PyTorch mask buffers' size


def rules(keys: dict, scale: int, channels: int) -> str | None:
    """Why DAT cannot be built with these keys, or None."""
    dim, heads, depths = keys["embed_dim"], keys["heads"], keys["depths"]
    if len(heads) != len(depths):
        return f"model.heads {heads} needs one value per residual group (model.depths {depths})"
    bad = [h for h in heads if (dim // 2) % (h // 2) or h % 2 or dim % h]
    if bad:
        return (f"model.embed_dim={dim} must be a multiple of every model.heads value, and half "
                f"of it of half of each, which must be even (found {heads})")  # fmt: skip
    if keys["upsampler"] == "pixelshuffle" and scale not in (2, 3, 4, 8):
        return f"scale {scale}: DAT's pixelshuffle upsampler takes 2^n and 3"
    return None


SPEC = register(
    ModelSpec(
        "dat",
        DATConfig,
        build="sr.models.dat.net:build",
        layout="sr.models.dat.layout",
        rules=rules,
        local=False,  # channel attention over the whole image
    )
)
