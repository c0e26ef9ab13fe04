"""Every key of every config group is checked by its schema at start-up, before any work: a
hostile value (drawn by Hypothesis from the key's schema type) is refused with a ConfigError
naming the key, which train.py turns into exit code 2, and nothing is written. Also the named
cases: model hyperparameters out of range, a number for a list, an option a group lacks, a
builder's own refusal, more images held out than there are."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

import sr.config
from sr.config import GROUPS, ConfigError, build_source, group_choices, load
from sr.losses import registry as loss_registry
from tests.conftest import write_photos

NOT_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "nan", "inf", "none", "y", "n"}
WORDS = st.from_regex(r"\A[a-z]{3,8}\Z").filter(lambda w: w not in NOT_WORDS)
LISTS = st.sampled_from(["[1,2]", "[abc]", "[[1],[2]]"])
DICTS = st.just("{a: 1}")
NON_NUMBERS = st.one_of(WORDS, LISTS, DICTS)
# values that Hydra's override grammar reads as floats outside every range of the project
BAD_FLOATS = st.sampled_from(["nan", "inf", "-inf", "-1e6", "-0.5"])
SEEDS = {"seed"}  # any integer is a seed


def _kind(hint) -> tuple[type, bool]:
    """``(base type, nullable)`` of a schema field's type hint (``int | None`` -> int, True)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        base = next(a for a in args if a is not type(None))
        return (typing.get_origin(base) or base), type(None) in args
    return (typing.get_origin(hint) or hint), False


def hostile(name: str, hint) -> st.SearchStrategy[str] | None:
    """Override values that the key's schema type or range refuses; None for a free key."""
    base, _ = _kind(hint)
    if base is bool:
        return NON_NUMBERS
    if base is int:
        negative = st.integers(max_value=-1).map(str)
        floats = st.sampled_from(["1.5", "nan", "inf"])
        return st.one_of(NON_NUMBERS, floats, *([] if name in SEEDS else [negative]))
    if base is float:
        return st.one_of(NON_NUMBERS, BAD_FLOATS)
    if base is str:
        return st.one_of(LISTS, DICTS)
    if base is list:
        return st.one_of(st.integers().map(str), WORDS, DICTS)
    return None  # Any: free


def option_schema(group: str, option: str) -> type:
    """The schema that ``<group>=<option>`` composes against, read without composing (42
    Hydra compositions at every worker's collection): the ``base_*`` default of the option's
    YAML, or the option itself where it is a schema (``model=<arch>``), looked up in the
    schemas that ``sr.config.register`` stores. :func:`test_option_schema_is_the_composed_one`
    holds it to Hydra's answer."""
    from sr.models import registry

    schemas = {**sr.config.DATA_SCHEMAS, **sr.config.LOSS_SCHEMAS,
               **sr.config.OPTIMIZER_SCHEMAS, **sr.config.DEGRADATION_SCHEMAS,
               **registry.schema_nodes(sr.config.MODEL_PRESETS),
               "base_train": sr.config.TrainConfig,
               "base_discriminator": sr.config.DiscriminatorConfig}  # fmt: skip
    yaml = sr.config.PROJECT_ROOT / "conf" / group / f"{option}.yaml"
    name = option
    if yaml.is_file():
        (name,) = [str(d) for d in OmegaConf.load(yaml).defaults if str(d).startswith("base_")]
    node = schemas[name]
    return node if isinstance(node, type) else type(node)


def group_keys() -> list[tuple[tuple[str, ...], str, st.SearchStrategy[str]]]:
    """``(base overrides, group.key, hostile values)`` for every key of every option of every
    group (the schema the composed option has)."""
    out = []
    for group in GROUPS:
        for option in group_choices(group):
            base = (f"{group}={option}",)
            schema = option_schema(group, option)
            hints = typing.get_type_hints(schema)
            for f in dataclasses.fields(schema):
                values = hostile(f.name, hints[f.name])
                if f.name != "_target_" and values is not None:
                    out.append((base, f"{group}.{f.name}", values))
    return out + term_keys()


