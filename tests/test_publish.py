"""The one writer of an export folder (sr/deploy/publish.py): the export and its export.json
appear under the folder's name together, or nothing does."""

from __future__ import annotations

import json

import pytest

from sr.deploy.publish import RECORD, write_export


def write_model(folder):
    (folder / "model.bin").write_bytes(b"\x00\x01")
    return {"format": "test", "file": "model.bin"}


@pytest.mark.parametrize("existing", [False, True])
def test_the_export_and_its_record_are_published_together(tmp_path, existing):
    out = tmp_path / "export"
    if existing:
        out.mkdir()  # an empty folder is taken
    record = write_export(out, write_model)
    assert record == {"format": "test", "file": "model.bin"}
    assert sorted(p.name for p in out.iterdir()) == [RECORD, "model.bin"]
    assert (out / RECORD).read_text() == json.dumps(record, indent=2) + "\n"
    assert (out / "model.bin").read_bytes() == b"\x00\x01"
    assert [p.name for p in tmp_path.iterdir()] == ["export"]  # no staging folder left


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("existing", [False, True])
def test_a_failed_export_leaves_nothing(tmp_path, error, existing):
    out = tmp_path / "export"
    if existing:
        out.mkdir()

    def fail(folder):
        write_model(folder)
        raise error("conversion failed")

    with pytest.raises(error, match="conversion failed"):
        write_export(out, fail)
    assert [p.name for p in tmp_path.iterdir()] == (["export"] if existing else [])
    assert not existing or list(out.iterdir()) == []


def test_a_record_that_is_not_json_leaves_nothing(tmp_path):
    out = tmp_path / "export"
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_export(out, lambda folder: {"file": object()})
    assert list(tmp_path.iterdir()) == []


def test_a_non_empty_folder_is_refused_before_any_work(tmp_path):
    out = tmp_path / "export"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    called = []
    with pytest.raises(ValueError, match=f"output {out} already exists and is not empty"):
        write_export(out, called.append)
    assert called == []
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["export"]
