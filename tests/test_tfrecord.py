"""TFRecord shards: exact round trip, manifest, write-time shuffle, rebuild, atomicity, killed and
concurrent builds."""

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

import sr.config
from sr.core.images import load_y, scan_folder
from sr.data import tfrecord

PARAMS = tfrecord.PatchParams(patch_size=32, scale=4, margin=8, stride=16, lr_dir=None)


@pytest.fixture
def shards(photo_dir, tmp_path):
    images = scan_folder(photo_dir, PARAMS.crop)
    manifest = tfrecord.write_shards(
        images, tmp_path / "shards", PARAMS, 4, seed=0, progress=False
    )
    return images, tmp_path / "shards", manifest


def _records(folder, manifest):
    out = []
    for s in manifest["shards"]:
        for raw in tf.data.TFRecordDataset(str(folder / s["file"])):
            f = tf.io.parse_single_example(raw, tfrecord.feature_spec())
            out.append({k: v.numpy() for k, v in f.items()})
        yield s["file"], out
        out = []


@pytest.mark.slow
def test_round_trip_is_exact_and_shapes_are_stored(shards):
    images, folder, manifest = shards
    total = 0
    for _, records in _records(folder, manifest):
        for r in records:
            src = load_y(images.files[r["image"]])
            hr = np.frombuffer(r["hr"], np.uint8).reshape(r["hr_height"], r["hr_width"])
            np.testing.assert_array_equal(hr, src[r["y"] : r["y"] + 48, r["x"] : r["x"] + 48])
            total += 1
    assert total == manifest["records"] == sum(manifest["patches_per_image"])
    assert tfrecord.verify_shards(folder, count=50) == 50


@pytest.mark.slow
def test_manifest_describes_the_shards_on_disk(shards, photo_dir):
    images, folder, manifest = shards
    assert json.loads((folder / "manifest.json").read_text()) == manifest  # as returned
    # every shard file is listed with the number of records it really holds, and nothing else
    on_disk = {p.name for p in folder.iterdir()} - {"manifest.json"}
    listed = {s["file"]: s["records"] for s in manifest["shards"]}
    assert set(listed) == on_disk and len(listed) == 4
    per_image = Counter()
    for name, records in _records(folder, manifest):
        assert listed[name] == len(records)
        per_image.update(int(r["image"]) for r in records)
    assert manifest["records"] == sum(listed.values())
    # images in name order; per image, the count of records and of grid windows over it
    assert manifest["images"] == sorted(p.name for p in photo_dir.iterdir())
    for i, name in enumerate(manifest["images"]):
        h, w = load_y(photo_dir / name).shape

        def windows(n, crop=PARAMS.crop, stride=PARAMS.stride):
            return (n - crop) // stride + 1 + ((n - crop) % stride > 0)

        assert manifest["patches_per_image"][i] == per_image[i] == windows(h) * windows(w)
    assert manifest["params"] == dict(
        patch_size=32,
        scale=4,
        margin=8,
        stride=16,
        lr_dir=None,
        channel=tfrecord.CHANNEL,
        subimage=0,
    )
    assert manifest["source"]["hr_dir"] == str(photo_dir.resolve())
    assert not [p for p in folder.parent.iterdir() if ".tmp" in p.name]


def test_every_image_spread_over_all_shards_and_shards_are_shuffled(shards):
    images, folder, manifest = shards
    for name, records in _records(folder, manifest):
        idx = [r["image"] for r in records]
        assert set(idx) == set(range(len(images.files))), f"{name} misses images"
        rho = stats.spearmanr(np.arange(len(idx)), idx).statistic
        assert abs(rho) < 0.2, f"{name} is ordered by image (Spearman {rho:.2f})"
        runs = sum(a == b for a, b in zip(idx, idx[1:])) / len(idx)
        assert runs < 0.35, f"{name}: {runs:.0%} of neighbours come from the same image"


