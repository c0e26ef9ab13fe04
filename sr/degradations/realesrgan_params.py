"""The keys of ``degradation=realesrgan``, their defaults and bounds, importing no TensorFlow:
:class:`Params` (the random degradation's, named and valued as in Real-ESRGAN's
``options/train_realesrnet_x4plus.yml``: X. Wang et al., ICCV-W 2021,
github.com/xinntao/Real-ESRGAN) and :class:`Options` (how it runs), the config schema's fields
(:func:`schema_fields`, :data:`RealESRGANConfig`) and their one check (:func:`check_keys`): the
degradation's declaration in the registry (:data:`SPEC`, ``sr.degradations.registry``).

``sr.config`` checks a command line with them before anything imports TensorFlow; the
degradation itself (``sr.degradations.realesrgan.RealESRGAN``, TensorFlow ops) takes the same keys
and runs the same check.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields

from sr.core.errors import ConfigError
from sr.core.schema import bounded, check_node
from sr.degradations.registry import DegradationConfig, DegradationSpec, register

TARGET = "sr.degradations.realesrgan.RealESRGAN"
"""The ``_target_`` of ``conf/degradation/realesrgan.yaml``: the class that takes these keys."""

KERNEL_SIZE = 21
"""Side of every blur and sinc kernel (pixels): smaller kernels (7..19) are zero-padded to it."""

KERNEL_TYPES = (
    "iso",
    "aniso",
    "generalized_iso",
    "generalized_aniso",
    "plateau_iso",
    "plateau_aniso",
)
"""The blur kernel families of ``kernel_prob`` (in this order)."""


DEVICES = ("input", "accelerator")
"""``degradation.device``: where the LR is made (the tf.data pipeline, or the training step)."""

JPEGS = ("auto", "libjpeg", "tensorflow")
"""``degradation.jpeg``: libjpeg per image (exact, CPU), the batched JPEG in TensorFlow ops
(``sr.degradations.jpeg``, any device), or auto: libjpeg on ``input``, TensorFlow on
``accelerator``."""

MIN_SIDE = KERNEL_SIZE // 2 + 1
"""Smallest side (pixels) a resize may produce: reflect padding needs more pixels than it adds."""

USM_PAD = 26
"""The reflect padding of USM's 51-pixel kernel (``sr.degradations.usm``): the least crop side
with ``gt_usm``."""

BICUBIC_REACH = 2
"""HR pixels per unit of scale of the LR operator's reach (``sr.core.degrade.crop_margin``: 2 s),
the margin when ``degradation.margin`` is null."""


def crop_margin(margin: int | None, scale: int) -> int:
    """HR pixels degraded around each patch: ``degradation.margin``, or with null the LR
    operator's ``sr.core.degrade.crop_margin`` (2 x scale, 8 at x4)."""
    return BICUBIC_REACH * scale if margin is None else margin


def least_crop(gt_usm: bool, scale: int) -> int:
    """The smallest HR crop side (pixels) degraded at ``scale``: LR sides of :data:`MIN_SIDE`,
    and with ``gt_usm`` the reflect padding of USM's kernel (:data:`USM_PAD`)."""
    return max(scale * MIN_SIDE, USM_PAD if gt_usm else 0)


def geometry(keys: dict, scale: int) -> tuple[int, int, int]:
    """``(margin, least crop, pool size)`` of ``degradation=realesrgan``'s keys at ``scale``
    (the registry's ``geometry``: what ``RealESRGAN`` gives, without TensorFlow)."""
    options = {f.name: f.default for f in fields(Options)} | dict(keys)
    margin = crop_margin(options["margin"], scale)
    return margin, least_crop(bool(options["gt_usm"]), scale), int(options["pool_size"] or 0)


def _pair(value) -> str | None:
    """Why ``value`` is not ``[low, high]`` with low <= high, or None."""
    if len(value) != 2 or not value[0] <= value[1]:
        return "must be [low, high] with low <= high"
    return None


def _positive_range(value) -> str | None:
    """A ``[low, high]`` range with low > 0 (sigmas, resize factors)."""
    return _pair(value) or (None if value[0] > 0 else "must have its low end > 0")


def _nonnegative_range(value) -> str | None:
    """A ``[low, high]`` range with low >= 0 (noise)."""
    return _pair(value) or (None if value[0] >= 0 else "must have its low end >= 0")


def _jpeg_range(value) -> str | None:
    """A ``[low, high]`` range of JPEG qualities in 1..100."""
    if _pair(value) or not 1 <= value[0] <= value[1] <= 100:
        return "must be [low, high] JPEG qualities in 1..100"
    return None


