import json
import logging
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.fake_run import load_script

SCRIPT = ROOT / "scripts" / "make_tfrecords.py"


def run(*args, cwd):
    """Run the CLI as a process from ``cwd`` (not the repository: scripts work from any
    directory)."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture
def main(capsys, caplog, monkeypatch, tmp_path):
    """The CLI's ``main(argv)`` in this process, from ``tmp_path``: (exit code, what it printed
    and logged). The tests of a build run the script once as a process (``run``), the exit code
    and output of ``python scripts/make_tfrecords.py``; the refusals (the exit code ``main``
    returns) and later calls run here, to spare a TensorFlow start-up each."""
    module = load_script("make_tfrecords")
    monkeypatch.chdir(tmp_path)

    def call(*args):
        caplog.clear()
        with caplog.at_level(logging.INFO):
            code = module.main([str(a) for a in args])
        return code, capsys.readouterr().out + caplog.text

    return call


@pytest.mark.slow
def test_cli_builds_verifies_and_keeps_up_to_date_shards(photo_dir, tmp_path, main):
    out_dir = tmp_path / "shards"
    args = [f"data.hr_dir={photo_dir}", f"data.tfrecord_dir={out_dir}", "data.num_shards=3"]
    code, out = run(*args, "--verify", 20, cwd=tmp_path)
    assert code == 0, out
    assert "building TFRecord shards" in out and "verified 20 records" in out
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert len(manifest["shards"]) == 3 and manifest["source"]["files"] == 7
    code, out = main(*args)
    assert code == 0 and "building" not in out
    code, out = main(*args, "--force")
    assert code == 0 and "wrote" in out


def test_cli_names_an_empty_folder(tmp_path, main):
    (tmp_path / "empty").mkdir()
    code, out = main(f"data.hr_dir={tmp_path / 'empty'}", f"data.tfrecord_dir={tmp_path / 's'}")
    assert code == 2 and f"{tmp_path / 'empty'} holds no .png" in out


@pytest.mark.slow
def test_cli_verify_reads_every_record_and_names_a_corrupt_shard(photo_dir, tmp_path, main):
    out_dir = tmp_path / "shards"
    args = [f"data.hr_dir={photo_dir}", f"data.tfrecord_dir={out_dir}", "data.num_shards=3"]
    code, out = main("--verify", *args)  # --verify alone: N=0, not an override
    assert code == 0, out
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert f"checked all {manifest['records']} records of 3 shards" in out
    assert "verified" not in out  # no pixel comparison without N
    victim = out_dir / manifest["shards"][1]["file"]
    data = bytearray(victim.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4] = bytes(b ^ 0xFF for b in data[middle : middle + 4])
    victim.write_bytes(bytes(data))  # same size: only the record CRC can tell
    code, out = main(*args, "--verify", 5)
    assert code == 1, out
    assert f"1 corrupt shard(s) in {out_dir}" in out and f"{victim.name}: " in out
    assert "make_tfrecords.py --force" in out and "Traceback" not in out
    assert not (out_dir / "manifest.json").exists()  # marked stale: the next run rebuilds
    code, out = main(*args, "--verify", 5)
    assert code == 0 and "building TFRecord shards" in out and "verified 5 records" in out, out


def test_cli_refuses_a_folder_of_the_users_files_and_deletes_nothing(photo_dir, tmp_path, main):
    mine = tmp_path / "photos"
    mine.mkdir()
    (mine / "holiday.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    (mine / "notes.txt").write_text("keep me\n")
    before = {p.name: p.read_bytes() for p in mine.iterdir()}
    code, out = main(f"data.hr_dir={photo_dir}", f"data.tfrecord_dir={mine}", "--force")
    assert code == 2, out
    assert f"refusing to build TFRecord shards into {mine}" in out and "holiday.jpg" in out
    assert "empty or new folder" in out and "Traceback" not in out and "patches:" not in out
    assert {p.name: p.read_bytes() for p in mine.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hr", "photos"]  # nothing created
