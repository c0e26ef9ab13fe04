"""The demo sequences: layout, sizes, determinism, idempotence, true sub-pixel motion, dispatch."""

from __future__ import annotations

import filecmp
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage.registration import phase_cross_correlation

from sr.core.frames import natural_key
from sr.data import demo
from sr.data.sequence import scan_sequences


@pytest.fixture(scope="module")
def seq_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    assert demo.ensure_demo_sequences(root) == root / "sequences"
    return root


def _files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"), key=lambda p: [natural_key(s) for s in p.parts])


def _gray(path: Path) -> np.ndarray:
    a = np.asarray(Image.open(path), np.float64)
    return a @ [0.299, 0.587, 0.114] if a.ndim == 3 else a


def test_layout_sizes_and_disjoint_photos(seq_root):
    paths = demo.demo_sequence_paths()
    base = seq_root / "sequences"
    assert sorted(p.name for p in base.iterdir()) == ["train", "val"]
    for split in ("train", "val"):
        names = sorted(p.name for p in (base / split).iterdir())
        assert names == sorted(k.split("/")[1] for k in paths if k.startswith(split + "/"))
        for name in names:
            files = sorted((base / split / name).iterdir(), key=lambda p: natural_key(p.name))
            assert [p.name for p in files] == [f"frame_{t:03d}.png" for t in range(len(files))]
            assert len(files) == len(paths[f"{split}/{name}"])
            assert len(files) >= (16 if split == "train" else 8)
            sizes = {Image.open(p).size for p in files}
            modes = {Image.open(p).mode for p in files}
            assert len(sizes) == 1 and len(modes) == 1 and modes <= {"L", "RGB"}
            assert min(sizes.pop()) >= 112
    assert len(list((base / "val").iterdir())) == 3
    train = {s.photo for s in demo.DEMO_SEQUENCES if s.split == "train"}
    val = {s.photo for s in demo.DEMO_SEQUENCES if s.split == "val"}
    assert train <= set(demo.TRAIN) and val <= set(demo.VAL) and not train & val
    assert not list(base.rglob(".*")), "temporary files left behind"


def test_grayscale_and_colour_kept(seq_root):
    base = seq_root / "sequences"
    assert Image.open(base / "train/moon/frame_000.png").mode == "L"
    assert Image.open(base / "train/astronaut/frame_000.png").mode == "RGB"


def test_deterministic_and_idempotent(seq_root, tmp_path):
    demo.ensure_demo_sequences(tmp_path)
    a, b = _files(seq_root / "sequences"), _files(tmp_path / "sequences")
    assert [p.relative_to(seq_root) for p in a] == [p.relative_to(tmp_path) for p in b]
    assert all(filecmp.cmp(x, y, shallow=False) for x, y in zip(a, b) if x.is_file())
    mtimes = {p: p.stat().st_mtime_ns for p in b}
    demo.ensure_demo_sequences(tmp_path)
    assert {p: p.stat().st_mtime_ns for p in _files(tmp_path / "sequences")} == mtimes
    # a missing frame is rewritten, alone and identical
    victim = tmp_path / "sequences/val/coffee/frame_003.png"
    victim.unlink()
    demo.ensure_demo_sequences(tmp_path)
    assert filecmp.cmp(victim, seq_root / "sequences/val/coffee/frame_003.png", shallow=False)
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items() if p.is_file() and p != victim)


def test_paths_are_deterministic_small_and_subpixel():
    paths, again = demo.demo_sequence_paths(), demo.demo_sequence_paths()
    assert paths.keys() == again.keys()
    steps = []
    for key, offsets in paths.items():
        np.testing.assert_array_equal(offsets, again[key])
        assert np.all(offsets * 2 == np.round(offsets * 2)) and offsets.min() >= 0
        steps.append(np.diff(offsets, axis=0))
    steps = np.concatenate(steps)
    norm = np.linalg.norm(steps, axis=1)
    assert norm.max() <= 4 and 0.5 <= norm.mean() <= 3
    assert np.mean(steps % 1 != 0) > 0.2, "too few half-pixel shifts"


@pytest.mark.slow
def test_true_path_matches_phase_correlation(seq_root):
    """Consecutive frames are shifted by the stored path (within 0.1 HR px), some by half a
    pixel: estimated by phase correlation on the Hann-windowed gray/luma of each pair."""
    base = seq_root / "sequences"
    non_integer = 0
    for key, offsets in demo.demo_sequence_paths().items():
        files = sorted((base / key).iterdir(), key=lambda p: natural_key(p.name))
        frames = [_gray(p) for p in files]
        hann = np.outer(np.hanning(frames[0].shape[0]), np.hanning(frames[0].shape[1]))
        frames = [(f - f.mean()) * hann for f in frames]
        for t in range(len(frames) - 1):
            shift, _, _ = phase_cross_correlation(frames[t], frames[t + 1], upsample_factor=20)
            true = offsets[t + 1] - offsets[t]
            assert np.abs(shift - true).max() <= 0.1 + 1e-9, (key, t, shift, true)
            non_integer += bool(np.any(np.abs(shift - np.round(shift)) > 0.25))
    assert non_integer >= 20


def test_scan_sequences_accepts_demo(seq_root):
    found = scan_sequences(seq_root / "sequences/train", frames=3, stride=1, min_size=112)
    train = [s for s in demo.DEMO_SEQUENCES if s.split == "train"]
    assert len(found.names) == len(train) and not found.skipped
    assert len(found.window_seq) == sum(s.frames - 2 for s in train)
    val = scan_sequences(seq_root / "sequences/val", frames=3, stride=1, min_size=112)
    assert len(val.names) == 3


@pytest.mark.slow
def test_ensure_demo_for_dispatch(tmp_path, monkeypatch):
    root = tmp_path / "demo"
    assert demo.ensure_demo_for([None, tmp_path / "elsewhere"], root) is False
    assert not root.exists()
    # only the photos: cheap stand-in for the sequence writer must not be called
    calls = []
    monkeypatch.setattr(demo, "ensure_demo_sequences", lambda r: calls.append(r))
    assert demo.ensure_demo_for([root / "train", root / "val"], root) is True
    assert (root / "train" / "astronaut.png").is_file() and not calls
    assert not (root / "sequences").exists()
    monkeypatch.undo()
    seq = tmp_path / "seq"
    monkeypatch.setattr(demo, "ensure_demo", lambda r: calls.append(r))
    assert demo.ensure_demo_for([seq / "sequences/train", seq / "sequences/val"], seq) is True
    assert not calls and not (seq / "train").exists()
    assert (seq / "sequences/val/camera/frame_007.png").is_file()