def test_stale_reasons(shards, photo_dir):
    images, folder, manifest = shards
    assert tfrecord.stale_reason(manifest, folder, images, PARAMS) is None
    other = tfrecord.PatchParams(patch_size=32, scale=4, margin=8, stride=24, lr_dir=None)
    assert "parameters changed" in tfrecord.stale_reason(manifest, folder, images, other)
    (folder / manifest["shards"][0]["file"]).unlink()
    assert "missing" in tfrecord.stale_reason(manifest, folder, images, PARAMS)
    first = images.files[0]
    os.utime(first, ns=(first.stat().st_atime_ns, first.stat().st_mtime_ns + 10**9))
    changed = scan_folder(photo_dir, PARAMS.crop)
    assert "changed" in tfrecord.stale_reason(manifest, folder, changed, PARAMS)


def test_read_path_parses_batches_and_checks_shapes(shards):
    images, folder, manifest = shards
    ds = tfrecord.read_patches(folder, manifest, batch_size=8, shuffle_buffer=64, seed=0)
    batch = next(iter(ds))
    assert batch["hr"].dtype == tf.uint8 and batch["hr"].shape == (8, 48, 48, 1)
    assert batch["image"].dtype == tf.int32
    wrong = dict(manifest, params=dict(manifest["params"], patch_size=40))
    with pytest.raises(tf.errors.InvalidArgumentError, match="rebuild the shards"):
        next(iter(tfrecord.read_patches(folder, wrong, 8, 64)))


def test_a_failed_write_leaves_the_old_set_intact(shards, monkeypatch):
    images, folder, manifest = shards

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(tfrecord.write, "shuffle_buckets", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        tfrecord.write_shards(images, folder, PARAMS, 4, seed=1, progress=False)
    assert tfrecord.read_manifest(folder) == manifest
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".shards")]
    assert not tfrecord.lock_path(folder).exists()  # the build lock is released and deleted


# ------------------------------------------------------------------------------------------------
# Corrupt shards, incomplete manifests, leftovers of killed builds
# ------------------------------------------------------------------------------------------------
def _source(compose, photo_dir, tmp_path):
    import hydra

    cfg = compose(
        "data=tfrecord",
        f"data.hr_dir={photo_dir}",
        "data.val_dir=null",
        f"data.tfrecord_dir={tmp_path / 'set'}",
        "data.num_shards=3",
        "data.batch_size=16",
    )
    return hydra.utils.instantiate(cfg.data)


def flip_bytes(path, at: float = 0.5, n: int = 4):
    """Invert ``n`` bytes in the middle of a file (same size, broken record CRC)."""
    data = bytearray(path.read_bytes())
    i = int(len(data) * at)
    data[i : i + n] = bytes(b ^ 0xFF for b in data[i : i + n])
    path.write_bytes(bytes(data))


