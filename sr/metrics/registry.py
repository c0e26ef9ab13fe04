"""The registry of metrics, by name, without TensorFlow.

Each metric is declared once, in the module that computes it, by a top-level
``register(MetricSpec(...))``: its name, its function, whether it needs the HR (full-reference)
or scores the SR alone (no-reference, as NIQE), its direction (``"max"``: higher is better, as
PSNR; ``"min"``: lower is better, as NIQE; the words of ``sr.train.best.BestRule``), its unit
and what it reads:

- ``"y"``: the float64 Y ``[H, W]`` on 0..255 (BT.601 as MATLAB ``rgb2ycbcr``, unrounded);
- ``"rgb"``: the 8-bit image ``[H, W, C]`` (float64 on the 8-bit grid); only an RGB output has
  one, so a Y model reports no such metric;
- ``"output"``: the 8-bit image as written (RGB for an RGB model, the rounded Y of a Y model).

The function is called ``fn(sr, hr, scale)`` (full-reference) or ``fn(sr, scale)``
(no-reference) and returns a float; ``scale`` is the border the protocol crops. The metrics of
``sr.metrics`` are registered when :mod:`sr.metrics` is imported; a metric in a module outside
``sr`` registers by being imported (``--metrics`` of ``scripts/evaluate.py`` then names it)::

    from sr.metrics.registry import MetricSpec, register
    register(MetricSpec("mae", lambda sr, hr, scale: float(abs(sr - hr).mean()), unit="levels",
                        direction="min", reads="y"))
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

READS = ("y", "rgb", "output")
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: ``name`` (a key of results, lower-case, not ending in ``_bicubic``), ``fn``
    (see the module docstring), ``reference`` (True: needs the HR), ``direction`` (``"max"`` or
    ``"min"``), ``unit`` (``"dB"``, ``""``...), ``reads`` (one of :data:`READS`) and ``title``
    (its column in the markdown table; the name by default)."""

    name: str
    fn: Callable[..., float]
    reference: bool = True
    direction: str = "max"
    unit: str = ""
    reads: str = "y"
    title: str = ""

    def __post_init__(self):
        if not _NAME.fullmatch(self.name) or self.name.endswith("_bicubic"):
            raise ValueError(
                f"metric name {self.name!r}: use lower-case letters, digits and '_', not ending "
                "in '_bicubic' (bicubic's figure gets that suffix)"
            )
        if self.direction not in ("max", "min"):
            raise ValueError(f"metric {self.name}: direction {self.direction!r}, use max or min")
        if self.reads not in READS:
            raise ValueError(f"metric {self.name}: reads {self.reads!r}, use one of {READS}")

    def __call__(self, sr, hr, scale: int) -> float:
        """The figure of ``sr`` (against ``hr`` if full-reference; ``hr`` is then ignored)."""
        return float(self.fn(sr, hr, scale) if self.reference else self.fn(sr, scale))


_SPECS: dict[str, MetricSpec] = {}


def register(spec: MetricSpec) -> MetricSpec:
    """Add ``spec`` under its name and return it. Registering a name again with another function
    is refused (a module imported twice registers the same function: no error)."""
    old = _SPECS.get(spec.name)
    if old is not None and old.fn is not spec.fn:
        raise ValueError(f"metric {spec.name!r} is already registered (by {old.fn.__module__})")
    _SPECS[spec.name] = spec
    return spec


def names() -> tuple[str, ...]:
    """The registered metrics' names, in order of registration."""
    import sr.metrics  # noqa: F401  (registers the project's metrics)

    return tuple(_SPECS)


def get(name: str) -> MetricSpec:
    """The metric registered as ``name``.

    Raises:
        KeyError: for an unknown name, listing the registered ones.
    """
    known = names()
    if name not in _SPECS:
        raise KeyError(
            f"unknown metric {name!r}: registered metrics are {', '.join(known)} (a metric of "
            "your own: import its module, which calls sr.metrics.registry.register)"
        )
    return _SPECS[name]
