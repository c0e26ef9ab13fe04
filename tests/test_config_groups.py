"""The config groups compose against the structured schemas and validate: every pair of options of
data x model x train x loss x optimizer, and each experiment with each loss and optimizer
(Hydra's compose API, as lightning-hydra-template's tests; compose only, no training)."""

from __future__ import annotations

import dataclasses
import itertools

import hydra
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import sr.config
from sr.config import ConfigError, validate
from sr.losses import Loss
from sr.models import registry
from sr.train.optimizers import OptimizerChoice
from tests.conftest import ROOT

CONF = ROOT / "conf"


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


GROUPS = ("data", "model", "train", "loss", "optimizer")
GAN = "discriminator=unet_sn"  # loss=realesrgan's discriminator (each needs the other)


def with_discriminator(overrides: tuple) -> tuple:
    """``overrides`` with ``discriminator=unet_sn`` after ``loss=realesrgan``."""
    return (*overrides, GAN) if "loss=realesrgan" in overrides else overrides


COMBINATIONS = [
    with_discriminator(tuple(f"{g}={o}" for g, o in zip(GROUPS, choice)))
    for choice in itertools.product(*(options(g) for g in GROUPS))
]


def one_preset_per_architecture() -> list[str]:
    """The first preset (by name) of each architecture in conf/model/: a model preset sets
    ``model.*`` keys only (no ``@package _global_``), so its pairs with the other groups are
    its architecture's; every preset is composed and built on its own in
    tests/test_recipes.py and checked against its schema in tests/test_config_defaults.py."""
    first = {}
    for name in options("model"):
        (base,) = [d for d in OmegaConf.load(CONF / "model" / f"{name}.yaml").defaults
                   if str(d).startswith("base_")]  # fmt: skip
        first.setdefault(base, name)
    return sorted(first.values())


# the product the pairwise check covers: one preset per architecture
ARCH_COMBINATIONS = [
    with_discriminator(tuple(f"{g}={o}" for g, o in zip(GROUPS, choice)))
    for choice in itertools.product(
        *(one_preset_per_architecture() if g == "model" else options(g) for g in GROUPS)
    )
]


def pairs(combination: tuple) -> set:
    return set(itertools.combinations(combination, 2))


def all_pairs(combinations: list[tuple]) -> list[tuple]:
    """A subset of ``combinations`` holding every pair of options of two groups that the full
    product holds (greedy covering: an interaction of two choices is what breaks a config)."""
    left, chosen = set().union(*map(pairs, combinations)), []
    while left:
        best = max(combinations, key=lambda c: len(pairs(c) & left))
        chosen.append(best)
        left -= pairs(best)
    return chosen


PAIRWISE = all_pairs(ARCH_COMBINATIONS)
GAN_EXPERIMENTS = {  # with a discriminator: its loss only
    "cpu20_realesrgan", "realesrgan_x4", "finetune_realesrgan_x4plus",
    "finetune_realesrgan_x4plus_cpu",
}  # fmt: skip
EXPERIMENTS = [
    with_discriminator((f"experiment={e}", f"loss={loss}", f"optimizer={opt}"))
    for e in options("experiment")
    for loss in options("loss")
    for opt in options("optimizer")
    if (e in GAN_EXPERIMENTS) == (loss == "realesrgan") or e not in GAN_EXPERIMENTS
]
# every pair (experiment and loss, experiment and optimizer, loss and optimizer) that the list
# above holds, in fewer compositions: an experiment patches a few keys of each group, so a
# conflict is between two choices
EXPERIMENT_PAIRS = all_pairs(EXPERIMENTS)