def test_manifest_records_shard_sizes_and_truncation_is_stale_and_rebuilt(
    compose, photo_dir, tmp_path, caplog
):
    source = _source(compose, photo_dir, tmp_path)
    manifest = source.ensure_shards()
    folder = source.tfrecord_dir
    for s in manifest["shards"]:
        assert s["bytes"] == (folder / s["file"]).stat().st_size > 0
    victim = folder / manifest["shards"][1]["file"]
    with open(victim, "r+b") as f:
        f.truncate(victim.stat().st_size // 2)
    reason = tfrecord.stale_reason(manifest, folder, source.images, source.params())
    assert f"shard {victim.name} is {victim.stat().st_size} bytes" in reason
    assert "truncated" in reason
    with caplog.at_level(logging.INFO):
        rebuilt = source.ensure_shards()
    assert any(
        "truncated" in r.getMessage() and "building" in r.getMessage() for r in caplog.records
    )
    assert victim.stat().st_size == rebuilt["shards"][1]["bytes"] == manifest["shards"][1]["bytes"]
    assert tfrecord.check_shards(folder, rebuilt) == []


def test_flipped_bytes_are_named_by_the_scan_and_the_trainer_error(compose, photo_dir, tmp_path):
    source = _source(compose, photo_dir, tmp_path)
    manifest = source.ensure_shards()
    folder = source.tfrecord_dir
    victim = manifest["shards"][2]["file"]
    flip_bytes(folder / victim)
    assert tfrecord.stale_reason(manifest, folder, source.images, source.params()) is None
    bad = tfrecord.check_shards(folder, manifest)
    assert [name for name, _ in bad] == [victim] and "corrupt" in bad[0][1].lower()
    # the read path raises a bare DataLossError; the source turns it into one naming the shard
    with pytest.raises(tf.errors.DataLossError) as raw:
        for _ in source.patch_dataset().take(200):
            pass
    error = source.explain_data_loss(raw.value)
    assert isinstance(error, tfrecord.ShardError)
    assert victim in str(error) and "make_tfrecords.py --force" in str(error)
    assert "marked stale" in str(error) and not (folder / tfrecord.MANIFEST).exists()
    rebuilt = source.ensure_shards()  # the next run rebuilds the set
    assert tfrecord.check_shards(folder, rebuilt) == []


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda m: m.pop("source"), "'source' is missing"),
        (lambda m: m.update(records="many"), "'records' is missing or not a int"),
        (lambda m: m["shards"][0].pop("bytes"), "shard entry 0 lacks"),
        (lambda m: m.update(params={"patch": 3}), "'params' does not describe"),
    ],
)
def test_a_manifest_with_missing_keys_or_wrong_types_is_stale(shards, edit, problem):
    images, folder, manifest = shards
    edit(manifest)
    (folder / tfrecord.MANIFEST).write_text(json.dumps(manifest))
    read = tfrecord.read_manifest(folder)
    reason = tfrecord.stale_reason(read, folder, images, PARAMS)
    assert "manifest.json" in reason and "incomplete" in reason and problem in reason
    (folder / tfrecord.MANIFEST).write_text("[1, 2]")  # JSON, but not a manifest
    assert "unreadable or of another format" in tfrecord.stale_reason(
        tfrecord.read_manifest(folder), folder, images, PARAMS
    )
    (folder / tfrecord.MANIFEST).unlink()
    assert "no shards" in tfrecord.stale_reason(None, folder, images, PARAMS)


def test_leftovers_of_dead_builds_are_removed_and_live_ones_kept(photo_dir, tmp_path):
    images = scan_folder(photo_dir, PARAMS.crop)

    def leftover(name, pid=None, age=0.0):
        path = tmp_path / name
        (path / "bucket-0").parent.mkdir()
        (path / "bucket-0").write_bytes(b"x" * 1000)
        if pid is not None:
            owner = {"host": socket.gethostname(), "pid": pid}
            (path / tfrecord.OWNER).write_text(json.dumps(owner))
        if age:
            old = time.time() - age
            os.utime(path, (old, old))
        return path

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gone = [
            leftover(".shards.tmp-dead", pid=dead.pid),
            leftover(".shards.tmp-legacy", age=3600),  # no owner file, older than this process
            leftover(".shards.new", age=3600),
            leftover(".shards.old", age=3600),
        ]
        kept = [
            leftover(".shards.tmp-live", pid=live.pid),
            leftover(".shards.tmp-fresh"),  # no owner file yet, newer than this process
            leftover(".other.tmp-dead", pid=dead.pid),  # another target's
        ]
        tfrecord.write_shards(images, tmp_path / "shards", PARAMS, 2, seed=0, progress=False)
    finally:
        live.kill()
        live.wait()
    assert not [p for p in gone if p.exists()]
    assert all(p.is_dir() for p in kept)
    assert tfrecord.read_manifest(tmp_path / "shards") is not None


# ------------------------------------------------------------------------------------------------
# Killed and concurrent builds (real subprocesses)
# ------------------------------------------------------------------------------------------------
# A child that builds shards with a slowed decode (so that it can be caught in the middle).
SLOW_BUILD = r"""
import sys, time
from sr.data import tfrecord
from sr.data.tfrecord import write
from sr.core.images import scan_folder

hr, out, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
load = write.load_y_pair

def slow_load(*args, **kwargs):
    time.sleep(delay)
    return load(*args, **kwargs)

write.load_y_pair = slow_load  # the decode of the build
params = tfrecord.PatchParams(patch_size=32, scale=4, margin=8, stride=16, lr_dir=None)
images = scan_folder(hr, params.crop)
tfrecord.write_shards(images, out, params, 4, seed=1, workers=1, progress=False)
"""


