"""A resume whose newest checkpoint is truncated or unreadable falls back to the one before it,
with a warning naming the bad files, instead of failing with a raw error."""

from __future__ import annotations

import logging
import shutil

import pytest

import sr.config
from sr.core.errors import ConfigError
from sr.train.app import run


def fallback_run(folders) -> list[str]:
    return [
        "data=generator",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data.batch_size=4",
        "train.ckpt_every=2",
        "model.features=[16,8]",
    ]


@pytest.fixture(scope="module")
def six_steps(folders, tmp_path_factory):
    """A finished 6-step run (checkpoints 2, 4, 6), copied by each test that damages it."""
    run_dir = tmp_path_factory.mktemp("fallback") / "run"
    run(sr.config.compose(*fallback_run(folders), "train.steps=6"), run_dir)
    return run_dir


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated data", "empty index"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(
    folders, six_steps, tmp_path, compose, caplog, damage
):
    base = fallback_run(folders)
    shutil.copytree(six_steps, tmp_path / "run", ignore=shutil.ignore_patterns(".lock"))
    ckpt = tmp_path / "run" / "checkpoints"
    if damage == "truncated data":
        data = ckpt / "ckpt-6.data-00000-of-00001"
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    else:
        (ckpt / "ckpt-6.index").write_bytes(b"")
    with caplog.at_level(logging.INFO):
        final = run(
            compose(*base, "train.steps=8", f"resume={tmp_path / 'run'}"), tmp_path / "run"
        )
    assert "ckpt-6.data-00000-of-00001, ckpt-6.index is unreadable" in caplog.text
    assert "trying the checkpoint before it" in caplog.text
    assert "resumed from" in caplog.text and "ckpt-4 at step 4" in caplog.text
    assert final["step"] == 8


@pytest.mark.slow
def test_no_readable_checkpoint_is_a_clear_error(folders, tmp_path, compose):
    base = [
        "data=generator",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data.batch_size=4",
        "model.features=[16,8]",
    ]
    run(compose(*base, "train.steps=2"), tmp_path / "run")
    # a whole checkpoint that does not fit (a Y run resumed as RGB) is not called unreadable
    rgb = compose(*base, "data.channels=rgb", "train.steps=4", f"resume={tmp_path / 'run'}")
    with pytest.raises(ConfigError, match=r"ckpt-2 is whole but does not fit this config's model"):
        run(rgb, tmp_path / "run")
    (tmp_path / "run" / "checkpoints" / "ckpt-2.index").write_bytes(b"garbage")
    with pytest.raises(
        FileNotFoundError, match=r"none of the checkpoints in .* is readable \(ckpt-2\)"
    ):
        run(compose(*base, "train.steps=4", f"resume={tmp_path / 'run'}"), tmp_path / "run")
