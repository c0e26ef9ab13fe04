"""data.val_holdout: validation on images held out of the training folder, never trained on."""

from __future__ import annotations

import pytest

from sr.config import build_source
from sr.core.images import list_images
from sr.data.source import holdout
from tests.conftest import write_photos


def test_holdout_spreads_over_the_folder():
    files = [f"{k:02d}" for k in range(80)]
    assert holdout(files, 8, "k") == ["05", "15", "25", "35", "45", "55", "65", "75"]
    assert holdout(files[:3], 1, "k") == ["01"]
    with pytest.raises(ValueError, match="data.val_holdout=3 would hold out all of them"):
        holdout(files[:3], 3, "data.hr_dir")


@pytest.mark.parametrize("mode", ["tfrecord", "generator"])
def test_held_out_images_validate_and_are_never_trained_on(tmp_path, compose, mode):
    hr = tmp_path / "hr"
    write_photos(hr, size=120, per_photo=2)  # 14 photos
    root = [f"data.data_root={tmp_path / 'root'}"] if mode == "tfrecord" else []
    cfg = compose(
        f"data={mode}", f"data.hr_dir={hr}", "data.val_dir=null", "data.val_holdout=3", *root
    )
    source = build_source(cfg)
    source.prepare()
    every = list_images(hr)
    held = source.val_files
    assert len(held) == 3 and held == [every[2], every[7], every[11]]
    assert set(source.images.files) == set(every) - set(held)


def test_holdout_and_a_validation_folder_are_refused_together(tmp_path, compose):
    cfg = compose(f"data.hr_dir={tmp_path}", f"data.val_dir={tmp_path}", "data.val_holdout=2")
    with pytest.raises(ValueError, match="set data.val_dir=null"):
        build_source(cfg)


def test_sequence_mode_refuses_holdout(tmp_path, compose):
    cfg = compose("data=sequence", "data.val_dir=null", "data.val_holdout=1")
    with pytest.raises(ValueError, match="data.val_holdout=1 is not supported by data=sequence"):
        build_source(cfg)