def _wait_for(condition, proc, log_file, timeout=120.0):
    """Poll ``condition()`` until true; fail (with the child's output) if the child exits first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the child exited ({proc.returncode}) first:\n{log_file.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for the child:\n{log_file.read_text()}")
        time.sleep(0.02)


def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.slow
def test_a_build_killed_midway_leaves_the_old_set_and_the_next_build_cleans_up(shards, tmp_path):
    images, folder, manifest = shards
    before = _files(folder)
    log_file = tmp_path / "child.log"
    with open(log_file, "w") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", SLOW_BUILD, str(images.folder), str(folder), "600"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(lambda: list(tmp_path.glob(".shards.tmp-*/bucket-0")), child, log_file)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # the old set is in place, untouched and readable; the half-written one is only a leftover
    assert _files(folder) == before and tfrecord.read_manifest(folder) == manifest
    assert tfrecord.check_shards(folder, manifest) == []
    (leftover,) = tmp_path.glob(".shards.tmp-*")
    assert json.loads((leftover / tfrecord.OWNER).read_text())["pid"] == child.pid
    assert not (leftover / tfrecord.MANIFEST).exists()
    assert not list(leftover.glob("patches-*")) and not (tmp_path / ".shards.new").exists()
    assert not tfrecord.lock_busy(folder)  # the kernel released the dead build's lock
    # the next build (another shard count) is not blocked, removes the leftover, and is sound
    rebuilt = tfrecord.write_shards(images, folder, PARAMS, 3, seed=2, progress=False)
    assert not leftover.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".shards")]  # lock file too
    want = {tfrecord.MANIFEST} | {tfrecord.shard_name(i, 3) for i in range(3)}
    assert set(_files(folder)) == want and tfrecord.read_manifest(folder) == rebuilt
    assert tfrecord.check_shards(folder, rebuilt) == []
    assert rebuilt["records"] == manifest["records"]


RUN = (
    "data=tfrecord",
    "data.val_dir=null",
    "data.num_shards=2",
    "data.patch_size=32",
    "data.write_workers=1",
    "seed=0",
)

SLOW_RUN = r"""
import json, logging, pathlib, sys, time

import sr.config
from sr.config import build_source
from sr.data.tfrecord import write

hr, out, gate, *run = sys.argv[1:]
load = write.load_y_pair

def gated_load(*args, **kwargs):
    # Decoding waits until the other run has said it waits for this build: no race on speed.
    deadline = time.monotonic() + 120
    while not pathlib.Path(gate).exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the other run never waited for this build")
        time.sleep(0.02)
    return load(*args, **kwargs)

write.load_y_pair = gated_load  # the decode of the build
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
cfg = sr.config.compose(*run, f"data.hr_dir={hr}", f"data.tfrecord_dir={out}")
manifest = build_source(cfg).ensure_shards()
print("MANIFEST " + json.dumps(manifest), flush=True)
"""


class _OpenGateWhenWaiting(logging.Handler):
    """Creates ``gate`` once this process logs that it waits for another process's build."""

    def __init__(self, gate):
        super().__init__(logging.INFO)
        self.gate = gate

    def emit(self, record):
        if record.getMessage().startswith("waiting for the shard build"):
            self.gate.touch()


