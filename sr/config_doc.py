"""docs/config.md's tables, generated from the schemas of :mod:`sr.config` and ``conf/``:
``python -m sr.config_doc --write`` (``tests/test_config_doc.py`` checks the doc is current)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from sr.config import (
    DATA_SCHEMAS,
    GROUPS,
    PROJECT_ROOT,
    AdamConfig,
    AdamWConfig,
    Config,
    TrainConfig,
    compose,
    group_choices,
)
from sr.core.schema import bounds_text, field_docs, show_default
from sr.data.source import DataConfig
from sr.degradations.realesrgan import Options, Params
from sr.losses import registry as loss_terms
from sr.models import registry
from sr.models.gan_schemas import DiscriminatorConfig


def _yaml_summary(path: Path) -> str:
    """The first sentence of a YAML's leading comment (up to a line ending in ``.`` or ``:``)."""
    words = []
    for line in path.read_text().splitlines():
        if not line.startswith("#") or line.startswith("# @package"):
            if words:
                break
            continue
        words.append(line.lstrip("# ").strip())
        if words[-1].endswith((".", ":")):
            break
    return " ".join(words).rstrip(":")


def config_tables() -> str:
    """docs/config.md's tables: every option of every config group (first comment line of its YAML)
    and every key of the schemas with its default and meaning (the comment beside the field), so
    that the documentation cannot drift from the code. ``tests/test_config_doc.py`` checks that
    docs/config.md holds exactly this text."""
    conf = PROJECT_ROOT / "conf"
    chosen = {}
    for entry in OmegaConf.load(conf / "config.yaml").defaults:
        if isinstance(entry, DictConfig) or isinstance(entry, dict):
            for key, value in dict(entry).items():
                chosen[str(key).replace("optional ", "")] = value
    lines = ["| group | option | what it is |", "| --- | --- | --- |"]
    for group in (*GROUPS, "experiment"):
        for path in sorted((conf / group).glob("*.yaml")):
            mark = " (default)" if chosen.get(group) == path.stem else ""
            lines.append(f"| `{group}` | `{path.stem}`{mark} | {_yaml_summary(path)} |")
    lines += ["", "| key | default | meaning |", "| --- | --- | --- |"]
    sections = [
        ("data", DataConfig, "every mode"),
        *(("data", schema, f"`data={name[5:]}` only") for name, schema in DATA_SCHEMAS.items()),
        ("train", TrainConfig, ""),
        *((f"loss.terms.{s.name}", s.schema, "") for s in loss_terms.specs()),
        ("optimizer", AdamConfig, ""),
        ("optimizer", AdamWConfig, "`optimizer=adamw` only"),
        ("model", None, ""),  # what each option of the group gives: _model_rows
        ("degradation", Params, "`degradation=realesrgan` only"),
        ("degradation", Options, "`degradation=realesrgan` only"),
        ("discriminator", DiscriminatorConfig, ""),
        ("", Config, ""),
    ]
    seen: set[str] = set()
    for prefix, schema, scope in sections:
        if schema is None:
            lines += _model_rows()
            continue
        docs = field_docs(schema)
        for f in dataclasses.fields(schema):
            key = f"{prefix}.{f.name}" if prefix else f.name
            own = prefix == "model" and f.name in schema.__annotations__  # per builder
            if f.name in ("_target_", "arch") or (key in seen and not own) or f.name in GROUPS:
                continue
            seen.add(key)
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            scope_note = f" ({scope})" if scope and scope != "every mode" else ""
            meaning = _meaning(f, docs)
            lines.append(f"| `{key}` | {show_default(default)} | {meaning}{scope_note} |")
    return "\n".join(lines) + "\n"


def _meaning(f: dataclasses.Field, docs: dict[str, str]) -> str:
    """A field's meaning for the table: its comment, with its choices or bounds."""
    meaning = docs.get(f.name, "").replace("|", "\\|")
    if f.metadata.get("choices"):
        return f"one of {', '.join(f'`{c}`' for c in f.metadata['choices'])}: {meaning}"
    if "nullable" in f.metadata and bounds_text(f.metadata):
        return f"{meaning} ({bounds_text(f.metadata)})"
    return meaning


def _model_rows() -> list[str]:
    """The ``model.*`` rows: for each option of the group (``conf/model/<preset>.yaml``, or an
    architecture without a preset), the value of every key of its architecture's schema as the
    option composes (``sr.config.compose("model=<option>")``: what a user gets), with the
    schema's meaning and bounds."""
    rows = []
    for option in group_choices("model"):
        node = OmegaConf.to_container(compose(f"model={option}").model, resolve=False)
        spec = registry.spec_of(node)
        docs = field_docs(spec.schema)
        for f in dataclasses.fields(spec.schema):
            if f.name in ("_target_", "arch"):
                continue
            arch = f", `model.arch={spec.name}`" if option != spec.name else ""
            value, meaning = show_default(node.get(f.name)), _meaning(f, docs)
            rows.append(f"| `model.{f.name}` | {value} | {meaning} (`model={option}`{arch}) |")
    return rows


# The file that holds the tables, between these markers.
CONFIG_DOC = PROJECT_ROOT / "docs" / "config.md"
CONFIG_TABLE_MARKERS = ("<!-- config-tables: start -->", "<!-- config-tables: end -->")


def update_config_doc(path: Path = CONFIG_DOC) -> bool:
    """Replace the text between :data:`CONFIG_TABLE_MARKERS` in ``path`` (docs/config.md) by
    :func:`config_tables`; returns True if it changed."""
    text = path.read_text()
    start, end = CONFIG_TABLE_MARKERS
    head, rest = text.split(start, 1)
    new = f"{head}{start}\n{config_tables()}{end}{rest.split(end, 1)[1]}"
    path.write_text(new)
    return new != text


if __name__ == "__main__":  # python -m sr.config_doc [--write]: print the tables, or write the doc
    import sys

    if "--write" in sys.argv[1:]:
        doc = CONFIG_DOC.relative_to(PROJECT_ROOT)
        print(f"{doc} updated" if update_config_doc() else f"{doc} already up to date")
    else:
        print(config_tables(), end="")
