"""The compute precision of a run (``train.precision``): Keras's global dtype policy, chosen from
the key and the devices the strategy trains on, set before any model is built.

- ``float32``: the default; every variable and every op in float32.
- ``bfloat16``: Keras's ``mixed_bfloat16`` policy: variables (weights, optimizer slots, weight
  averages) in float32, layers compute in bfloat16. bfloat16 keeps float32's exponent range,
  so no loss scaling. Used where the hardware computes it: a TPU; a GPU of compute capability
  8.0 or more (Ampere and later: NVIDIA's bfloat16 tensor cores); a CPU whose flags (Linux's
  ``/proc/cpuinfo``) show ``amx_bf16`` (Intel AMX, Sapphire Rapids and later) or
  ``avx512_bf16`` (Cooper Lake, Zen 4 and later), which TensorFlow's oneDNN kernels use for
  convolutions and matrix products. Elsewhere it falls back to float32 with one warning that
  names what is missing (a CPU without these flags emulates bfloat16, slower than float32);
  where the flags cannot be read (not Linux), bfloat16 is used as asked.
- ``float16``: Keras's ``mixed_float16`` on a GPU, with loss scaling (Keras's
  ``LossScaleOptimizer``, :func:`sr.train.optimizers.make_optimizer`): float16's range is too
  small for the gradients otherwise (Micikevicius et al., "Mixed Precision Training", ICLR
  2018). Without a GPU it falls back to float32 with a warning (a CPU has no fast float16).

Every model's output layer is float32 (``sr.models.layers.float32_output``), and the losses are
computed in float32 on float32 images: the steps cast the SR to float32 before the loss
(:mod:`sr.train.step`, :mod:`sr.train.gan`). Checkpoints hold
float32 variables under every precision, so a run trained in one precision evaluates, resumes
and exports in any other. Sources: the Keras mixed-precision guide
(keras.io/api/mixed_precision/policy); Intel's "Accelerate AI with Intel AMX" (the oneDNN
bfloat16 path of TensorFlow on Xeon).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import keras
import tensorflow as tf

from sr.config import TRAIN_CHOICES

log = logging.getLogger(__name__)

PRECISIONS = TRAIN_CHOICES["precision"]  # float32, bfloat16, float16 (the schema's field)
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # either one: oneDNN runs bfloat16 natively
CPUINFO = Path("/proc/cpuinfo")
MIN_BF16_CAPABILITY = (8, 0)  # NVIDIA Ampere: bfloat16 tensor cores


@dataclass(frozen=True)
class Precision:
    """What a run computes in.

    Attributes:
        asked: ``train.precision``.
        used: the precision in force (``asked``, or ``float32`` after a fallback).
        reason: why ``used`` differs from ``asked`` (empty when it does not).
    """

    asked: str
    used: str
    reason: str = ""

    @property
    def policy(self) -> str:
        """Keras's dtype policy name: ``float32``, ``mixed_bfloat16`` or ``mixed_float16``."""
        return POLICIES[self.used]

    @property
    def loss_scale(self) -> bool:
        """Whether the optimizers scale the loss (float16 only)."""
        return self.used == "float16"


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str] | None:
    """The CPU's feature flags from the first ``flags`` line of Linux's ``/proc/cpuinfo``
    (``avx512_bf16``, ``amx_bf16``, ...); None where the file cannot be read (not Linux)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return None


def device_kind(strategy: tf.distribute.Strategy | None = None) -> str:
    """``TPU``, ``GPU`` or ``CPU``: what the strategy's replicas run on (TensorFlow's default
    strategy: a GPU if one is visible, else the CPU). Replicas on CPUs and GPUs together count
    as ``CPU`` (the slowest decides)."""
    devices: list[str] = []
    if strategy is not None:
        try:
            devices = list(strategy.extended.worker_devices)
        except RuntimeError:  # the default strategy names none: TensorFlow's placement
            devices = []
    if not devices:
        for kind in ("TPU", "GPU"):
            if tf.config.list_logical_devices(kind):
                return kind
        return "CPU"
    kinds = {d.upper().rsplit("DEVICE:", 1)[-1].split(":")[0] for d in devices}
    if "CPU" in kinds or not kinds:
        return "CPU"
    return "TPU" if "TPU" in kinds else "GPU"


def gpu_capabilities() -> list[tuple[int, int]]:
    """The compute capability ``(major, minor)`` of each visible GPU (TensorFlow's
    ``get_device_details``); a GPU that does not report one counts as ``(0, 0)``."""
    found = []
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        found.append(tuple(capability) if capability else (0, 0))
    return found


def choose(
    asked: str,
    kind: str,
    flags: frozenset[str] | None = None,
    capabilities: list[tuple[int, int]] | None = None,
) -> Precision:
    """The precision a run uses for ``train.precision=asked`` on replicas of ``kind``.

    Args:
        asked: one of :data:`PRECISIONS`.
        kind: ``CPU``, ``GPU`` or ``TPU`` (:func:`device_kind`).
        flags: the CPU's flags (:func:`cpu_flags`); None: unknown (not Linux), bfloat16 is
            then used as asked.
        capabilities: the GPUs' compute capabilities (:func:`gpu_capabilities`).

    Returns:
        :class:`Precision`, with the reason for a fallback to float32.

    Raises:
        ValueError: ``asked`` is not one of :data:`PRECISIONS`.
    """
    if asked not in PRECISIONS:
        raise ValueError(f"train.precision must be one of {', '.join(PRECISIONS)}, got {asked!r}")
    if asked == "float16" and kind != "GPU":
        reason = f"float16 is fast on a GPU only, and this run is on a {kind}"
        return Precision(asked, "float32", reason)
    if asked != "bfloat16" or kind == "TPU":
        return Precision(asked, asked)
    if kind == "GPU":
        slow = [c for c in capabilities or [(0, 0)] if tuple(c) < MIN_BF16_CAPABILITY]
        if slow:
            have = ", ".join(f"{a}.{b}" for a, b in slow)
            return Precision(
                asked, "float32",
                f"bfloat16 needs a GPU of compute capability >= 8.0 and this one has {have}; "
                "train.precision=float16 is the fast choice there",
            )  # fmt: skip
        return Precision(asked, asked)
    if flags is None or flags & set(CPU_BF16_FLAGS):
        return Precision(asked, asked)
    return Precision(
        asked, "float32",
        "this CPU has no bfloat16 instructions: neither the avx512_bf16 nor the amx_bf16 flag "
        f"is in {CPUINFO}",
    )  # fmt: skip


def setup_precision(asked: str, strategy: tf.distribute.Strategy | None = None) -> Precision:
    """Set Keras's global dtype policy for ``train.precision=asked`` before any model is built
    (:func:`choose` on the strategy's devices); logs the precision in force, and one warning
    for a fallback to float32.

    Returns:
        The :class:`Precision` in force (``loss_scale``: the optimizers scale the loss).

    Raises:
        ValueError: ``asked`` is not one of :data:`PRECISIONS`.
    """
    kind = device_kind(strategy)
    flags = cpu_flags() if kind == "CPU" and asked == "bfloat16" else None
    capabilities = gpu_capabilities() if kind == "GPU" else None
    precision = choose(asked, kind, flags, capabilities)
    keras.mixed_precision.set_global_policy(precision.policy)
    if precision.reason:
        log.warning("train.precision=%s: %s; training in float32", asked, precision.reason)
    elif precision.used != "float32":
        log.info(
            "train.precision=%s on the %s: Keras policy %s (variables float32)%s",
            asked, kind, precision.policy, ", loss scaling" if precision.loss_scale else "",
        )  # fmt: skip
    return precision
