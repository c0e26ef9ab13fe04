"""Every config rule in the schema layer (issue 44): ``sr.config.load`` (what ``train.py`` checks
before TensorFlow) refuses the ``data`` values out of their bounds and the keys that cannot work
together, with the messages the data sources give when built; the bounds of ``data.channels``,
``data.pool_frames`` and ``data.target_frame``."""

from __future__ import annotations

import re

import pytest

from sr.config import load
from sr.core.errors import ConfigError


@pytest.mark.parametrize(
    "overrides, message",
    [
        (("data.channels=bgr",), "data.channels must be one of y, rgb, got 'bgr'"),
        (("data=sequence", "data.pool_frames=0"), "data.pool_frames must be an integer >= 1"),
        (
            ("data=sequence", "data.target_frame=first"),
            "data.target_frame must be last, center or a frame index 0..data.frames - 1",
        ),
        (("data.patch_size=90",), "data.patch_size 90 is not a multiple of data.scale 4: use 88"),
        (("data.hr_dir=",), "data.hr_dir is empty"),
        (("data.val_holdout=2",), "data.val_holdout=2 validates on images held out"),
        (("data.lr_from=rgb", "data.lr_dir=/tmp"), "gives it: drop one of them"),
        (("data.channels=rgb", "data.lr_from=rgb"), "drop data.lr_from"),
        (("data=generator", "data.service=grpc://h:5050"), "needs data=tfrecord"),
        (
            ("data=sequence", "data.val_dir=null", "data.val_holdout=1"),
            "data.val_holdout=1 is not supported by data=sequence",
        ),
        (("data=sequence", "data.pool_frames=8"), "data.pool_frames must be >= 15"),
        (
            ("data=sequence", "data.target_frame=3"),
            "data.target_frame=3 is not a frame of the window of data.frames=3",
        ),
        (("data=sequence", "data.frames=4", "data.target_frame=center"), "center needs an odd"),
        (
            ("degradation=realesrgan", "degradation.margin=30"),
            "degradation.margin=30 is not a multiple of data.scale 4: use 28 or 32",
        ),
        (
            ("degradation=realesrgan", "data.patch_size=16"),
            "needs crops of at least 44 pixels at x4; data.patch_size=16 gives 32",
        ),
        (
            ("degradation=realesrgan", "degradation.pool_size=8", "data.batch_size=16"),
            "degradation.pool_size=8 holds fewer pairs than a batch (data.batch_size=16)",
        ),
        (("data=sequence", "data.channels=rgb"), "data=sequence decodes to Y only"),
        (
            ("data=sequence", "degradation=realesrgan"),
            "data=sequence decodes to Y only: data.channels=y with degradation=realesrgan",
        ),
        (
            ("degradation=realesrgan", "data.lr_dir=/tmp", "data.patch_size=16"),
            "data.lr_dir=/tmp gives pre-made Y LR patches",
        ),
        (("+data.pool_size=3",), "data.pool_size is a key of data=generator"),
    ],
)
@pytest.mark.slow
def test_data_rules_are_checked_when_the_config_is(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(*overrides)


@pytest.mark.parametrize(
    "overrides",
    [
        ("data=sequence", "data.target_frame=0"),
        ("data=sequence", "data.target_frame=center"),
        ("degradation=realesrgan", "degradation.margin=36", "degradation.pool_size=64"),
        ("data=tfrecord", "data.channels=rgb", "degradation=bicubic"),
    ],
)
def test_values_that_work_together_pass(overrides):
    load(*overrides)
