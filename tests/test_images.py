import logging
import struct
import zlib

import numpy as np
import pytest
from PIL import ExifTags, Image

from sr.core import images
from sr.core.images import (
    ImageFolderError,
    image_size,
    list_images,
    load_image,
    load_y,
    load_y_pair,
    scan_folder,
)
from tests.conftest import photo


def test_modes_rgb_gray_rgba_palette_16bit(tmp_path):
    rgb = photo("astronaut")[:64, :80]
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    Image.fromarray(rgb).save(tmp_path / "rgb.jpg", quality=95)
    Image.fromarray(np.dstack([rgb, np.full(rgb.shape[:2], 7, np.uint8)])).save(tmp_path / "a.png")
    pal = Image.fromarray(rgb).quantize(64)
    pal.save(tmp_path / "p.png")
    gray = photo("camera")[:64, :80]
    Image.fromarray(gray).save(tmp_path / "g.png")
    Image.fromarray(gray.astype(np.uint16) * 257).save(tmp_path / "g16.png")

    assert load_image(tmp_path / "rgb.png").shape == (64, 80, 3)
    np.testing.assert_array_equal(load_image(tmp_path / "a.png"), rgb)  # alpha dropped
    palette = load_image(tmp_path / "p.png")
    np.testing.assert_array_equal(palette, np.asarray(pal.convert("RGB")))
    np.testing.assert_array_equal(load_y(tmp_path / "g.png"), gray)
    np.testing.assert_array_equal(load_y(tmp_path / "g16.png"), gray)
    y = load_y(tmp_path / "rgb.jpg")
    assert y.dtype == np.uint8 and y.shape == (64, 80) and 16 <= y.min() and y.max() <= 235


def test_missing_and_empty_folders_are_named(tmp_path):
    with pytest.raises(ImageFolderError, match=str(tmp_path / "nope")):
        list_images(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    with pytest.raises(ImageFolderError, match="holds no .png"):
        list_images(tmp_path / "empty")


def test_small_images_skipped_with_one_warning(tmp_path, caplog):
    Image.fromarray(photo("camera")[:120, :130]).save(tmp_path / "big.png")
    Image.fromarray(photo("camera")[:100, :90]).save(tmp_path / "small1.png")
    Image.fromarray(photo("camera")[:50, :200]).save(tmp_path / "small2.png")
    with caplog.at_level(logging.WARNING):
        images = scan_folder(tmp_path, 112)
    assert [p.name for p in images.files] == ["big.png"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "small1.png (90x100)" in warnings[0] and "small2.png (200x50)" in warnings[0]
    with pytest.raises(ImageFolderError, match="no image .* is at least 200x200"):
        scan_folder(tmp_path, 200)


def test_corrupt_file_is_named(tmp_path):
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(ImageFolderError, match="bad.png"):
        load_y(tmp_path / "bad.png")


def test_premade_lr_lookup_and_size_check(tmp_path):
    hr = photo("camera")[:96, :96]
    (tmp_path / "hr").mkdir()
    (tmp_path / "lr").mkdir()
    Image.fromarray(hr).save(tmp_path / "hr" / "0001.png")
    Image.fromarray(hr[::4, ::4]).save(tmp_path / "lr" / "0001x4.png")
    got_hr, got_lr = load_y_pair(tmp_path / "hr" / "0001.png", tmp_path / "lr", 4)
    np.testing.assert_array_equal(got_lr, hr[::4, ::4])
    Image.fromarray(hr[::3, ::3]).save(tmp_path / "lr" / "0001x4.png")
    with pytest.raises(ImageFolderError, match="expected 24x24"):
        load_y_pair(tmp_path / "hr" / "0001.png", tmp_path / "lr", 4)
    with pytest.raises(ImageFolderError, match="no LR image for 0001.png"):
        load_y_pair(tmp_path / "hr" / "0001.png", tmp_path / "hr2", 4)


def test_keep_alpha(tmp_path):
    rgb = photo("astronaut")[:32, :40]
    alpha = np.full(rgb.shape[:2], 9, np.uint8)
    Image.fromarray(np.dstack([rgb, alpha])).save(tmp_path / "a.png")
    Image.fromarray(np.dstack([rgb[..., 0], alpha])).save(tmp_path / "la.png")
    np.testing.assert_array_equal(load_image(tmp_path / "a.png", keep_alpha=True)[..., 3], alpha)
    assert load_image(tmp_path / "la.png", keep_alpha=True).shape == (32, 40, 2)
    assert load_image(tmp_path / "la.png").shape == (32, 40, 1)


def write_bomb_png(path, width=40000, height=40000):
    """A tiny real PNG whose IHDR declares ``width x height`` (IHDR CRC fixed with zlib.crc32)."""
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(path)
    data = bytearray(path.read_bytes())
    assert data[12:16] == b"IHDR"  # 8-byte signature, 4-byte length, then the chunk type
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    path.write_bytes(bytes(data))


def test_a_header_declaring_a_huge_image_is_named_with_the_fix(tmp_path, monkeypatch):
    write_bomb_png(tmp_path / "bomb.png")
    for read in (load_image, image_size):
        with pytest.raises(ImageFolderError, match="bomb.png is too large to decode") as e:
            read(tmp_path / "bomb.png")
        assert "1600000000 pixels" in str(e.value) and "SR_MAX_IMAGE_PIXELS" in str(e.value)
    # the limit is a setting: a lowered one rejects an ordinary 64x80 image, by its size
    Image.fromarray(photo("camera")[:64, :80]).save(tmp_path / "ok.png")
    assert load_image(tmp_path / "ok.png").shape == (64, 80, 1)
    monkeypatch.setattr(images, "MAX_PIXELS", 5000)
    with pytest.raises(ImageFolderError, match=r"ok.png is too large .* 80x64 = 5120 pixels"):
        load_image(tmp_path / "ok.png")


def test_exif_orientation_is_applied(tmp_path):
    rgb = photo("astronaut")[:40, :64]  # landscape pixels, tagged "rotate 90 CW to display"
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = 6
    Image.fromarray(rgb).save(tmp_path / "portrait.jpg", quality=100, exif=exif)
    upright = load_image(tmp_path / "portrait.jpg")
    assert upright.shape == (64, 40, 3) and image_size(tmp_path / "portrait.jpg") == (64, 40)
    want = np.rot90(rgb, k=-1)  # 90 degrees clockwise
    assert np.abs(upright.astype(int) - want).mean() < 3  # JPEG error only
    assert np.abs(upright.astype(int) - np.rot90(rgb, k=1)).mean() > 20  # not the other way