def _shape_range(value) -> str | None:
    """A ``[low, high]`` range of generalized Gaussian or plateau shapes, around 1."""
    if _pair(value) or not 0 < value[0] <= 1 <= value[1]:
        return "must be [low, high] with 0 < low <= 1 <= high (half the draws each side of 1)"
    return None


def _probabilities(count: int):
    def check(value) -> str | None:
        if len(value) != count or min(value) < 0 or abs(sum(value) - 1) > 1e-6:
            return f"must be {count} probabilities >= 0 that sum to 1"
        return None

    return check


_kernel_probs = _probabilities(len(KERNEL_TYPES))
_resize_probs = _probabilities(3)  # up, down, keep


def _probability(value) -> str | None:
    """A probability in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        return "must be a probability in [0, 1]"
    return None


def _kernel_sizes(value) -> str | None:
    """Odd kernel sides in 3..KERNEL_SIZE."""
    if not value or any(k % 2 == 0 or not 3 <= k <= KERNEL_SIZE for k in value):
        return f"must be odd sizes in 3..{KERNEL_SIZE}"
    return None


@dataclass(frozen=True)
class Params:
    """The parameters of :class:`sr.degradations.realesrgan.RealESRGAN`, named as in
    Real-ESRGAN's configuration (the second stage's with the suffix ``2``). Defaults:
    ``options/train_realesrnet_x4plus.yml``.

    Probabilities are in [0, 1]; ``*_prob`` triples (up, down, keep) and ``kernel_prob`` (one
    per :data:`KERNEL_TYPES`) sum to 1; ranges are ``(low, high)`` with low <= high; sigmas in
    pixels, noise sigma on the [0, 255] scale, JPEG quality in 1..100.
    """

    # blur kernel sides (odd, <= 21), drawn uniformly
    kernel_sizes: tuple = bounded((7, 9, 11, 13, 15, 17, 19, 21), check=_kernel_sizes)
    # first blur's family: iso, aniso, generalized iso, aniso, plateau iso, aniso
    kernel_prob: tuple = bounded((0.45, 0.25, 0.12, 0.03, 0.12, 0.03), check=_kernel_probs)
    # first blur: a sinc kernel instead
    sinc_prob: float = bounded(0.1, check=_probability)
    # first blur's Gaussian sigmas (pixels)
    blur_sigma: tuple = bounded((0.2, 3.0), check=_positive_range)
    # generalized Gaussian shape beta
    betag_range: tuple = bounded((0.5, 4.0), check=_shape_range)
    # plateau shape beta
    betap_range: tuple = bounded((1.0, 2.0), check=_shape_range)
    # first resize: up, down, keep
    resize_prob: tuple = bounded((0.2, 0.7, 0.1), check=_resize_probs)
    # first resize factor
    resize_range: tuple = bounded((0.15, 1.5), check=_positive_range)
    # first noise: Gaussian, else Poisson
    gaussian_noise_prob: float = bounded(0.5, check=_probability)
    # Gaussian noise sigma on 0..255
    noise_range: tuple = bounded((1.0, 30.0), check=_nonnegative_range)
    # Poisson noise scale
    poisson_scale_range: tuple = bounded((0.05, 3.0), check=_nonnegative_range)
    # one noise plane for all channels
    gray_noise_prob: float = bounded(0.4, check=_probability)
    # first JPEG quality
    jpeg_range: tuple = bounded((30.0, 95.0), check=_jpeg_range)
    # the second stage blurs with this probability
    second_blur_prob: float = bounded(0.8, check=_probability)
    # second stage: blur's family, as kernel_prob
    kernel_prob2: tuple = bounded((0.45, 0.25, 0.12, 0.03, 0.12, 0.03), check=_kernel_probs)
    # second stage: a sinc kernel instead
    sinc_prob2: float = bounded(0.1, check=_probability)
    # second stage: Gaussian sigmas (pixels)
    blur_sigma2: tuple = bounded((0.2, 1.5), check=_positive_range)
    # second stage: generalized Gaussian shape beta
    betag_range2: tuple = bounded((0.5, 4.0), check=_shape_range)
    # second stage: plateau shape beta
    betap_range2: tuple = bounded((1.0, 2.0), check=_shape_range)
    # second resize: up, down, keep
    resize_prob2: tuple = bounded((0.3, 0.4, 0.3), check=_resize_probs)
    # second resize factor
    resize_range2: tuple = bounded((0.3, 1.2), check=_positive_range)
    # second noise: Gaussian, else Poisson
    gaussian_noise_prob2: float = bounded(0.5, check=_probability)
    # second stage: Gaussian noise sigma on 0..255
    noise_range2: tuple = bounded((1.0, 25.0), check=_nonnegative_range)
    # second stage: Poisson noise scale
    poisson_scale_range2: tuple = bounded((0.05, 2.5), check=_nonnegative_range)
    # second stage: one noise plane for all channels
    gray_noise_prob2: float = bounded(0.4, check=_probability)
    # second JPEG quality
    jpeg_range2: tuple = bounded((30.0, 95.0), check=_jpeg_range)
    # the final sinc filter, else none
    final_sinc_prob: float = bounded(0.8, check=_probability)

    def stage(self, n: int) -> dict:
        """The keys of stage ``n`` (1 or 2) without their suffix: ``{"kernel_prob": ..., ...}``."""
        suffix = "" if n == 1 else "2"
        names = [f.name for f in fields(self)]
        return {k[: len(k) - len(suffix)]: getattr(self, k) for k in names if k.endswith(suffix)}


@dataclass(frozen=True)
class Options:
    """How :class:`sr.degradations.realesrgan.RealESRGAN` runs, beside its :class:`Params`."""

    gt_usm: bool = bounded(
        True, choices=(True, False)
    )  # the HR is USM-sharpened (BasicSR USMSharp), and the LR made from it
    # where the LR is made: in the tf.data pipeline, or in the training step on the model's device
    device: str = bounded("input", choices=DEVICES)
    # the JPEG coder: libjpeg per image (CPU), the batched TensorFlow JPEG (sr.degradations.jpeg,
    # any device, libjpeg's pixels), auto: libjpeg on input, TensorFlow on accelerator
    jpeg: str = bounded("auto", choices=JPEGS)
    # HR pixels degraded around each patch and cut away after (a multiple of data.scale); null:
    # the LR operator's 2 x scale (8 at x4); the paper's recipes: 36 (docs/data.md)
    margin: int | None = bounded(None, minimum=0, integer=True)
    # the training-pair pool (Real-ESRGAN's queue_size): degraded pairs shuffled through a pool
    # of this many, so that a batch mixes several batches' draws (sr.data.pair_pool); 0: none
    pool_size: int = bounded(0, minimum=0, integer=True)


def schema_fields() -> list[tuple]:
    """The keys of ``degradation=realesrgan`` for its config schema (``sr.config``), the fields of
    :class:`Params` and :class:`Options` typed: a tuple default as a list of integers or of
    numbers, a number as a float, flags and choices as themselves (``degradation.kernel_sizes=7``
    is then refused naming the key when the config composes)."""
    out = []
    for f in (*fields(Params), *fields(Options)):
        if f.type in ("int", "int | None"):  # counts and pixels
            kind = int if f.type == "int" else int | None
            out.append((f.name, kind, field(default=f.default, metadata=f.metadata)))
        elif isinstance(f.default, bool | str):
            out.append((f.name, type(f.default), field(default=f.default, metadata=f.metadata)))
        elif isinstance(f.default, tuple):
            kind = list[int] if all(isinstance(v, int) for v in f.default) else list[float]
            out.append(
                (
                    f.name,
                    kind,
                    field(default_factory=lambda d=f.default: list(d), metadata=f.metadata),
                )
            )
        else:
            out.append((f.name, float, field(default=f.default, metadata=f.metadata)))
    return out


def check_keys(params: dict) -> None:
    """Check the keys of ``degradation=realesrgan`` (as ``hydra.utils.instantiate`` passes them,
    lists for tuples): each a field of :class:`Params` or :class:`Options`, within the bounds
    declared beside it.

    Raises:
        ConfigError: for an unknown key (listing the keys) or a value out of range, naming
            ``degradation.<key>`` and what it must be.
    """
    known = {f.name for f in fields(Params)} | {f.name for f in fields(Options)}
    unknown = set(params) - known
    if unknown:
        raise ConfigError(
            f"degradation.{sorted(unknown)[0]} is not a key of degradation=realesrgan: "
            f"remove it (keys: {', '.join(sorted(known))})"
        )
    for schema in (Options, Params):  # the bounds declared beside each field
        check_node(params, schema, "degradation")


# ``degradation=realesrgan``: its keys, typed (:func:`schema_fields`), and bounds
RealESRGANConfig = dataclasses.make_dataclass(
    "RealESRGANConfig", schema_fields(), bases=(DegradationConfig,)
)

SPEC = register(
    DegradationSpec("realesrgan", TARGET, RealESRGANConfig, check=check_keys, geometry=geometry)
)
"""``degradation=realesrgan``, declared without TensorFlow: its class
(``sr.degradations.realesrgan.RealESRGAN``, TensorFlow ops), schema and check."""