@pytest.mark.slow
def test_two_runs_at_once_build_the_shards_once_and_share_them(photo_dir, tmp_path, caplog):
    """A training run (a child process) builds the missing shards; a second run (this process)
    started meanwhile on the same data finds them missing too, waits for the first build, and
    uses its set: one build, one manifest."""
    out_dir, log_file, gate = tmp_path / "set", tmp_path / "child.log", tmp_path / "gate"
    with open(log_file, "w") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", SLOW_RUN, str(photo_dir), str(out_dir), str(gate), *RUN],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(lambda: list(tmp_path.glob(".set.tmp-*/bucket-0")), child, log_file)
        source = sr.config.build_source(
            sr.config.compose(*RUN, f"data.hr_dir={photo_dir}", f"data.tfrecord_dir={out_dir}")
        )
        assert tfrecord.read_manifest(out_dir) is None  # the second run finds no shards either
        opener = _OpenGateWhenWaiting(gate)
        logging.getLogger("sr.data.tfrecord").addHandler(opener)
        try:
            with caplog.at_level(logging.INFO, logger="sr.data.tfrecord"):
                manifest = source.ensure_shards()
        finally:
            logging.getLogger("sr.data.tfrecord").removeHandler(opener)
        assert child.wait(timeout=240) == 0, log_file.read_text()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    child_out = log_file.read_text()
    assert child_out.count("building TFRecord shards") == 1, child_out
    ours = [r.getMessage() for r in caplog.records]
    assert not [m for m in ours if m.startswith(("building", "wrote"))]  # no second build
    assert f"waiting for the shard build of {out_dir} by process {child.pid} to finish" in ours[0]
    assert "using the shards another process just built" in ours[-1]
    (line,) = [x for x in child_out.splitlines() if x.startswith("MANIFEST ")]
    assert json.loads(line.split(" ", 1)[1]) == manifest == tfrecord.read_manifest(out_dir)
    assert tfrecord.check_shards(out_dir, manifest) == []
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".set.") and p.is_dir()]
    assert leftovers == []


def test_the_build_lock_excludes_other_threads_and_is_reentrant(tmp_path, caplog):
    target = tmp_path / "set"
    order = []
    with tfrecord.build_lock(target):
        with tfrecord.build_lock(target):  # re-entrant in the holding thread
            assert json.loads(tfrecord.lock_path(target).read_text())["pid"] == os.getpid()

        def other():
            with tfrecord.build_lock(target):  # its own open file: flock makes it wait
                order.append("other")

        with caplog.at_level(logging.INFO, logger="sr.data.tfrecord"):
            thread = threading.Thread(target=other)
            thread.start()
            deadline = time.monotonic() + 30
            while not any("waiting" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "the other thread never waited"
                time.sleep(0.01)
            assert tfrecord.lock_busy(target) is False  # held by this very thread
            order.append("holder")
    thread.join(30)
    assert order == ["holder", "other"] and not tfrecord.lock_path(target).exists()
    waiting = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert waiting == [
        f"waiting for the shard build of {target} by process {os.getpid()} to finish "
        f"(lock {tfrecord.lock_path(target)})"
    ]


# ------------------------------------------------------------------------------------------------
# Only shard sets are ever deleted
# ------------------------------------------------------------------------------------------------
def test_leftover_folders_lose_only_the_files_a_build_writes(tmp_path, caplog):
    old = tmp_path / ".shards.old"
    old.mkdir()
    (old / tfrecord.shard_name(0, 1)).write_bytes(b"x" * 10)
    (old / tfrecord.MANIFEST).write_text("{}")
    (old / "notes.txt").write_text("mine")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    with caplog.at_level(logging.WARNING, logger="sr.data.tfrecord"):
        assert tfrecord.remove_leftovers(tmp_path / "shards") == []
    assert [p.name for p in old.iterdir()] == ["notes.txt"]
    assert any(
        f"kept {old}" in r.getMessage() and "notes.txt" in r.getMessage() for r in caplog.records
    )


def test_a_symlinked_destination_is_built_into_the_folder_it_points_to(photo_dir, tmp_path):
    images = scan_folder(photo_dir, PARAMS.crop)
    (tmp_path / "disk").mkdir()
    (tmp_path / "disk" / "set").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "disk" / "set")
    manifest = tfrecord.write_shards(images, link, PARAMS, 2, seed=0, progress=False)
    assert link.is_symlink() and tfrecord.read_manifest(link) == manifest
    assert tfrecord.check_shards(link, manifest) == []
    tfrecord.write_shards(images, link, PARAMS, 3, seed=0, progress=False)  # rebuilt through it
    assert (
        link.is_symlink() and len(tfrecord.read_manifest(tmp_path / "disk" / "set")["shards"]) == 3
    )
