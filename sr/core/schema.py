"""Bounds of a config schema's fields, declared beside the field, and the one check of a config
node against them.

A schema is a dataclass (registered with Hydra's ConfigStore by ``sr.config``): its type
annotations are checked by OmegaConf when the config composes (``model.blocks=abc``, a number
where a list is expected); the bounds declared here with :func:`bounded` are checked by
:func:`check_node` at start-up, before any data or model work, each refusal a
:class:`ConfigError` naming the key, the bound and the value given.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from collections.abc import Callable
from typing import Any

from sr.core.errors import ConfigError


def bounded(
    default: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: bool = False,
    integer: bool = False,
    choices: tuple | None = None,
    length: int | None = None,
    check: Callable[[Any], str | None] | None = None,
):
    """A dataclass field with its allowed values, read by :func:`check_node`.

    Args:
        default: the default (a list is copied for each instance; a tuple, immutable, is not).
        minimum: the least value (``>=``; ``>`` with ``above``); for a list, of each item.
        maximum: the greatest value (``<=``); for a list, of each item.
        integer: the value (each item) must be an integer.
        choices: the allowed values, for a string key.
        length: for a list, its exact length.
        check: a function of the value returning why it is refused, or None.
    A ``None`` value is accepted where the default is ``None`` (the key's "off").
    """
    meta = {
        "minimum": minimum, "maximum": maximum, "above": above, "integer": integer,
        "choices": choices, "length": length, "check": check, "nullable": default is None,
    }  # fmt: skip
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _number_error(value, meta: dict) -> str | None:
    """Why ``value`` is not a number within ``meta``'s bounds, or None."""
    kind = "an integer" if meta["integer"] else "a number"
    if isinstance(value, bool) or not isinstance(value, int if meta["integer"] else (int, float)):
        return f"must be {kind}"
    if not math.isfinite(value):
        return f"must be a finite {kind.split()[-1]}"
    low, high = meta["minimum"], meta["maximum"]
    if low is not None and (value <= low if meta["above"] else value < low):
        return f"must be {kind} {'>' if meta['above'] else '>='} {low}"
    if high is not None and value > high:
        return f"must be {kind} <= {high}"
    return None


def value_error(value: Any, meta: dict) -> str | None:
    """Why ``value`` breaks the bounds ``meta`` of :func:`bounded`, or None if it is allowed."""
    if value is None:
        return None if meta["nullable"] else "must not be null"
    if meta["choices"] is not None:
        if value not in meta["choices"]:
            return f"must be one of {', '.join(map(str, meta['choices']))}"
    elif meta["length"] is not None or isinstance(value, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            return "must be a list"
        if meta["length"] is not None and len(value) != meta["length"]:
            return f"must be a list of {meta['length']}"
        for item in value:
            why = _number_error(item, meta)
            if why:
                return f"must hold numbers that each {why.replace('must be', 'are')}"
    elif meta["minimum"] is not None or meta["maximum"] is not None or meta["integer"]:
        why = _number_error(value, meta)
        if why:
            return why
    return meta["check"](value) if meta["check"] else None


def bounds_text(meta: dict) -> str:
    """The bounds ``meta`` of :func:`bounded` in words for docs/config.md (``an integer >= 1``,
    ``2 integers >= 1``), or ``""`` for a key with none."""
    low, high = meta["minimum"], meta["maximum"]
    parts = [f"{'>' if meta['above'] else '>='} {low}"] if low is not None else []
    parts += [f"<= {high}"] if high is not None else []
    if not parts and not meta["integer"]:
        return ""
    kind = "integer" if meta["integer"] else "number"
    if meta["length"]:
        text = f"{meta['length']} {kind}s {' and '.join(parts)}"
    else:
        text = f"{'an' if meta['integer'] else 'a'} {kind} {' and '.join(parts)}"
    return f"{text.strip()}{', or null' if meta['nullable'] else ''}"


def check_node(node, schema, prefix: str) -> None:
    """Check every field of ``schema`` declared with :func:`bounded` in ``node`` (a mapping of
    plain values: interpolations resolved).

    Raises:
        ConfigError: for the first value out of bounds, naming ``<prefix>.<key>``, the bound and
            the value (``model.blocks must be an integer >= 1, got -1``).
    """
    for f in dataclasses.fields(schema):
        if "nullable" not in f.metadata or f.name not in node:
            continue
        why = value_error(node[f.name], f.metadata)
        if why:
            raise ConfigError(f"{prefix}.{f.name} {why}, got {node[f.name]!r}")


def composition_error(e: Exception) -> ConfigError:
    """Hydra's refusal of an override (``ConfigCompositionException``: a wrong type, a key no
    schema has, a sweep without ``--multirun``) as a :class:`ConfigError` naming the override,
    the key and the schema (OmegaConf's ``full_key`` and ``object_type`` of the cause)."""
    head = str(e).splitlines()[0] if str(e) else type(e).__name__
    cause = e.__cause__
    if cause is None:
        return ConfigError(" ".join(str(e).split()))
    why = str(getattr(cause, "msg", None) or cause).splitlines()[0].rstrip(".")
    key = getattr(cause, "full_key", None)
    schema = getattr(getattr(cause, "object_type", None), "__name__", None)
    where = f" (key {key}" + (f" of {schema}" if schema else "") + ")" if key else ""
    return ConfigError(f"{head}: {why}{where}")


def override_parse_error(e: Exception) -> ConfigError:
    """Hydra's refusal of an override its grammar cannot read (``OverrideParseException``, e.g.
    ``LexerNoViableAltException`` for a path with a letter outside ASCII written unquoted) as a
    :class:`ConfigError` naming the override and how to quote it, for Hydra and the shell."""
    head = str(e).splitlines()[0] if str(e) else type(e).__name__
    kind, _, text = head.partition(": ")
    key, eq, value = text.partition("=")
    if not (kind.startswith("Lexer") and eq and "'" not in value):
        return ConfigError(" ".join(str(e).split()))
    odd = sorted({ch for ch in value if ord(ch) > 127})  # letters outside ASCII: é, ü, 中
    what = f"the letter(s) {' '.join(odd)} of" if odd else "a character of"
    return ConfigError(
        f"{text}: Hydra's override grammar cannot read {what} this value unquoted ({kind}); "
        f"quote it for Hydra, and that for the shell: \"{key}='{value}'\" "
        "(docs/troubleshooting.md)"
    )


# ------------------------------------------------------------------------------------------------
# docs/config.md: each field's documentation, the comment beside it in the schema's source
# ------------------------------------------------------------------------------------------------
_FIELD = re.compile(r"^    (\w+): [^=]+= (.+?)(?:\s+#\s*(?:type: ignore\[\w+\]\s*#\s*)?(.*))?$")


def field_docs(schema) -> dict[str, str]:
    """Each field's documentation in a schema's source: its trailing comment, else the comment
    lines just above it (base classes first)."""
    docs: dict[str, str] = {}
    for cls in reversed(schema.__mro__):
        if not dataclasses.is_dataclass(cls):
            continue
        above: list[str] = []
        for line in inspect.getsource(cls).splitlines():
            stripped = line.strip()
            if stripped.startswith("#"):
                above.append(stripped.lstrip("# "))
                continue
            m = _FIELD.match(line)
            if m and m.group(1) != "_target_":
                docs[m.group(1)] = (m.group(3) or " ".join(above)).strip()
            above = []
    return docs


_FOLLOWS = re.compile(r"\$\{(?:oc\.select:)?([a-z_]+\.[\w.]+)(?:,[^}]*)?\}")


def show_default(value) -> str:
    """A default as docs/config.md shows it: `null`, `true`, a path under the root without it, a
    key that follows another (``${oc.select:data.frames,1}``) as that key."""
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    text = str(value).replace("${sr_root:}/", "")
    follows = _FOLLOWS.fullmatch(text)
    if follows:
        return f"`{follows[1]}`'s"
    return "the root `seed`" if text == "${seed}" else f"`{text}`"
