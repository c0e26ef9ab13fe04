"""One place for a default: a YAML option of ``conf/`` sets only the keys where it differs from
its schema (``sr.config``), and a schema's defaults are its builder's (``sr.models.schemas``
against the builders' signatures), so that a default changed in one place cannot silently
disagree with a copy in another; an experiment of ``conf/experiment/`` sets only what its group
options do not already give."""

from __future__ import annotations

import dataclasses
import inspect
import json

import hydra
import pytest
import yaml
from omegaconf import OmegaConf

import sr.config as C
from sr.degradations.realesrgan import Options, Params, RealESRGAN
from sr.models import registry
from sr.models.gan_schemas import DiscriminatorConfig

SCHEMA_TABLES = {
    **C.DATA_SCHEMAS,
    **{name: type(node) for name, node in registry.schema_nodes(C.MODEL_PRESETS).items()},
    **C.LOSS_SCHEMAS,
    **C.OPTIMIZER_SCHEMAS,
    **C.DEGRADATION_SCHEMAS,
    "base_train": C.TrainConfig,
}


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return (
        type(a) is type(b)
        and a == b
        or (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and not isinstance(a, bool)
            and not isinstance(b, bool)
            and float(a) == float(b)
        )
    )


def _options():
    for path in sorted((C.PROJECT_ROOT / "conf").glob("*/*.yaml")):
        if path.parent.name == "experiment":
            continue
        node = yaml.safe_load(path.read_text()) or {}
        bases = [d for d in node.get("defaults", []) if isinstance(d, str) and d in SCHEMA_TABLES]
        if bases:
            yield path, node, SCHEMA_TABLES[bases[0]]


@pytest.mark.parametrize(
    "path, node, schema", list(_options()), ids=lambda v: getattr(v, "name", "")
)
def test_a_yaml_option_restates_no_schema_default(path, node, schema):
    defaults = {f.name: _default(f) for f in dataclasses.fields(schema)}
    restated = [
        k for k, v in node.items()
        if k in defaults and k != "_target_" and _same(v, defaults[k])
    ]  # fmt: skip
    assert not restated, (
        f"{path.relative_to(C.PROJECT_ROOT)} restates the defaults of {schema.__name__}: "
        f"{', '.join(restated)}; keep each default in one place (drop them from the YAML)"
    )


def test_every_option_is_checked_against_a_schema():
    """The test above sees every group's options (but the experiments, which are patches)."""
    seen = {p.parent.name for p, _, _ in _options()}
    assert seen >= {"data", "model", "train", "loss", "optimizer", "degradation"}


BUILDERS = {
    **C.GROUP_SCHEMAS["optimizer"],
    "sr.models.discriminator.build_unet_discriminator": DiscriminatorConfig,
}


@pytest.mark.parametrize("target", sorted(BUILDERS))
def test_a_schema_and_its_builder_agree(target):
    """Each default of a schema (``optimizer``, ``discriminator``; a loss term's class takes its
    schema, ``sr.losses``) is its builder's (a function, or a class's ``__init__``), where the
    builder takes the key."""
    builder = hydra.utils.get_object(target)
    params = inspect.signature(builder).parameters
    schema = BUILDERS[target]
    checked = 0
    for f in dataclasses.fields(schema):
        if f.name == "_target_" or f.name not in params:
            continue
        want = params[f.name].default
        assert want is not inspect.Parameter.empty, f"{target}({f.name}) has no default"
        assert _same(_default(f), want), (
            f"{schema.__name__}.{f.name} = {_default(f)!r} but {target} defaults to {want!r}"
        )
        checked += 1
    assert checked or not [f for f in dataclasses.fields(schema) if f.name != "_target_"]


def test_a_model_builder_takes_its_schema_and_writes_no_default():
    """Each registered architecture's builder is ``build(cfg, scale, channels)``: its keys come
    from its schema, the only place their defaults are written (``sr.models.registry``)."""
    from sr.models import registry

    for spec in registry.specs():
        build = registry.builder(spec)
        params = list(inspect.signature(build).parameters.values())
        assert [p.name for p in params] == ["cfg", "scale", "channels"], spec.name
        assert all(p.default is inspect.Parameter.empty for p in params), spec.name


def test_the_degradation_schema_is_its_class():
    """``degradation=realesrgan``'s schema is made from the class's own fields, defaults and
    bounds (``schema_fields``); the class takes exactly those keys."""
    schema = C.DEGRADATION_SCHEMAS["base_realesrgan"]
    fields = {f.name: f for f in dataclasses.fields(schema) if f.name != "_target_"}
    own = {f.name: f for f in (*dataclasses.fields(Params), *dataclasses.fields(Options))}
    assert fields.keys() == own.keys()
    for name, f in fields.items():
        assert _same(_default(f), _default(own[name])), name
        assert f.metadata == own[name].metadata, name
    RealESRGAN(**{k: _default(f) for k, f in fields.items()})  # every default within its bounds


# ------------------------------------------------------------------------------------------------
# conf/experiment/: a recipe sets only what differs from what its group options give
# ------------------------------------------------------------------------------------------------
EXPERIMENTS = sorted((C.PROJECT_ROOT / "conf" / "experiment").glob("*.yaml"))
COMPOSED = C.PROJECT_ROOT / "tests" / "fixtures" / "experiments_composed.json"


def _leaves(node: dict, prefix: str = ""):
    """``(dotted key, value)`` of every leaf of an experiment's YAML but its defaults list."""
    for key, value in node.items():
        if key == "defaults":
            continue
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _at(container, key: str):
    for part in key.split("."):
        if not isinstance(container, dict) or part not in container:
            return KeyError
        container = container[part]
    return container


def _without_own_keys(node: dict):
    """The config an experiment's defaults list alone gives (its group options, or the
    experiment it extends), interpolations unresolved."""
    overrides = []
    for entry in node.get("defaults", []):
        if isinstance(entry, str):
            overrides += [f"experiment={entry}"] if entry != "_self_" else []
        else:
            overrides += [f"{k.replace('override /', '')}={v}" for k, v in entry.items()]
    return OmegaConf.to_container(C.compose(*overrides), resolve=False)


@pytest.mark.slow
@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_an_experiment_restates_nothing_it_gets_anyway(path):
    """A key of ``conf/experiment/<name>.yaml`` differs from what the experiment's group options
    (their schemas' defaults and presets) already give: a default is written in one place."""
    node = yaml.safe_load(path.read_text())
    base = _without_own_keys(node)
    restated = [k for k, v in _leaves(node) if _same(v, _at(base, k))]
    assert not restated, (
        f"conf/experiment/{path.name} restates what its options give: {', '.join(restated)}; "
        "drop them from the YAML"
    )


SAVED = sorted(json.loads(COMPOSED.read_text()))  # the experiments that existed before


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in EXPERIMENTS if p.stem in SAVED], ids=lambda p: p.stem)
def test_an_experiment_composes_as_before_its_restated_keys_went(path):
    """Every key the experiments set before their restated defaults were dropped (issue 44)
    composes to the value it had then (``tests/fixtures/experiments_composed.json``)."""
    saved = json.loads(COMPOSED.read_text())[path.stem]
    now = OmegaConf.to_container(C.compose(f"experiment={path.stem}"), resolve=False)
    changed = {k: (v, _at(now, k)) for k, v in saved.items() if not _same(v, _at(now, k))}
    assert not changed, f"experiment={path.stem} composes otherwise (before, now): {changed}"
