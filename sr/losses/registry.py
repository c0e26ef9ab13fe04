"""The registry of loss terms (``loss.terms.<name>``), by name, without TensorFlow.

Each term is one module of ``sr.losses`` that declares, importing no TensorFlow, its name, its
schema (a :class:`TermConfig` dataclass: the only place its keys' defaults and bounds are
written) and its class (TensorFlow is imported when the term computes):

    SPEC = register(TermSpec("l1", L1Config, L1, kind="pixel"))

Every module of ``sr.losses`` with such a top-level ``SPEC = register(...)`` is found by
:func:`specs` (no list to edit); a module outside ``sr`` registers by being imported
(``plugins=[my.package]``). The ``loss`` group holds ``terms``, term name to its settings
(``conf/loss/<preset>.yaml`` writes only what differs from the schemas); :func:`term_settings`
turns them into schema instances, the one place the defaults are applied.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import pkgutil
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sr.core.errors import ConfigError
from sr.core.schema import bounded, check_node

TARGETS = ("gt_usm", "gt")
"""What a term compares the SR with: ``gt_usm``, the target of the pairs (the HR sharpened by
unsharp masking with ``degradation.gt_usm``, the HR as it is otherwise), or ``gt``, the HR as it
is (Real-ESRGAN's ``*_gt_usm: false``)."""
KINDS = ("pixel", "feature", "adversarial")


@dataclass
class TermConfig:
    """Keys of every loss term: its weight in the generator's loss and the image it compares
    with."""

    # the term's weight in the sum the generator minimises (0: computed and logged, not trained)
    weight: float = bounded(1.0, minimum=0)
    # the image it compares the SR with: gt_usm, the pairs' target (the HR sharpened with
    # degradation.gt_usm, else the HR), or gt, the HR as it is
    target: str = bounded("gt_usm", choices=TARGETS)


@dataclass(frozen=True)
class TermSpec:
    """One loss term, as its module declares it.

    Attributes:
        name: the registered name (``loss.terms.<name>``), lowercase.
        schema: its :class:`TermConfig` dataclass.
        term: its class, ``term(settings)`` with ``settings`` a schema instance
            (:class:`sr.losses.base.Term`).
        kind: ``pixel`` (a distance of the pixels: what the divergence guard watches),
            ``feature`` (of a network's features: trades PSNR for texture, so the best
            checkpoint is chosen by NIQE) or ``adversarial`` (needs a discriminator).
    """

    name: str
    schema: type
    term: type
    kind: str = "pixel"


_SPECS: dict[str, TermSpec] = {}
_SCANNED = False


def register(spec: TermSpec) -> TermSpec:
    """Add ``spec`` (idempotent for the same spec) and return it.

    Raises:
        ValueError: another term has the name, the schema is not a :class:`TermConfig`
            dataclass, or the kind is not one of :data:`KINDS`.
    """
    if not (dataclasses.is_dataclass(spec.schema) and issubclass(spec.schema, TermConfig)):
        raise ValueError(f"loss term {spec.name!r}: its schema must be a TermConfig dataclass")
    if spec.kind not in KINDS:
        raise ValueError(f"loss term {spec.name!r}: kind must be one of {', '.join(KINDS)}")
    known = _SPECS.get(spec.name)
    if known is not None and known.term is not spec.term:
        raise ValueError(
            f"two loss terms are registered as {spec.name!r}: {known.term.__module__} and "
            f"{spec.term.__module__}; rename one"
        )
    _SPECS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove the term registered as ``name`` (a test's own), if any."""
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
    """Import every module of ``sr.losses`` that declares a term, once."""
    global _SCANNED
    if _SCANNED:
        return
    import sr.losses

    for info in pkgutil.iter_modules(sr.losses.__path__):
        path = Path(sr.losses.__path__[0]) / f"{info.name}.py"
        if not info.ispkg and path.is_file() and _declares(path):
            importlib.import_module(f"sr.losses.{info.name}")
    _SCANNED = True


def specs() -> list[TermSpec]:
    """Every registered term (the package's and those of imported modules), by name."""
    _scan()
    return [_SPECS[name] for name in sorted(_SPECS)]


def names() -> list[str]:
    """The registered names, sorted."""
    return [s.name for s in specs()]


def get(name: str) -> TermSpec:
    """The term registered as ``name``.

    Raises:
        ConfigError: no such term (naming the registered ones).
    """
    _scan()
    if name not in _SPECS:
        raise ConfigError(
            f"loss.terms.{name}: no loss term is named {name!r}; the terms are "
            f"{', '.join(names())} (docs/config.md, 'Loss'; a term of one's own: "
            "docs/architecture.md, 'Add a loss term')"
        )
    return _SPECS[name]


@functools.cache
def hints(schema: type) -> dict:
    """The resolved type of each field of a term's schema."""
    return typing.get_type_hints(schema)


def _type_error(value, hint) -> str | None:
    """Why ``value`` is not of the field type ``hint`` (``bool``, ``int``, ``float``, ``str``,
    ``list[float]``, optionally ``| None``), or None."""
    args = typing.get_args(hint)
    if value is None:
        return None if type(None) in args else "a value, not null"
    if type(None) in args:
        hint = next(a for a in args if a is not type(None))
    base = typing.get_origin(hint) or hint
    if base is bool:
        return None if isinstance(value, bool) else "true or false"
    if base is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if base is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else "a number"
    if base is str:
        return None if isinstance(value, str) else "a string"
    if base is list:
        return None if isinstance(value, list) else "a list"
    return None


def term_settings(terms: Mapping | None) -> dict[str, TermConfig]:
    """The settings of each term of ``loss.terms`` (term name to its keys, plain values), as
    instances of its schema with the defaults of the keys not given, in the given order.

    Raises:
        ConfigError: no term; an unknown term (naming the known ones); a key the term does not
            take (naming its keys); a value out of bounds (naming the key and the bound).
    """
    if not terms:
        raise ConfigError(
            "loss.terms is empty: name at least one term, e.g. loss=l1 or "
            f"+loss.terms.l1.weight=1 (terms: {', '.join(names())})"
        )
    out = {}
    for name, keys in terms.items():
        spec = get(str(name))
        keys = dict(keys or {})
        fields = {f.name for f in dataclasses.fields(spec.schema)}
        unknown = sorted(set(keys) - fields)
        if unknown:
            raise ConfigError(
                f"loss.terms.{name}.{unknown[0]} is not a key of the {name} term: remove it "
                f"(its keys: {', '.join(sorted(fields))})"
            )
        for key, value in keys.items():  # the terms node is untyped: OmegaConf checks no type
            why = _type_error(value, hints(spec.schema)[key])
            if why:
                raise ConfigError(f"loss.terms.{name}.{key} must be {why}, got {value!r}")
        check_node(keys, spec.schema, f"loss.terms.{name}")
        out[str(name)] = spec.schema(**keys)
    adversarial = [n for n, s in out.items() if get(n).kind == "adversarial"]
    if len(adversarial) > 1:
        raise ConfigError(
            f"loss.terms: {' and '.join(adversarial)} are both adversarial terms; keep one"
        )
    return out


def full_terms(terms: Mapping | None) -> dict[str, dict]:
    """``loss.terms`` with every key of each term (its defaults filled in), plain values: what
    two configs are compared by (a resume)."""
    return {name: dataclasses.asdict(s) for name, s in term_settings(terms).items()}