def term_keys() -> list[tuple[tuple[str, ...], str, st.SearchStrategy[str]]]:
    """The keys of every loss term (``loss.terms`` is untyped: its schemas are the terms'),
    each first set to its default so that the drawn override replaces it."""
    out = []
    for spec in loss_registry.specs():
        hints = typing.get_type_hints(spec.schema)
        for f in dataclasses.fields(spec.schema):
            values = hostile(f.name, hints[f.name])
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            text = str(default).lower() if isinstance(default, bool) else str(default)
            key = f"loss.terms.{spec.name}.{f.name}"
            if values is not None:
                out.append((("loss=l1", f"++{key}={text.replace(' ', '')}"), key, values))
    return out


KEYS = group_keys()


def refusal(tmp_path: Path, *overrides: str) -> str:
    """The ConfigError of what train.py checks before any work (the in-process path of its exit
    code 2): the composed config's schemas and ranges, then the data source's values."""
    hr = tmp_path / "hr-never-read"
    paths = (f"data.hr_dir={hr}", "data.val_dir=null")
    if not any(o.startswith("data=") and o != "data=tfrecord" for o in overrides):
        paths += (f"data.tfrecord_dir={tmp_path / 's'}",)
    with pytest.raises(ConfigError) as info:
        cfg = load(*paths, *overrides)
        build_source(cfg)
    return str(info.value)


@pytest.mark.parametrize("group, option", [("data", "generator"), ("data", "sequence"),
                                           ("model", "span"), ("model", "edsr"), ("model", "rcan"),
                                           ("loss", "realesrgan"), ("optimizer", "adamw"),
                                           ("degradation", "realesrgan"), ("train", "default"),
                                           ("discriminator", "unet_sn")])  # fmt: skip
def test_option_schema_is_the_composed_one(group, option):
    composed = OmegaConf.get_type(sr.config.compose(f"{group}={option}")[group])
    assert option_schema(group, option) is composed


def test_every_group_option_has_keys_to_draw():
    assert len({key for _, key, _ in KEYS}) > 60
    assert {key.split(".")[0] for _, key, _ in KEYS} == set(GROUPS)


@pytest.mark.slow  # 30 compositions (Hydra): 8.9 s at load 1.5, over the fast tier's 5 s
@settings(
    max_examples=30,
    derandomize=True,  # the same examples on every machine: CI cannot fail by chance
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_hostile_value_of_any_key_is_refused_naming_it_and_nothing_is_written(tmp_path, data):
    base, key, values = data.draw(st.sampled_from(KEYS), label="key")
    value = data.draw(values, label="value")
    message = refusal(tmp_path, *base, f"{key}={value}")
    assert key in message, message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides, message",
    [
        (("model=rlfn", "model.features=0"), "model.features must be an integer >= 1, got 0"),
        (("model=rlfn", "model.blocks=-1"), "model.blocks must be an integer >= 1, got -1"),
        (("model=edsr_lite", "model.res_scale=0"), "model.res_scale must be a number > 0"),
        (("model.features=[8]",), "model.features must be a list of 2, got [8]"),
        (("model.activation=foo",), "model.activation must name a Keras activation"),
        (("model=span", "model.img_range=nan"), "model.img_range must be a finite number"),
        (
            ("degradation=realesrgan", "degradation.kernel_sizes=7"),
            "degradation.kernel_sizes=7: Invalid value assigned: int is not a ListConfig, list "
            "or tuple (key degradation.kernel_sizes of RealESRGANConfig)",
        ),
        (
            ("train.steps=abc",),
            "train.steps=abc: Value 'abc' of type 'str' could not be converted to Integer "
            "(key train.steps of TrainConfig)",
        ),
        (
            ("model=foo",),
            "model=foo: the model group has no option 'foo'; choose one of "
            f"{', '.join(group_choices('model'))} (conf/model/)",
        ),
        (
            ("data=foo",),
            "data=foo: the data group has no option 'foo'; choose one of generator, sequence, "
            "tfrecord (conf/data/)",
        ),
        (("loss=l3",), "loss=l3: the loss group has no option 'l3'; choose one of charbonnier"),
    ],
)
def test_named_bad_values_are_refused_before_any_work(tmp_path, overrides, message):
    assert message in refusal(tmp_path, *overrides)
    assert list(tmp_path.iterdir()) == []


