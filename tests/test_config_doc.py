"""docs/config.md tells the truth about the config: its tables are generated from the schemas,
and no YAML of conf/ restates or overrides a schema default (defaults are written once)."""

import dataclasses
import functools

import pytest
from omegaconf import OmegaConf

from sr.config import DATA_SCHEMAS, GROUPS, Config, TrainConfig
from sr.config_doc import CONFIG_TABLE_MARKERS
from sr.config_doc import config_tables as generate
from sr.data.source import DataConfig
from tests.conftest import ROOT

START, END = CONFIG_TABLE_MARKERS
# composed once per worker (every model option: about 7 s here)
config_tables = functools.cache(generate)


@pytest.mark.slow
def test_the_config_tables_are_the_generated_ones():
    text = (ROOT / "docs" / "config.md").read_text()
    assert START in text and END in text
    block = text.split(START, 1)[1].split(END, 1)[0]
    assert block.strip() == config_tables().strip(), (
        "docs/config.md's config tables are stale: run `python -m sr.config_doc --write`"
    )


@pytest.mark.slow
def test_every_schema_key_has_a_documented_meaning():
    rows = [r for r in config_tables().splitlines() if r.startswith("| `")]
    keys = {r.split("`")[1] for r in rows}
    for prefix, schema in [("data", DataConfig), *(("data", s) for s in DATA_SCHEMAS.values())]:
        assert {f"{prefix}.{f.name}" for f in dataclasses.fields(schema)} - {
            "data._target_"
        } <= keys
    assert {f"train.{f.name}" for f in dataclasses.fields(TrainConfig)} <= keys
    for row in rows:
        meaning = row.rsplit("|", 2)[1].strip()
        assert meaning and not meaning.startswith("("), f"no meaning in {row}"


@pytest.mark.parametrize("mode", ["tfrecord", "generator"])
def test_the_composed_defaults_are_the_schema_defaults(compose, mode):
    cfg = compose(f"data={mode}")
    schema = DATA_SCHEMAS[f"base_{mode}"]
    data = OmegaConf.to_container(cfg.data, resolve=False)
    for f in dataclasses.fields(schema):
        if f.name != "_target_":
            assert data[f.name] == f.default, f"conf/data/{mode}.yaml restates data.{f.name}"
    train = OmegaConf.to_container(cfg.train, resolve=False)
    assert train == OmegaConf.to_container(OmegaConf.structured(TrainConfig))
    for f in dataclasses.fields(Config):
        if f.name not in GROUPS:  # the groups
            factory = f.default_factory
            default = f.default if factory is dataclasses.MISSING else factory()
            assert OmegaConf.to_container(cfg, resolve=False)[f.name] == default
