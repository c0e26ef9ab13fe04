"""The degradation protocol (``sr.degradations.protocol.Degradation``) and the registry by name
(``sr.degradations.registry``): every registered degradation's class implements every member,
with the protocol's arguments; a degradation registered by a module of its own is found by name
and its keys are checked; the data code asks the protocol, never a degradation's name."""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass

import hydra
import numpy as np
import pytest
import tensorflow as tf

from sr.config import PROJECT_ROOT
from sr.core.errors import ConfigError
from sr.core.schema import bounded
from sr.degradations import Bicubic, RealESRGAN, registry
from sr.degradations.protocol import MEMBERS, Degradation


def protocol_members() -> set[str]:
    """The members the protocol class declares: its annotations, properties and methods."""
    own = {k for k, v in vars(Degradation).items() if not k.startswith("_") and (
        callable(v) or isinstance(v, property))}  # fmt: skip
    return own | set(Degradation.__annotations__)


def test_members_lists_the_whole_protocol():
    assert set(MEMBERS) == protocol_members()


def _defaults(schema) -> dict:
    """The keys of a degradation's schema with their defaults (``_target_`` left out)."""
    out = {}
    for f in dataclasses.fields(schema):
        if f.name != "_target_":
            factory = f.default_factory
            out[f.name] = f.default if factory is dataclasses.MISSING else factory()
    return out


@pytest.mark.parametrize("name", registry.names())
def test_each_registered_class_implements_every_member(name):
    """Every degradation of ``sr.degradations`` (a new module is picked up by the registry)."""
    spec = registry.get(name)
    cls = hydra.utils.get_class(spec.target)
    degradation = cls(**_defaults(spec.schema))
    assert cls.protocol_lr is spec.protocol_lr
    assert isinstance(degradation, Degradation)
    for member in MEMBERS:
        assert hasattr(cls, member) or member in vars(degradation), f"{cls.__name__}.{member}"
        want = getattr(Degradation, member, None)
        if inspect.isfunction(want):  # a method: the protocol's arguments, in its order
            have = inspect.signature(getattr(cls, member))
            assert list(have.parameters) == list(inspect.signature(want).parameters), member
    assert degradation.name == name
    assert degradation.device in ("input", "accelerator")
    assert isinstance(degradation.protocol_lr, bool) and isinstance(degradation.gt_usm, bool)
    assert degradation.pool_size >= 0 and degradation.crop_margin(4) % 4 == 0
    assert degradation.identity()["name"] == name


def test_the_two_classes_are_the_registry_s_and_bicubic_is_the_protocol_s_operator():
    assert {"bicubic", "realesrgan"} <= set(registry.names())
    assert hydra.utils.get_class(registry.get("bicubic").target) is Bicubic
    assert hydra.utils.get_class(registry.get("realesrgan").target) is RealESRGAN
    assert Bicubic.protocol_lr and not RealESRGAN.protocol_lr
    assert registry.spec_of("sr.degradations.realesrgan.RealESRGAN").name == "realesrgan"
    assert registry.spec_of("my.own.Degradation") is None
    with pytest.raises(ConfigError, match="unknown degradation 'blur': choose one of bicubic"):
        registry.get("blur")


def test_bicubic_pair_is_the_operator_of_each_channel():
    """``Bicubic.pair``: ``make_lr`` of the whole crop, the target the HR itself."""
    rng = np.random.default_rng(0)
    hr = rng.integers(0, 256, (2, 16, 16, 3)).astype(np.float32) / 255.0
    lr, target, plain = Bicubic().pair(hr, 4, None, plain=True)
    assert lr.shape == (2, 4, 4, 3) and target.shape == plain.shape == (2, 16, 16, 3)
    expect = Bicubic().lr_image(np.round(hr[1] * 255).astype(np.uint8), 4)
    np.testing.assert_array_equal(np.round(lr[1].numpy() * 255).astype(np.uint8), expect)
    np.testing.assert_array_equal(target.numpy(), hr)


class Blur:
    """A degradation of one's own, registered in this module: a box blur, then bicubic."""

    name = "box"
    needs_rgb = False
    protocol_lr = False
    device = "input"
    gt_usm = False
    pool_size = 0

    def __init__(self, width: int = 3):
        self.width = width

    def identity(self) -> dict:
        return {"name": self.name, "width": self.width}

    def crop_margin(self, scale: int) -> int:
        return 2 * scale

    def least_crop(self, scale: int) -> int:
        return 0

    def pair(self, hr, scale, seeds, plain=False):
        blurred = tf.nn.avg_pool2d(hr, self.width, 1, "SAME")
        return Bicubic().pair(blurred, scale, seeds, plain)[:1] + ((hr, hr) if plain else (hr,))

    def lr_image(self, hr, scale, seed=0, index=0):
        return Bicubic().lr_image(hr, scale)


@dataclass
class BlurConfig(registry.DegradationConfig):
    width: int = bounded(3, minimum=1, integer=True)  # the box's side (pixels)


def test_a_degradation_registered_by_name_is_found_and_its_keys_checked():
    spec = registry.register(registry.DegradationSpec("box", f"{__name__}.Blur", BlurConfig))
    try:
        assert registry.get("box") is spec and "box" in registry.names()
        assert registry.spec_of(f"{__name__}.Blur") is spec
        assert isinstance(Blur(), Degradation)
        spec.check_keys({"width": 5})
        with pytest.raises(ConfigError, match="degradation.width must be an integer >= 1, got 0"):
            spec.check_keys({"width": 0})
        with pytest.raises(ConfigError, match="degradation.sigma is not a key of degradation=box"):
            spec.check_keys({"sigma": 1.0})
        with pytest.raises(ValueError, match="two degradations are registered as 'box'"):
            registry.register(registry.DegradationSpec("box", "elsewhere.Box", BlurConfig))
    finally:
        registry.unregister("box")


def test_bicubic_takes_no_key():
    with pytest.raises(ConfigError, match="degradation.sigma is not a key of degradation=bicubic"):
        registry.get("bicubic").check_keys({"sigma": 1})


DATA_CODE = ("sr/data", "sr/train/validation.py", "sr/evaluation.py", "sr/config.py")


def test_the_data_code_compares_no_degradation_name_and_probes_no_member():
    """No ``name == "bicubic"`` and no ``getattr(degradation, ...)``: the protocol's members."""
    found = []
    for folder in DATA_CODE:
        root = PROJECT_ROOT / folder
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"degradation\.name\s*[!=]=|getattr\(\w*\.?degradation\b", line):
                    found.append(f"{path.relative_to(PROJECT_ROOT)}:{n}: {line.strip()}")
    assert not found, found


@pytest.mark.parametrize("scale", [2, 3, 4])
@pytest.mark.parametrize(
    "keys", [{}, {"margin": 36}, {"gt_usm": False, "pool_size": 16}, {"margin": 0}]
)
def test_the_declared_geometry_is_the_class_s(keys, scale):
    """``realesrgan_params.geometry`` (the config's check, no TensorFlow) gives what the class
    gives: its ``crop_margin``, ``least_crop`` and ``pool_size``."""
    spec = registry.get("realesrgan")
    d = RealESRGAN(**keys)
    assert spec.geometry(keys, scale) == (d.crop_margin(scale), d.least_crop(scale), d.pool_size)
    assert registry.get("bicubic").geometry is None  # no data key can break bicubic
