"""data=sequence: windows of k frames at a stride, their pairs, the pool's memory bound, errors."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from sr.config import ConfigError, build_source
from sr.core.degrade import crop_margin, make_lr
from sr.core.frames import TARGETS, check_same_size, natural_key, target_index, window_frames
from sr.core.images import ImageFolderError
from sr.data.pairs import random_masks
from sr.data.sequence import SequenceSource, scan_sequences
from tests.conftest import photo

PHOTOS = ("astronaut", "coffee", "rocket", "chelsea")


def write_sequences(root: Path, lengths, size=(72, 80), names=PHOTOS, step=(2, 3)) -> Path:
    """One subfolder per sequence, ``frame<t>.png`` unpadded (natural order differs from the
    string order past frame9), frames sliding ``step`` pixels a frame across a real photo."""
    for q, n in enumerate(lengths):
        im = photo(names[q % len(names)])
        for t in range(n):
            y, x = (step[0] * t) % (im.shape[0] - size[0]), (step[1] * t) % (im.shape[1] - size[1])
            path = root / f"clip{q}" / f"frame{t}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(im[y : y + size[0], x : x + size[1]]).save(path)
    return root


def source(hr_dir, **kw) -> SequenceSource:
    args = dict(
        hr_dir=str(hr_dir),
        val_dir=None,
        lr_dir=None,
        batch_size=6,
        patch_size=16,
        scale=4,
        flips="hv",
        rot90=True,
        seed=3,
        deterministic=True,
        service=None,
        frames=3,
        frame_stride=2,
        target_frame="last",
        patches_per_window=3,
        pool_frames=60,
        pool_memory_mb=64,
        decode_workers=2,
    )
    args.update(kw)
    src = SequenceSource(**args)
    src.prepare()
    return src


def take(ds, n):
    it = iter(ds)
    out = [{k: v.numpy() for k, v in next(it).items()} for _ in range(n)]
    del it
    return out


@pytest.fixture(scope="module")
def seq_dir(tmp_path_factory) -> Path:
    return write_sequences(tmp_path_factory.mktemp("seq"), (12, 7, 9))


def test_natural_order_and_window_index(seq_dir):
    assert sorted(["frame10", "frame2", "frame1"], key=natural_key) == [
        "frame1",
        "frame2",
        "frame10",
    ]
    s = scan_sequences(seq_dir, frames=3, stride=2, min_size=32)
    assert s.names == ("clip0", "clip1", "clip2")
    assert [p.name for p in s.files[:12]] == [f"frame{t}.png" for t in range(12)]
    # span (3 - 1) 2 + 1 = 5: 12 - 4, 7 - 4, 9 - 4 windows, sorted by (sequence, start)
    assert list(s.window_seq) == [0] * 8 + [1] * 3 + [2] * 5
    assert list(s.window_start) == [*range(8), *range(3), *range(5)]


def test_windows_stay_in_their_sequence_and_honour_the_stride(seq_dir):
    src = source(seq_dir)
    s = src.sequences
    seen = set()
    for batch in take(src.patch_dataset(), 30):
        assert batch["hr"].shape == (6, 3, 16 + 2 * crop_margin(4), 32, 1)
        assert batch["hr"].dtype == np.uint8
        for w, q, frames, flat in zip(
            batch["window"], batch["sequence"], batch["frame"], batch["image"]
        ):
            assert q == s.window_seq[w] and frames[0] == s.window_start[w]
            assert list(np.diff(frames)) == [2, 2]  # the stride
            assert 0 <= frames[0] and frames[-1] < s.lengths[q]  # never past the sequence
            # the flat frame index names files of that sequence, in order
            assert [s.files[i].parent.name for i in flat] == [f"clip{q}"] * 3
            assert [s.files[i].name for i in flat] == [f"frame{t}.png" for t in frames]
            seen.add(int(w))
    assert seen == set(range(len(s.window_seq)))  # every window drawn


def test_crops_are_the_frames_pixels_at_one_position(seq_dir):
    """Each frame's crop is cut from that frame's decoded Y at the same position for all k."""
    from sr.core.images import load_y

    src = source(seq_dir, rot90=False)
    batch = take(src.patch_dataset(), 2)[1]
    c = src.crop
    for hr, flat in zip(batch["hr"], batch["image"]):
        frames = [load_y(src.sequences.files[i]) for i in flat]
        hits = [
            (y, x)
            for y in range(frames[0].shape[0] - c + 1)
            for x in range(frames[0].shape[1] - c + 1)
            if all(
                np.array_equal(f[y : y + c, x : x + c], hr[j, ..., 0])
                for j, f in enumerate(frames)
            )
        ]
        assert hits, "no common position of the k crops"


@pytest.mark.parametrize("target_frame,target", [("last", 2), ("center", 1), ("0", 0)])
def test_every_lr_frame_is_the_lr_operator_of_its_hr_crop_under_the_samples_flips(
    seq_dir, target_frame, target
):
    src = source(seq_dir, target_frame=target_frame)
    batch = take(src.patch_dataset(), 1)[0]
    index = tf.constant(7, tf.int64)
    lr, hr = src.to_pairs({k: tf.constant(v) for k, v in batch.items()}, index)
    assert lr.shape == (6, 3, 4, 4, 1) and hr.shape == (6, 16, 16, 1)
    assert lr.dtype == tf.float32 and hr.dtype == tf.float32
    lr, hr = lr.numpy(), hr.numpy()
    assert 0 <= lr.min() and lr.max() <= 1 and 0 <= hr.min() and hr.max() <= 1
    np.testing.assert_allclose(lr * 255, np.round(lr * 255), atol=1e-3)  # the 8-bit grid
    v, h, t = (m.numpy() for m in random_masks(batch["hr"], "hv", True, tf.stack([3, index])))
    assert 0 < v.sum() < 6 or 0 < h.sum() < 6  # some samples flipped, some not
    m = crop_margin(4)

    def flipped(a, b):  # numpy reference of flip_batch for sample b: v, then h, then transpose
        a = a[::-1] if v[b] else a
        a = a[:, ::-1] if h[b] else a
        return a.swapaxes(0, 1) if t[b] else a

    for b in range(6):
        for j in range(3):
            crop = flipped(batch["hr"][b, j], b)
            want = make_lr(crop[None].astype(np.float32), 4, m).numpy()[0] / 255
            np.testing.assert_allclose(lr[b, j], want, atol=1e-6)
        want_hr = flipped(batch["hr"][b, target], b)[m:-m, m:-m] / 255
        np.testing.assert_allclose(hr[b], want_hr, atol=1e-6)


def test_one_frame_gives_the_single_image_contract(seq_dir):
    src = source(seq_dir, frames=1, frame_stride=1)
    lr, hr = next(iter(src.dataset()))
    assert lr.shape == (6, 4, 4, 1) and hr.shape == (6, 16, 16, 1)
    assert len(src.sequences.window_seq) == 12 + 7 + 9  # every frame a sample


def test_a_resumed_stream_continues_bit_for_bit_and_pipelines_are_disjoint(seq_dir):
    src = source(seq_dir)
    whole = take(src.patch_dataset(), 9)
    tail = take(src.patch_dataset(start=5), 4)
    for a, b in zip(whole[5:], tail):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    shares = [
        {int(w) for batch in take(src.patch_dataset(0, 3, (i, 2)), 10) for w in batch["window"]}
        for i in range(2)
    ]
    assert shares[0] and shares[1] and not shares[0] & shares[1]
    assert all(w % 2 == 0 for w in shares[0]) and all(w % 2 == 1 for w in shares[1])


def test_decoded_frames_stay_within_the_bound_whatever_the_sequence_length(tmp_path):
    """One sequence of 150 frames, a pool bound of 12 frames: the frames alive (pool, decoding
    ahead, decoded ahead) never exceed it, while the stream goes through most of the frames."""
    root = write_sequences(tmp_path / "long", (150,), size=(40, 40), step=(1, 1))
    src = source(
        root,
        batch_size=4,
        patch_size=8,
        frame_stride=1,
        pool_frames=12,
        decode_workers=1,
        patches_per_window=2,
    )
    assert src.pool_windows(10**6) == 12 // 3 - 2
    batches = take(src.patch_dataset(), 150)
    pool = src.pool
    assert 3 <= pool.peak_frames <= 12
    assert pool.frame_decodes > 100  # the pool kept replacing windows
    drawn = {int(w) for b in batches for w in b["window"]}
    assert len(drawn) > 100
    # the megabyte bound binds the same way: 40x40 frames, 3 windows + 2 ahead of 3 frames
    small = source(root, pool_frames=10**6, pool_memory_mb=15 * 1600 / 2**20, decode_workers=1)
    assert small.pool_windows(10**6) == 3
    # a bound that cannot hold one window plus those decoded ahead fails in prepare(), as a
    # config error (train.py: exit code 2)
    with pytest.raises(ConfigError, match=r"data.pool_memory_mb=.* cannot hold 3 windows"):
        source(root, pool_frames=10**6, pool_memory_mb=8 * 1600 / 2**20, decode_workers=1)


def test_sequences_shorter_than_a_window_are_skipped_with_one_warning(tmp_path, caplog):
    root = write_sequences(tmp_path / "s", (9, 3, 4))
    with caplog.at_level(logging.WARNING, logger="sr.data.sequence"):
        s = scan_sequences(root, frames=3, stride=2, min_size=32)
    assert s.names == ("clip0",)
    warnings = [r.getMessage() for r in caplog.records]
    assert (
        len(warnings) == 1
        and "clip1 (3 frames)" in warnings[0]
        and "clip2 (4 frames)" in warnings[0]
    )
    with pytest.raises(
        ImageFolderError, match=r"no sequence .* has 11 frames .*frames=3 at data.frame_stride=5"
    ):
        scan_sequences(root, frames=3, stride=5, min_size=32)


def test_frames_of_different_sizes_in_a_sequence_are_named(tmp_path):
    root = write_sequences(tmp_path / "s", (5, 5))
    Image.fromarray(photo("camera")[:70, :80]).save(root / "clip1" / "frame3.png")
    with pytest.raises(
        ImageFolderError,
        match=r"clip1: frames differ in size; frame0.png is 80x72 .*frame3.png \(80x70\)",
    ):
        scan_sequences(root, frames=2, stride=1, min_size=32)


def test_decoded_frames_of_different_sizes_are_named():
    check_same_size("sequence clip1", "frame0.png", (72, 80, 3), "frame1.png", (72, 80))
    with pytest.raises(
        ImageFolderError,
        match=r"^sequence clip1: frames differ in size; frame0.png is 80x72 but frame3.png is "
        r"80x70: the frames of a sequence must share one size$",
    ):
        check_same_size("sequence clip1", "frame0.png", (72, 80, 3), "frame3.png", (70, 80, 3))


def test_target_index_reads_the_names_of_targets_and_indices_as_text():
    assert TARGETS == ("last", "center")
    assert [target_index(5, t) for t in (*TARGETS, 0, "3")] == [4, 2, 0, 3]
    for bad in ("-1", 5, True, "first"):
        with pytest.raises(ValueError, match="is not a frame of the window of data.frames=5"):
            target_index(5, bad)


def test_loose_images_without_subfolders_get_the_expected_layout(tmp_path, photo_dir):
    with pytest.raises(
        ImageFolderError,
        match=r"holds 7 loose image\(s\) and no subfolder .* one subfolder per sequence "
        r".*clip_001/frame_0001.png",
    ):
        scan_sequences(photo_dir, frames=3, stride=1, min_size=32)
    with pytest.raises(ImageFolderError, match="does not exist"):
        scan_sequences(tmp_path / "missing", frames=3, stride=1, min_size=32)


@pytest.mark.parametrize(
    "override,message",
    [
        ("data.target_frame=center", None),
        ("data.target_frame=3", r"target_frame=3 is not a frame of the window of data.frames=3"),
        ("data.target_frame=first", r"data.target_frame must be last, center or a frame index"),
        ("data.frames=0", r"data.frames must be an integer >= 1"),
        ("data.frame_stride=0", r"data.frame_stride must be an integer >= 1"),
        ("data.pool_frames=8", r"data.pool_frames must be >= 15"),
        ("data.lr_dir=/tmp", r"data.lr_dir=/tmp is not supported by data=sequence"),
        ("+data.pool_size=3", r"data.pool_size is a key of data=generator"),
    ],
)
@pytest.mark.slow
def test_config_values_are_checked_at_start_up(compose, override, message):
    cfg = compose("data=sequence", override)
    if message is None:
        assert build_source(cfg).target == 1
        return
    with pytest.raises(ConfigError, match=message):
        build_source(cfg)


def test_target_and_border_windows():
    assert target_index(4, "last") == 3 and target_index(5, "center") == 2
    with pytest.raises(ValueError, match="center needs an odd data.frames, got 4"):
        target_index(4, "center")
    # evaluation windows: clamped to the sequence, border frames stand in
    assert window_frames(0, 10, 3, 2, target=2) == [0, 0, 0]
    assert window_frames(3, 10, 3, 2, target=2) == [0, 1, 3]
    assert window_frames(9, 10, 3, 2, target=1) == [7, 9, 9]
    assert window_frames(5, 10, 1, 1, target=0) == [5]


def test_a_single_frame_model_on_multi_frame_data_is_refused(compose, tmp_path):
    from sr.loading.models import build_model
    from sr.train.app import check_model_input

    cfg = compose("data=sequence", "model=espcn")
    with pytest.raises(
        ConfigError, match=r"takes 1 LR frame\(s\) per sample but the data give 3 .*model=espcn_mf"
    ):
        check_model_input(build_model(cfg), cfg, 3)
    cfg = compose("data=sequence", "model=espcn_mf", "data.frames=2")
    check_model_input(build_model(cfg), cfg, 2)  # espcn_mf follows data.frames
    assert build_model(cfg).inputs[0].shape[1] == 2
    cfg = compose("data=generator", "model=espcn_mf")
    check_model_input(build_model(cfg), cfg, 1)  # outside data=sequence: ESPCN itself


def test_frames_are_decoded_once_when_windows_share_them(seq_dir):
    """With stride 1 the windows of a sequence overlap; when every window is held, each frame is
    decoded once (weak cache), not k times."""
    src = source(seq_dir, frame_stride=1, pool_frames=600)
    take(src.patch_dataset(), 3)
    assert src.pool.keep_all
    assert src.pool.frame_decodes == len(src.sequences.files)
    assert list(itertools.islice(src.pool.window_frames(0), 3)) == [0, 1, 2]


@pytest.mark.slow
def test_training_on_sequences_validates_on_sequences_and_resumes(tmp_path, compose, caplog):
    """train.py's run(): espcn_mf on windows of 3, validation on every frame of the validation
    sequences (bicubic of the target frame beside it), a resume continuing the batch stream."""
    from sr.core.frames import list_sequences
    from sr.evaluation import evaluate_sequences
    from sr.train.app import run

    train_dir = write_sequences(tmp_path / "train", (8, 6, 7))
    val_dir = write_sequences(tmp_path / "val", (4, 3), size=(48, 56), names=("camera", "moon"))
    common = [
        "data=sequence",
        "model=espcn_mf",
        "model.features=[8,8]",
        f"data.hr_dir={train_dir}",
        f"data.val_dir={val_dir}",
        "data.batch_size=4",
        "data.patch_size=16",
        "train.steps=4",
        "train.log_every=2",
    ]
    first = run(compose(*common), tmp_path / "run")
    assert first["step"] == 4 and np.isfinite(first["val/psnr"])
    bicubic = evaluate_sequences(None, list_sequences(val_dir), 4, 3, 1, 2)
    assert bicubic["n"] == 7  # every frame of both sequences
    assert first["val/psnr_bicubic"] == pytest.approx(bicubic["psnr_bicubic"], abs=1e-9)
    with caplog.at_level(logging.INFO):
        again = run(
            compose(*common, "train.steps=6", f"resume={tmp_path / 'run'}"), tmp_path / "run"
        )
    assert again["step"] == 6
    assert "continuing the checkpoint's batch stream at batch 4" in caplog.text


@pytest.mark.slow
def test_the_sequence_demo_command_trains_a_multi_frame_model(tmp_path, compose, caplog):
    """`python train.py data=sequence model=espcn_mf` on a fresh clone: the demo sequences are
    written and the run ends with a validation PSNR beside bicubic's (shortened to 4 steps).
    Run in this process through train.py's ``train`` on the same composed config (the exit
    code its ``main`` exits with, the lines it logs); the README's command through train.py
    itself, Hydra and the demo photos: tests/test_train.py's
    test_the_default_command_trains_on_the_demo_photos."""
    import re

    from sr.config import PROJECT_ROOT
    from tests.fake_run import load_script

    cfg = compose("data=sequence", "model=espcn_mf", "train.steps=4", "train.log_every=2")
    with caplog.at_level(logging.INFO):
        code, final = load_script("train", ".").train(cfg, tmp_path / "run")
    out = caplog.text
    assert code == 0 and final["step"] == 4, out
    demo = PROJECT_ROOT / "data" / "demo" / "sequences"
    assert len([p for p in (demo / "train").iterdir() if p.is_dir()]) >= 10
    assert "model espcn_mf3_x4" in out
    assert re.search(r"final step 4: val PSNR [\d.]+ dB vs bicubic [\d.]+ dB", out), out