@pytest.fixture(scope="module")
def hydra_conf():
    """One Hydra context for the module (``sr.config.compose`` opens one per call)."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield


def check(cfg, overrides) -> None:
    """The composed config validates, names classes that exist, and its loss and optimizer
    instantiate as the options chosen."""
    validate(cfg)  # every group's schema, the model's bounds included
    assert hydra.utils.get_class(cfg.data._target_).schema  # a source with its schema
    assert registry.spec_of(cfg.model).name == cfg.model.arch  # a registered architecture
    loss = hydra.utils.instantiate(cfg.loss)
    optimizer = hydra.utils.instantiate(cfg.optimizer)
    assert isinstance(loss, Loss) and isinstance(optimizer, OptimizerChoice)
    chosen = dict(o.split("=", 1) for o in overrides)
    preset = OmegaConf.load(CONF / "loss" / f"{chosen.get('loss', 'l1')}.yaml")
    assert loss.names == tuple(preset.terms)  # the preset's terms, in order
    assert optimizer.name == chosen.get("optimizer", "adam")
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves


def test_the_groups_are_all_there():
    models = len(options("model"))  # every preset and registered architecture
    assert models >= 8 and len(COMBINATIONS) == 3 * models * 1 * 4 * 2  # data, model, ...
    assert {"l1", "l2", "charbonnier", "realesrgan"} == set(options("loss"))
    assert {"none", "unet_sn"} == set(options("discriminator"))
    assert {"adam", "adamw"} == set(options("optimizer"))


@pytest.mark.slow
def test_every_pair_of_choices_composes_and_validates(hydra_conf):
    """Every pair of options of two groups (a model: one preset per architecture), in a few
    combinations (not the whole product)."""
    assert len(PAIRWISE) < len(ARCH_COMBINATIONS) / 3
    assert set().union(*map(pairs, PAIRWISE)) == set().union(*map(pairs, ARCH_COMBINATIONS))
    assert len(one_preset_per_architecture()) == len(registry.names())  # a preset for each
    for overrides in PAIRWISE:
        check(compose("config", overrides=list(overrides)), overrides)


@pytest.mark.slow
def test_every_experiment_composes_with_each_loss_and_optimizer(hydra_conf):
    assert len(EXPERIMENT_PAIRS) < len(EXPERIMENTS) * 2 / 3
    assert set().union(*map(pairs, EXPERIMENT_PAIRS)) == set().union(*map(pairs, EXPERIMENTS))
    assert {o[0] for o in EXPERIMENT_PAIRS} == {f"experiment={e}" for e in options("experiment")}
    for overrides in EXPERIMENT_PAIRS:
        check(compose("config", overrides=list(overrides)), overrides)


def test_the_defaults_are_l1_and_adam_with_todays_betas(hydra_conf):
    cfg = compose("config")
    want = {"_target_": "sr.losses.Loss", "terms": {"l1": {}}}  # L1 at its schema's defaults
    assert OmegaConf.to_container(cfg.loss) == want
    assert OmegaConf.to_container(cfg.optimizer) == {
        "_target_": "sr.train.optimizers.Adam",
        "beta_1": 0.9,
        "beta_2": 0.999,
    }
    check(cfg, ())


def test_no_loss_or_optimizer_yaml_restates_a_schema_default(hydra_conf):
    """Defaults are written once, in the schemas of sr/config.py (a loss preset's terms: in
    the terms' schemas, tests/test_loss_terms.py)."""
    schemas = {**sr.config.LOSS_SCHEMAS, **sr.config.OPTIMIZER_SCHEMAS}
    for group in ("loss", "optimizer"):
        for name in options(group):
            yaml = OmegaConf.load(CONF / group / f"{name}.yaml")
            base = [d for d in yaml.defaults if str(d).startswith("base_")]
            assert len(base) == 1, f"conf/{group}/{name}.yaml extends no schema"
            keys = set(yaml) - {"defaults", "_target_", "terms"}
            assert not keys, f"conf/{group}/{name}.yaml restates {keys}"
            fields = {f.name for f in dataclasses.fields(schemas[base[0]])}
            assert set(compose("config", overrides=[f"{group}={name}"])[group]) == fields


@pytest.mark.parametrize(
    "override, names",
    [
        ("train.loss=charbonnier", "loss=charbonnier"),
        ("train.beta_1=0.5", "optimizer.beta_1="),
        ("++train.beta_2=0.5", "optimizer.beta_2="),
        ("data.flip=false", "data.flips=none"),
        ("train.mixed_precision=false", "train.precision="),
    ],
)
def test_an_old_key_is_refused_naming_the_new_group(override, names):
    with pytest.raises(ConfigError, match="is no longer a key") as info:
        sr.config.compose(override)
    assert names in str(info.value)


def test_a_key_of_another_option_is_refused(hydra_conf):
    """The schemas are closed: adam has no weight_decay, l1 no eps."""
    from hydra.errors import ConfigCompositionException

    for override in ("optimizer.weight_decay=0.1", "loss.eps=0.1"):
        with pytest.raises(ConfigCompositionException):
            compose("config", overrides=[override])
