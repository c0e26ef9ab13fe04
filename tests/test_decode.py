"""The fast decoders (``imagecodecs``) give Pillow's pixels, bit for bit, for every format and
mode, and fall back to Pillow for everything else (``sr.core.images.load_image``).

The reference is written out as an explicit Pillow decode (:func:`pillow_reference`), on real
photo content (scikit-image's photographs), for each file both with and without ``keep_alpha``.
Each case also states whether the fast path must take the file, so that a silent fallback cannot
make the identity test vacuous.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from PIL import ExifTags, Image, ImageOps

from sr.core import images
from sr.core.color import y_channel
from sr.core.images import ImageFolderError, load_image, load_y
from tests.conftest import photo

codecs = pytest.importorskip("imagecodecs")
ORIENTATION = ExifTags.Base.Orientation


def pillow_reference(path, keep_alpha: bool = False) -> np.ndarray:
    """What ``load_image`` returns, decoded by Pillow alone (the contract of load_image)."""
    with Image.open(path) as im:
        im.load()
        im = ImageOps.exif_transpose(im)
        if im.mode == "P":
            im = im.convert("RGBA" if "transparency" in im.info else "RGB")
        elif im.mode == "PA":
            im = im.convert("RGBA")
        if keep_alpha and im.mode in ("LA", "RGBA"):
            return np.asarray(im)
        if im.mode in ("L", "LA"):
            return np.asarray(im.getchannel(0))[..., None]
        if im.mode.startswith("I"):
            return (
                (np.asarray(im, np.float64) / 257).round().clip(0, 255).astype(np.uint8)[..., None]
            )
        if im.mode == "1":
            return np.asarray(im.convert("L"))[..., None]
        return np.asarray(im.convert("RGB"))


def write_png(path, arr, ctype: int, depth: int, interlace=False, chunks=(), after=()):
    """A PNG written by hand (for the layouts Pillow cannot write: 16-bit RGB/RGBA/LA, Adam7):
    ``arr`` [H, W(, C)] of samples, ``chunks``/``after`` (type, data) before/after IDAT."""
    arr = np.asarray(arr)
    h, w = arr.shape[:2]
    samples = arr.reshape(h, w, -1).astype(">u2" if depth == 16 else np.uint8)

    def rows(a):  # filter type 0 before every row; 4-bit gray: two samples a byte
        if depth == 4:
            a = (a[:, 0::2] << 4) | a[:, 1::2]
        return b"".join(b"\0" + a[y].tobytes() for y in range(a.shape[0]))

    if interlace:  # Adam7: seven sub-images, each row filtered on its own
        passes = ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2))
        passes += ((0, 1, 2, 2), (1, 0, 2, 1))
        raw = b"".join(
            rows(samples[y0::dy, x0::dx])
            for y0, x0, dy, dx in passes
            if samples[y0::dy, x0::dx].size
        )
    else:
        raw = rows(samples)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace))
    body = chunk(b"IHDR", ihdr) + b"".join(chunk(k, d) for k, d in chunks)
    body += chunk(b"IDAT", zlib.compress(raw)) + b"".join(chunk(k, d) for k, d in after)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b""))
    return path


def exif_bytes(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    return exif.tobytes()


@pytest.fixture(scope="module")
def content():
    """Real photo crops: RGB, gray, and a 16-bit version with the low byte filled."""
    rgb = photo("astronaut")[40:136, 100:220]  # 96 x 120
    gray = photo("camera")[60:156, 80:200]
    rng = np.random.default_rng(0)
    alpha = photo("coffee")[:96, :120, 0]
    rgb16 = rgb.astype(np.uint16) * 257 + rng.integers(0, 257, rgb.shape).astype(np.uint16)
    gray16 = gray.astype(np.uint16) * 256 + rng.integers(0, 256, gray.shape).astype(np.uint16)
    return rgb, gray, alpha, rgb16, gray16


def png_cases(d, content):
    """name -> (path, whether the fast path decodes it)."""
    rgb, gray, alpha, rgb16, gray16 = content
    a16 = alpha.astype(np.uint16) * 257
    pal = Image.fromarray(rgb).quantize(64)
    cases = {}

    def save(name, im, fast, **kw):
        im.save(d / name, **kw)
        cases[name] = (d / name, fast)

    save("rgb8.png", Image.fromarray(rgb), True)
    save(
        "rgb8_trns.png", Image.fromarray(rgb), True, transparency=tuple(int(v) for v in rgb[5, 7])
    )
    save("rgb8_text.png", Image.fromarray(rgb), True, pnginfo=_text("Software", "test"))
    save("gray8.png", Image.fromarray(gray), True)
    save("gray8_trns.png", Image.fromarray(gray), True, transparency=int(gray[3, 3]))
    save("gray16.png", Image.fromarray(gray16), True)
    save("rgba8.png", Image.fromarray(np.dstack([rgb, alpha])), True)
    save("la8.png", Image.fromarray(np.dstack([gray, alpha]), "LA"), True)
    save("palette.png", pal, False)
    save("palette_trns.png", pal, False, transparency=3)
    save("palette_4bit.png", Image.fromarray(rgb).quantize(16), False, bits=4)
    save("bilevel.png", Image.fromarray(gray).convert("1"), False)
    for o in range(1, 9):  # eXIf chunk (Pillow writes it before IDAT)
        save(f"rgb8_exif{o}.png", Image.fromarray(rgb), True, exif=exif_bytes(o))
    for name, arr, ctype, depth, fast in (
        ("rgb16.png", rgb16, 2, 16, True),
        ("rgba16.png", np.dstack([rgb16, a16]), 6, 16, True),
        ("la16.png", np.dstack([gray16, a16]), 4, 16, False),  # Pillow: RGBA
        ("gray4.png", gray >> 4, 0, 4, False),
    ):
        cases[name] = (write_png(d / name, arr, ctype, depth), fast)
    # interlaced: Pillow (libpng would log a warning for each file)
    cases["rgb8_adam7.png"] = (write_png(d / "rgb8_adam7.png", rgb, 2, 8, interlace=True), False)
    cases["gray16_adam7.png"] = (
        write_png(d / "gray16_adam7.png", gray16, 0, 16, interlace=True),
        False,
    )
    cases["rgb8_exif6_after_idat.png"] = (
        write_png(d / "rgb8_exif6_after_idat.png", rgb, 2, 8, after=[(b"eXIf", exif_bytes(6))]),
        True,
    )
    xmp = b"XML:com.adobe.xmp\0\0\0\0\0<x:xmpmeta><tiff:Orientation>8</tiff:Orientation>"
    cases["rgb8_xmp8.png"] = (
        write_png(d / "rgb8_xmp8.png", rgb, 2, 8, chunks=[(b"iTXt", xmp + b"</x:xmpmeta>")]),
        False,
    )
    cases["apng.png"] = (
        write_png(d / "apng.png", rgb, 2, 8, chunks=[(b"acTL", struct.pack(">II", 1, 0))]),
        False,
    )
    return cases


def _text(key, value):
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text(key, value)
    return info


def jpeg_cases(d, content):
    rgb, gray, *_ = content
    cases = {}

    def save(name, im, fast, **kw):
        im.save(d / name, **kw)
        cases[name] = (d / name, fast)

    save("rgb420.jpg", Image.fromarray(rgb), True, quality=90)
    save("rgb444.jpg", Image.fromarray(rgb), True, quality=95, subsampling=0)
    save("rgb422.jpg", Image.fromarray(rgb), True, quality=85, subsampling=1)
    save("rgb_progressive.jpg", Image.fromarray(rgb), True, quality=90, progressive=True)
    save("rgb_odd_size.jpg", Image.fromarray(rgb[:93, :117]), True, quality=90)
    save("gray.jpg", Image.fromarray(gray), True, quality=90)
    save("cmyk.jpg", Image.fromarray(rgb).convert("CMYK"), False, quality=90)
    for o in range(1, 9):
        save(f"rgb_exif{o}.jpg", Image.fromarray(rgb), True, quality=90, exif=exif_bytes(o))
    save("gray_exif6.jpg", Image.fromarray(gray), True, quality=90, exif=exif_bytes(6))
    junk = d / "rgb_trailing_junk.jpg"  # bytes after EOI: Pillow decodes it
    junk.write_bytes((d / "rgb420.jpg").read_bytes() + b"\0trailer")
    cases[junk.name] = (junk, False)
    return cases


@pytest.fixture(scope="module")
def files(tmp_path_factory, content):
    d = tmp_path_factory.mktemp("decode")
    return {**png_cases(d, content), **jpeg_cases(d, content)}


def _fast(path, keep_alpha):
    with images._open(path) as im:
        return images._decode_fast(path, im, keep_alpha)


@pytest.mark.parametrize("keep_alpha", [False, True])
def test_every_format_and_mode_equals_pillow(files, keep_alpha):
    assert images.FAST_DECODE
    for name, (path, fast) in files.items():
        want = pillow_reference(path, keep_alpha)
        got = load_image(path, keep_alpha=keep_alpha)
        assert got.dtype == np.uint8 and got.flags.c_contiguous, name
        np.testing.assert_array_equal(got, want, err_msg=name)
        took = _fast(path, keep_alpha)
        assert (took is not None) == fast, f"{name}: fast path {'not ' * fast}taken"
        if took is not None:
            np.testing.assert_array_equal(took, want, err_msg=name)


def test_exif_orientation_turns_the_image(files):
    upright = load_image(files["rgb8.png"][0])
    assert load_image(files["rgb8_exif6.png"][0]).shape == (120, 96, 3)
    np.testing.assert_array_equal(load_image(files["rgb8_exif6.png"][0]), np.rot90(upright, -1))
    np.testing.assert_array_equal(
        load_image(files["rgb8_exif6_after_idat.png"][0]), np.rot90(upright, -1)
    )
    assert load_image(files["rgb8_xmp8.png"][0]).shape == (120, 96, 3)
    assert load_image(files["rgb_exif8.jpg"][0]).shape == (120, 96, 3)


def test_load_y_equals_y_channel_of_pillow(files):
    for name, (path, _) in files.items():
        np.testing.assert_array_equal(load_y(path), y_channel(pillow_reference(path)), name)


@pytest.mark.slow
def test_banded_y_of_an_image_equals_the_one_pass_formula_on_every_colour():
    # y_channel of an image [H, W, 3] works in cache-sized bands of rows; of a list of colours
    # [N, 3] in one pass (tests/test_color.py checks that one against scikit-image)
    v = np.arange(2**24, dtype=np.uint32)
    colours = np.stack([v >> 16, (v >> 8) & 255, v & 255], -1).astype(np.uint8)
    image = colours.reshape(4096, 4096, 3)
    from sr.core.color import _y_uint8

    one_pass = _y_uint8(colours)  # [N, 3]: not an image, no bands
    np.testing.assert_array_equal(y_channel(image).ravel(), one_pass)
    rgba = np.dstack([image[:64, :64], np.full((64, 64), 9, np.uint8)])
    np.testing.assert_array_equal(y_channel(rgba), y_channel(image[:64, :64]))


def test_a_failing_or_missing_decoder_falls_back_to_pillow(files, monkeypatch):
    path = files["rgb8.png"][0]
    jpeg = files["rgb420.jpg"][0]
    want, want_jpeg = pillow_reference(path), pillow_reference(jpeg)

    def fail(*a, **k):
        raise RuntimeError("decoder broke")

    monkeypatch.setattr(codecs, "png_decode", fail)
    monkeypatch.setattr(codecs, "jpeg8_decode", fail)
    np.testing.assert_array_equal(load_image(path), want)
    np.testing.assert_array_equal(load_image(jpeg), want_jpeg)
    monkeypatch.setattr(images, "FAST_DECODE", False)  # as without imagecodecs
    assert _fast(path, False) is None
    np.testing.assert_array_equal(load_image(path), want)


def test_truncated_files_are_rejected_as_before(files, tmp_path):
    for name in ("rgb8.png", "rgb420.jpg", "rgb_progressive.jpg"):
        data = files[name][0].read_bytes()
        cut = tmp_path / f"cut_{name}"
        cut.write_bytes(data[: len(data) * 2 // 3])
        with pytest.raises(ImageFolderError, match="cut_"):
            load_image(cut)


def test_real_photos_decode_identically():
    from tests.conftest import SHARED

    folder = SHARED / "hr_sample"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    paths = sorted(folder.glob("*.jpg"))[:3]
    paths += sorted((SHARED / "Set14").glob("*.png"))[:3] + [SHARED / "Set14" / "bridge.png"]
    for path in paths:  # Set14's bridge.png is gray
        if path.is_file():
            np.testing.assert_array_equal(load_image(path), pillow_reference(path), path.name)
            assert _fast(path, False) is not None, path.name


def test_image_size_from_png_chunks_equals_pillow(files):
    """``image_size`` reads a PNG's size and EXIF orientation from its chunks (no inflate); every
    case of the decode table, EXIF before and after the pixels included, gets Pillow's answer."""
    read_chunks = 0
    for name, (path, _) in files.items():
        with Image.open(path) as im:
            turned = im.getexif().get(ORIENTATION, 1) in (5, 6, 7, 8)
            want = (im.width, im.height) if turned else (im.height, im.width)
        assert images.image_size(path) == want == load_image(path).shape[:2], name
        read_chunks += images._png_size(path) is not None
    assert read_chunks >= 10  # the fast path was taken, not only Pillow's
