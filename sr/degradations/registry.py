"""The registry of degradations (the ``degradation`` group), by name, without TensorFlow.

Each degradation is one module of ``sr.degradations`` that declares, importing no TensorFlow, its
name, its config schema (the only place its keys' defaults and bounds are written), the class
that implements :class:`sr.degradations.protocol.Degradation` (by its import path, imported on
first use) and the check of its keys that needs no TensorFlow:

    SPEC = register(DegradationSpec("bicubic", "sr.degradations.Bicubic", DegradationConfig))

Every module of ``sr.degradations`` with such a top-level ``SPEC = register(...)`` is found by
:func:`specs` (no list to edit); a module outside ``sr`` registers by being imported.
``conf/degradation/<name>.yaml`` names the class (``_target_``) and the schema
(``defaults: [base_<name>]``, which ``sr.config`` stores for every registered degradation).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omegaconf import MISSING

from sr.core.errors import ConfigError


@dataclass
class DegradationConfig:
    """Keys of every option of the ``degradation`` group (``degradation=bicubic`` has no other)."""

    _target_: str = MISSING


def no_keys(name: str) -> Callable[[dict], None]:
    """The check of a degradation that takes no keys: any key is refused, naming it."""

    def check(keys: dict) -> None:
        if keys:
            raise ConfigError(
                f"degradation.{sorted(keys)[0]} is not a key of degradation={name}, which takes "
                "none: remove it"
            )

    return check


@dataclass(frozen=True)
class DegradationSpec:
    """One degradation, as its module declares it.

    Attributes:
        name: the registered name (``degradation=<name>``), lowercase.
        target: the import path of its class (the ``_target_`` of its YAML), which implements
            :class:`sr.degradations.protocol.Degradation` and takes the schema's keys.
        schema: a :class:`DegradationConfig` dataclass of its keys (``sr.core.schema.bounded``
            bounds), stored as ``base_<name>``.
        check: ``check(keys)`` of its keys (a dict of plain values, ``_target_`` left out)
            without TensorFlow, raising :class:`ConfigError` naming the key; None: the
            schema's bounds (:func:`sr.core.schema.check_node`).
        protocol_lr: the class's ``protocol_lr`` (``sr.degradations.protocol.Degradation``): its
            LR is the protocol's own bicubic, so the data sources make Y pairs themselves; the
            class reads it from here.
        geometry: ``geometry(keys, scale) -> (margin, least_crop, pool_size)``, what its class's
            ``crop_margin(scale)``, ``least_crop(scale)`` and ``pool_size`` give for these keys
            (plain values, defaults left out), computed without TensorFlow, for the rules on the
            data keys at config time (``sr.data.schemas.degradation_rules``); None: bicubic's
            (the operator's margin, any crop, no pool), which no data key can break.
        legacy_targets: the ``_target_`` of runs saved before a rename.
    """

    name: str
    target: str
    schema: type = DegradationConfig
    check: Callable[[dict], None] | None = None
    protocol_lr: bool = False
    geometry: Callable[[dict, int], tuple[int, int, int]] | None = None
    legacy_targets: tuple[str, ...] = ()

    def check_keys(self, keys: dict) -> None:
        """:attr:`check` of ``keys``, or the schema's bounds and keys.

        Raises:
            ConfigError: for a key the schema does not have or a value out of its bounds.
        """
        if self.check is not None:
            return self.check(keys)
        from sr.core.schema import check_node

        fields = {f.name for f in dataclasses.fields(self.schema)} - {"_target_"}
        if not fields:
            return no_keys(self.name)(keys)
        unknown = sorted(set(keys) - fields)
        if unknown:
            raise ConfigError(
                f"degradation.{unknown[0]} is not a key of degradation={self.name}: remove it "
                f"(keys: {', '.join(sorted(fields))})"
            )
        check_node(keys, self.schema, "degradation")


_SPECS: dict[str, DegradationSpec] = {}
_SCANNED = False


def register(spec: DegradationSpec) -> DegradationSpec:
    """Add ``spec`` (idempotent for the same spec) and return it.

    Raises:
        ValueError: another degradation has the name, or the schema is not a
            :class:`DegradationConfig` dataclass.
    """
    if not (dataclasses.is_dataclass(spec.schema) and issubclass(spec.schema, DegradationConfig)):
        raise ValueError(f"degradation {spec.name!r}: its schema must be a DegradationConfig")
    known = _SPECS.get(spec.name)
    if known is not None and known.target != spec.target:
        raise ValueError(
            f"two degradations are registered as {spec.name!r}: {known.target} and "
            f"{spec.target}; rename one"
        )
    _SPECS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove the degradation registered as ``name`` (a test's own), if any."""
    _SPECS.pop(name, None)


def _declares(path: Path) -> bool:
    """Whether a module's source assigns ``SPEC = register(...)`` at its top level."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SPEC" for t in node.targets
        ):
            call = node.value
            return isinstance(call, ast.Call) and getattr(call.func, "id", "") == "register"
    return False


def _scan() -> None:
    """Import every module of ``sr.degradations`` that declares a degradation, once (the others,
    which import TensorFlow, are not imported)."""
    global _SCANNED
    if _SCANNED:
        return
    import sr.degradations

    for info in pkgutil.iter_modules(sr.degradations.__path__):
        path = Path(sr.degradations.__path__[0]) / f"{info.name}.py"
        if not info.ispkg and path.is_file() and _declares(path):
            importlib.import_module(f"sr.degradations.{info.name}")
    _SCANNED = True


def specs() -> list[DegradationSpec]:
    """Every registered degradation (the package's and those of imported modules), by name."""
    _scan()
    return [_SPECS[name] for name in sorted(_SPECS)]


def names() -> list[str]:
    """The registered names, sorted."""
    return [s.name for s in specs()]


def get(name: str) -> DegradationSpec:
    """The degradation registered as ``name``.

    Raises:
        ConfigError: no such degradation (naming the registered ones).
    """
    _scan()
    if name not in _SPECS:
        raise ConfigError(
            f"unknown degradation {name!r}: choose one of {', '.join(names())} "
            "(docs/architecture.md, 'Add a degradation')"
        )
    return _SPECS[name]


def spec_of(target: str | None) -> DegradationSpec | None:
    """The degradation whose class is ``target`` (a config's ``degradation._target_``, or one of
    its ``legacy_targets``), or None for a class of one's own."""
    return next((s for s in specs() if target in (s.target, *s.legacy_targets)), None)


def build(node=None):
    """The degradation a ``degradation`` config node configures: its ``_target_`` instantiated
    with its keys (Hydra; TensorFlow is imported with the class), bicubic for None (a run saved
    before the group existed).

    Raises:
        ConfigError: for a bad ``degradation.*`` key or value, naming it.
    """
    import hydra
    from hydra.errors import InstantiationException

    if node is None:
        return hydra.utils.get_class(get("bicubic").target)()
    try:
        return hydra.utils.instantiate(node, _convert_="all")
    except InstantiationException as e:
        if isinstance(e.__cause__, ValueError):
            raise ConfigError(str(e.__cause__)) from e
        raise


def check(node: dict | None) -> None:
    """Check a ``degradation`` node (plain values, ``_target_`` included) without TensorFlow: a
    registered degradation's keys by its declared check (:meth:`DegradationSpec.check_keys`);
    a class of one's own is built (:func:`build`), which checks its own.

    Raises:
        ConfigError: naming the key and the fix.
    """
    keys = dict(node or {})
    target = keys.pop("_target_", None)
    spec = spec_of(target)
    if spec is not None:
        spec.check_keys(keys)
    elif keys or target is not None:
        build(node)