def test_an_architectures_cross_key_rule_is_checked_with_the_config(compose):
    """EDSR's x2 pixel-shuffle stages have no x5: its rule (``sr.models.edsr.rules``) refuses
    the config before any work, and a build of it the same way."""
    from sr.loading.models import build_model

    message = "EDSR supports scales 2, 3, 4 and 8, got data.scale=5"
    with pytest.raises(ConfigError, match=message):
        load("model=edsr_baseline", "data.scale=5")
    with pytest.raises(ConfigError, match=message):
        build_model(compose("model=edsr_baseline", "data.scale=5"))


def test_more_images_held_out_than_there_are_is_a_config_error(tmp_path):
    write_photos(tmp_path / "hr", size=64, names=("camera", "coffee", "rocket", "moon", "chelsea"))
    cfg = load(
        "data=generator", f"data.hr_dir={tmp_path / 'hr'}", "data.val_dir=null",
        "data.val_holdout=10", "data.patch_size=32",
    )  # fmt: skip
    with pytest.raises(
        ConfigError, match=r"data.hr_dir has 5 image\(s\), and data.val_holdout=10"
    ):
        build_source(cfg).prepare()


def _train_script():
    """``train.py`` imported as a module (its ``__main__`` block does not run)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "train_script", sr.config.PROJECT_ROOT / "train.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "argv, message",
    [
        (["model=rlfn", "model.blocks=-1"], "model.blocks must be an integer >= 1, got -1"),
        (["model=foo", "hydra.run.dir=x"], "the model group has no option 'foo'"),
        (["-m", "model=espcn,foo"], "the model group has no option 'foo'"),  # a sweep's too
        (["train.steps=abc"], "(key train.steps of TrainConfig)"),
        (  # the U-Net discriminator's three halvings: not a Keras shape error at step 1
            ["loss=realesrgan", "discriminator=unet_sn", "data.patch_size=100"],
            "data.patch_size=100: discriminator=unet_sn halves the HR patch three times and "
            "joins its U-Net's skips, so the patch must be a multiple of 8: use 96 or 104",
        ),
        (  # the key the user typed, not the model's key that follows it
            ["data=sequence", "model=espcn_mf", "data.frames=0"],
            "data.frames must be an integer >= 1, got 0 (model.frames follows it)",
        ),
        (  # Hydra's lexer error, with how to quote
            ["data.hr_dir=/data/café"],
            "data.hr_dir=/data/café: Hydra's override grammar cannot read the letter(s) é of this "
            "value unquoted (LexerNoViableAltException); quote it for Hydra, and that for the "
            "shell: \"data.hr_dir='/data/café'\"",
        ),
    ],
)
@pytest.mark.slow
def test_train_py_refuses_a_bad_command_line_before_hydra_writes(argv, message):
    """What train.py's ``__main__`` checks before Hydra creates the run directory: a ConfigError,
    printed as ``error: ...`` with exit code 2 (``EXIT_BAD_INPUT``)."""
    script = _train_script()
    assert script.EXIT_BAD_INPUT == 2
    with pytest.raises(ConfigError, match=re.escape(message)):
        script.check_command_line(argv)
    script.check_command_line(["-m", "train.lr=1e-3,2e-3"])  # a good sweep: Hydra's to run
    script.check_command_line(["model=rlfn", "model.blocks=2", "hydra.run.dir=x"])
