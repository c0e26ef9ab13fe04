"""Listing and decoding the image folder: the only place that reads image files.

Every loader, script and test reads images through :func:`list_images`, :func:`load_image` and
:func:`load_y`, so that the Y channel and the rules for odd inputs (grayscale, RGBA, palette,
16-bit, EXIF orientation, oversized headers) are the same everywhere.

Settings:
    MAX_PIXELS: the largest image (width x height, pixels) this module decodes; a file whose header
        declares more is rejected with :class:`ImageFolderError` before its pixels are allocated
        (a "decompression bomb" guard). Default: Pillow's ``Image.MAX_IMAGE_PIXELS`` (89,478,485,
        about 9459 x 9459). Override with the environment variable ``SR_MAX_IMAGE_PIXELS``, which
        also raises Pillow's own limit.
    SR_IMAGE_DECODER: ``pillow`` decodes every file with Pillow; unset (or ``auto``), PNG and JPEG
        files of the common layouts are decoded by ``imagecodecs`` (libpng, libjpeg-turbo: faster
        than Pillow, ``docs/performance.md``), only where its pixels are Pillow's bit for bit (see
        :func:`_decode_fast`); every other file, and every file when ``imagecodecs`` is not
        installed or fails, is decoded by Pillow. The decoded arrays are the same either way.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import ExifTags, Image, ImageOps

from sr.core.color import y_channel
from sr.core.errors import ImageFolderError

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def _max_pixels_from_env() -> int:
    value = os.environ.get("SR_MAX_IMAGE_PIXELS")
    if value is None:
        return Image.MAX_IMAGE_PIXELS or 0
    try:
        pixels = int(value)
    except ValueError:
        pixels = 0
    if pixels < 1:
        raise ValueError(
            f"SR_MAX_IMAGE_PIXELS={value!r} is not a positive number of pixels: set it to e.g. "
            "200000000, or unset it for the default of 89478485"
        )
    Image.MAX_IMAGE_PIXELS = pixels  # Pillow would otherwise refuse images above twice its own
    return pixels


MAX_PIXELS = _max_pixels_from_env()
_ORIENTATION = ExifTags.Base.Orientation


def _too_large(path, detail: str) -> ImageFolderError:
    return ImageFolderError(
        f"image {path} is too large to decode: {detail}, above the limit of {MAX_PIXELS} pixels "
        "(sr.core.images.MAX_PIXELS); remove or replace it, or if it is genuine raise the limit "
        "with the environment variable SR_MAX_IMAGE_PIXELS=<pixels>"
    )


def _open(path) -> Image.Image:
    """``Image.open`` with the :data:`MAX_PIXELS` check on the header's size (no pixels decoded).

    Raises:
        ImageFolderError: if the header declares more than :data:`MAX_PIXELS` pixels.
        OSError, ValueError: as ``Image.open`` for unreadable files.
    """
    try:
        im = Image.open(path)
    except Image.DecompressionBombError as e:  # Pillow's own limit, 2x Image.MAX_IMAGE_PIXELS
        declared = re.search(r"\((\d+) pixels\)", str(e))  # "Image size (N pixels) exceeds ..."
        raise _too_large(path, f"{declared[1]} pixels" if declared else str(e)) from e
    if im.width * im.height > MAX_PIXELS:
        im.close()
        raise _too_large(path, f"{im.width}x{im.height} = {im.width * im.height} pixels")
    return im


# ------------------------------------------------------------------------------------------------
# Fast decoders: the same pixels as Pillow, or no answer (then Pillow decodes)
# ------------------------------------------------------------------------------------------------
# ``imagecodecs`` (libpng and libjpeg-turbo, one call without the GIL) decodes faster than Pillow
# (``docs/performance.md``, "Decoding"). It is used only for the layouts where its pixels are
# Pillow's, bit for bit (``tests/test_decode.py``); any other file, a failure, or a missing
# package falls back to Pillow, so the decoded data never depend on which packages are installed.
# ``SR_IMAGE_DECODER=pillow`` turns it off.
try:
    import imagecodecs as _codecs
except ImportError:  # optional at run time: Pillow decodes everything
    _codecs = None

FAST_DECODE = _codecs is not None and os.environ.get("SR_IMAGE_DECODER", "auto") != "pillow"

# (bit depth, colour type) of the PNGs decoded by libpng: gray, RGB, gray + alpha and RGBA of 8
# bits, and 16-bit gray, RGB and RGBA (scaled as Pillow scales them). Gray of 1, 2 and 4 bits,
# palettes (Pillow's colours for an index beyond the palette differ from libpng's), 16-bit
# gray + alpha (which Pillow opens as RGBA) and interlaced files (imagecodecs decodes them right
# but logs a libpng warning for each) go to Pillow.
_PNG_FAST = {(8, 0), (16, 0), (8, 2), (16, 2), (8, 4), (8, 6), (16, 6)}
# Chunks that change the pixels Pillow decodes or their orientation, or whose meaning Pillow and
# libpng may read differently: a file with any of them goes to Pillow.
_PNG_ANIMATION = {b"acTL", b"fcTL", b"fdAT"}
_PNG_TEXT = {b"tEXt", b"zTXt", b"iTXt"}
_PNG_ORIENTATION_TEXT = {b"Raw profile type exif", b"XML:com.adobe.xmp"}  # read by getexif()
_PNG_AFTER_IDAT = {b"IDAT", b"IEND", b"tIME", b"eXIf"} | _PNG_TEXT  # others there: Pillow
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# EXIF orientation -> the NumPy view of PIL.ImageOps.exif_transpose on an [H, W, ...] array
_TRANSPOSE = {
    2: lambda a: a[:, ::-1],  # FLIP_LEFT_RIGHT
    3: lambda a: a[::-1, ::-1],  # ROTATE_180
    4: lambda a: a[::-1],  # FLIP_TOP_BOTTOM
    5: lambda a: a.swapaxes(0, 1),  # TRANSPOSE
    6: lambda a: np.rot90(a, -1),  # ROTATE_270 (counter-clockwise)
    7: lambda a: a[::-1, ::-1].swapaxes(0, 1),  # TRANSVERSE
    8: lambda a: np.rot90(a, 1),  # ROTATE_90
}


def _png_orientation(data: bytes) -> int | None:
    """EXIF orientation of a PNG as Pillow's ``getexif()`` finds it (1 if none), from its
    chunks alone; None if Pillow must decode the file (animation, a chunk out of place, EXIF or
    XMP in a text chunk, several eXIf chunks, a malformed chunk list)."""
    pos, end, seen_idat, exif = 8, len(data), False, None
    while pos + 8 <= end:
        length, kind = struct.unpack_from(">I4s", data, pos)
        body = pos + 8
        pos = body + length + 4  # data and CRC
        if pos > end:
            return None
        if kind == b"IEND":
            break
        if kind in _PNG_ANIMATION or (seen_idat and kind not in _PNG_AFTER_IDAT):
            return None
        if kind == b"IDAT":
            seen_idat = True
        elif kind in _PNG_TEXT:
            if data[body : body + min(length, 80)].split(b"\0", 1)[0] in _PNG_ORIENTATION_TEXT:
                return None
        elif kind == b"eXIf":
            if exif is not None:
                return None
            exif = data[body : body + length]
    else:
        return None  # no IEND: Pillow decides (it may call the file truncated)
    if exif is None:
        return 1
    parsed = Image.Exif()
    parsed.load(b"Exif\x00\x00" + exif)  # as PngImagePlugin stores it in info["exif"]
    return parsed.get(_ORIENTATION, 1)


def _png_fast(data: bytes, keep_alpha: bool) -> tuple[np.ndarray, int] | None:
    """Pixels of a PNG as :func:`load_image` returns them, and its EXIF orientation; None if
    Pillow must decode it."""
    if data[:8] != _PNG_SIGNATURE or data[12:16] != b"IHDR" or len(data) < 33:
        return None
    width, height, depth, ctype, _, _, interlace = struct.unpack_from(">IIBBBBB", data, 16)
    if (depth, ctype) not in _PNG_FAST or interlace:
        return None
    orientation = _png_orientation(data)
    if orientation is None:
        return None
    arr = _codecs.png_decode(data)
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    # libpng turns a tRNS chunk into one more (alpha) channel; Pillow ignores it for these types
    if arr.shape[:2] != (height, width) or arr.dtype != (np.uint16 if depth == 16 else np.uint8):
        return None
    if arr.ndim == 2:
        arr = arr[..., None]
    if arr.shape[2] not in (channels, channels + (ctype in (0, 2))):
        return None
    arr = arr[..., :channels]
    if ctype == 0:
        arr = _gray16_to_uint8(arr) if depth == 16 else arr
    elif depth == 16:  # Pillow keeps the high byte of 16-bit RGB and RGBA ("RGB;16B")
        arr = (arr >> 8).astype(np.uint8)
    if ctype in (4, 6) and not keep_alpha:
        arr = arr[..., : channels - 1]
    return arr, orientation


def _jpeg_fast(data: bytes, im: Image.Image) -> np.ndarray | None:
    """Pixels of a gray or YCbCr/RGB JPEG as Pillow decodes them (libjpeg-turbo, accurate integer
    IDCT and fancy upsampling, the defaults of both); None if Pillow must decode it.

    libjpeg-turbo reading from memory pads a truncated file silently where Pillow raises "image
    file is truncated", so only files that end with the EOI marker are decoded here.
    """
    if im.mode not in ("L", "RGB") or not data.endswith(b"\xff\xd9"):
        return None
    arr = _codecs.jpeg8_decode(data)
    want = (im.height, im.width) + ((3,) if im.mode == "RGB" else ())
    if arr.shape != want or arr.dtype != np.uint8:
        return None
    return arr if arr.ndim == 3 else arr[..., None]


def _decode_fast(path, im: Image.Image, keep_alpha: bool) -> np.ndarray | None:
    """:func:`load_image`'s array by ``imagecodecs``, or None where Pillow must decode (another
    format or layout, the package missing or failing: Pillow then decodes or raises as always).
    ``im`` is the file opened by :func:`_open` (header read, size checked, no pixels decoded)."""
    if not FAST_DECODE or im.format not in ("PNG", "JPEG"):
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
        if im.format == "PNG":
            got = _png_fast(data, keep_alpha)
            if got is None:
                return None
            arr, orientation = got
        else:
            arr = _jpeg_fast(data, im)
            if arr is None:
                return None
            orientation = im.getexif().get(_ORIENTATION, 1)  # JPEG: read with the header
    except Exception as e:  # noqa: BLE001 - any failure: Pillow decodes (or names the error)
        log.debug("imagecodecs could not decode %s (%s); decoding with Pillow", path, e)
        return None
    turn = _TRANSPOSE.get(orientation)
    return arr if turn is None else turn(arr)


def _gray16_to_uint8(arr: np.ndarray) -> np.ndarray:
    """16-bit gray to 8 bits: ``round(v / 257)`` (exact: 0 -> 0, 65535 -> 255)."""
    return (np.asarray(arr, dtype=np.float64) / 257.0).round().clip(0, 255).astype(np.uint8)


def list_images(folder: str | os.PathLike) -> list[Path]:
    """PNG and JPEG files directly in ``folder``, sorted by name.

    Raises:
        ImageFolderError: if the folder does not exist or holds no PNG or JPEG file.
    """
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ImageFolderError(
            f"image folder {folder} is a file, not a folder: set data.hr_dir (or data.val_dir) "
            "to the folder that holds the PNG or JPEG images"
        )
    if not folder.is_dir():
        raise ImageFolderError(
            f"image folder {folder} does not exist: set data.hr_dir (or data.val_dir) to a folder "
            "of PNG or JPEG images, or run without overrides to use the demo photos"
        )
    files = sorted(
        p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()
    )
    if not files:
        raise ImageFolderError(
            f"image folder {folder} holds no .png, .jpg or .jpeg file{_sequence_hint(folder)}"
        )
    return files


def check_output_folder(folder, option: str) -> None:
    """``folder`` (given as ``option``) can hold written images: a folder, or a path where one
    can be made; checked before any work.

    Raises:
        ValueError: naming the file in the way (``folder`` itself, or a parent of it).
    """
    if folder is None:
        return
    path = Path(folder).expanduser()
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        where = "" if existing == path else f" (its parent {existing} is)"
        raise ValueError(
            f"{option} {folder} is a file, not a folder{where}: give a folder (new or existing) "
            "for the images it writes"
        )


def _sequence_hint(folder: Path) -> str:
    """For a folder without images whose subfolders hold some (a folder of sequences): the
    options that read it; else ``""``."""
    subs = [
        p.name
        for p in sorted(folder.iterdir())
        if p.is_dir()
        and not p.name.startswith(".")
        and any(q.suffix.lower() in IMAGE_SUFFIXES for q in p.iterdir())
    ]
    if not subs:
        return ""
    listed = ", ".join(subs[:3]) + (", ..." if len(subs) > 3 else "")
    return (
        f", but {len(subs)} subfolder(s) of images ({listed}): a folder of sequences? Score it "
        "frame by frame with evaluate.py --sequences, or train on it with data=sequence"
    )


def load_image(path: str | os.PathLike, keep_alpha: bool = False) -> np.ndarray:
    """Decode an image to uint8 ``[H, W, 1]`` (grayscale) or ``[H, W, 3]`` (RGB).

    Palette images are expanded, 16-bit grayscale is scaled to 8 bits, CMYK is converted to RGB.
    Alpha is dropped, unless ``keep_alpha``: then gray + alpha gives ``[H, W, 2]`` and RGBA (also
    a palette with transparency, or premultiplied alpha) gives ``[H, W, 4]``. The EXIF orientation
    tag is applied (``PIL.ImageOps.exif_transpose``), so a portrait phone photo comes out upright,
    ``H`` and ``W`` as displayed.

    Raises:
        ImageFolderError: if the file cannot be decoded, or its header declares more than
            :data:`MAX_PIXELS` pixels (names the file and the fix).
    """
    try:
        with _open(path) as im:
            arr = _decode_fast(path, im, keep_alpha)  # None: Pillow decodes
            if arr is None:
                arr = _decode_pillow(im, keep_alpha)
    except ImageFolderError:
        raise
    except (OSError, ValueError) as e:  # PIL raises these for truncated or unknown files
        raise ImageFolderError(f"cannot decode image {path}: {e}; remove or replace it") from e
    return np.ascontiguousarray(arr)


def _decode_pillow(im: Image.Image, keep_alpha: bool) -> np.ndarray:
    """:func:`load_image`'s array decoded by Pillow from the opened file ``im``."""
    im.load()
    if im.getexif().get(_ORIENTATION, 1) != 1:
        im = ImageOps.exif_transpose(im)
    mode = im.mode
    if mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    elif mode == "PA":
        im = im.convert("RGBA")
    elif mode in ("La", "RGBa"):  # premultiplied alpha
        im = im.convert(mode[:-1] + "A")
    mode = im.mode
    if keep_alpha and mode in ("LA", "RGBA"):
        return np.asarray(im)
    if mode in ("L", "LA"):
        return np.asarray(im.getchannel(0))[..., None]
    if mode in ("I;16", "I;16B", "I;16L", "I"):
        return _gray16_to_uint8(np.asarray(im))[..., None]
    if mode in ("1",):
        return np.asarray(im.convert("L"))[..., None]
    return np.asarray(im.convert("RGB") if mode != "RGB" else im)


def load_y(path: str | os.PathLike) -> np.ndarray:
    """Decode an image and return its Y channel as uint8 ``[H, W]`` (``sr.core.color.y_channel``:
    16..235 for RGB input, rounded; a grayscale image is its own Y).

    Raises:
        ImageFolderError: if the file cannot be decoded.
    """
    return y_channel(load_image(path))


def load_rgb(path: str | os.PathLike) -> tuple[np.ndarray, bool]:
    """Decode an image as RGB, for ``data.lr_from=rgb``.

    Returns:
        ``(rgb, gray)``: uint8 ``[H, W, 3]`` (a grayscale image's value in all three channels)
        and whether the image is grayscale (then it is its own Y: ``sr.core.color.y_channel``).

    Raises:
        ImageFolderError: if the file cannot be decoded.
    """
    image = load_image(path)
    if image.shape[-1] == 1:
        return np.repeat(image, 3, axis=-1), True
    return image, False


def _png_size(path) -> tuple[int, int] | None:
    """:func:`image_size` of a PNG from its IHDR and chunk list (:func:`_png_orientation`),
    reading the file's bytes without inflating them; None where Pillow must answer (not a PNG,
    a chunk list Pillow may read otherwise, or a size above :data:`MAX_PIXELS`, which Pillow
    then reports). Pillow's ``getexif()`` on a PNG decodes the whole image to reach chunks after
    the pixels; this reads the chunk list only."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:8] != _PNG_SIGNATURE or data[12:16] != b"IHDR" or len(data) < 33:
        return None
    width, height = struct.unpack_from(">II", data, 16)
    if not width or not height or width * height > MAX_PIXELS:
        return None
    orientation = _png_orientation(data)
    if orientation is None:
        return None
    return (width, height) if orientation in (5, 6, 7, 8) else (height, width)


def image_size(path: str | os.PathLike) -> tuple[int, int]:
    """``(height, width)`` from the file header, without decoding the pixels, as :func:`load_image`
    returns them (swapped when the EXIF orientation turns the image by 90 degrees).

    Raises:
        ImageFolderError: if the header cannot be read or declares more than :data:`MAX_PIXELS`
            pixels (names the file and the fix).
    """
    fast = _png_size(path)
    if fast is not None:
        return fast
    try:
        with _open(path) as im:
            if im.getexif().get(_ORIENTATION, 1) in (5, 6, 7, 8):  # transposed or turned 90
                return im.width, im.height
            return im.height, im.width
    except ImageFolderError:
        raise
    except (OSError, ValueError) as e:
        raise ImageFolderError(f"cannot read image {path}: {e}; remove or replace it") from e


@dataclass(frozen=True)
class ImageSet:
    """The usable images of a folder (large enough for the crop), in name order."""

    folder: Path
    files: tuple[Path, ...]
    skipped: tuple[str, ...]  # "name (WxH)" of images smaller than the crop
    sizes: tuple[tuple[int, int], ...] = ()  # (height, width) of each file, from its header

    def fingerprint(self) -> str:
        """SHA-256 over every listed file's name, size in bytes and mtime in ns."""
        h = hashlib.sha256()
        for p in self.files:
            st = p.stat()
            h.update(f"{p.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return h.hexdigest()


def scan_folder(folder: str | os.PathLike, min_size: int, exclude=frozenset()) -> ImageSet:
    """List a folder's images and drop those smaller than ``min_size`` on either side, and
    those in ``exclude`` (paths, e.g. the images held out for validation).

    Logs one warning naming every skipped image.

    Raises:
        ImageFolderError: if the folder is missing, empty, or no image is large enough.
    """
    files = [p for p in list_images(folder) if p not in exclude]
    keep, skipped = [], []
    for p in files:
        h, w = image_size(p)
        (keep if min(h, w) >= min_size else skipped).append((p, f"{p.name} ({w}x{h})", (h, w)))
    if skipped:
        log.warning(
            "skipped %d image(s) of %s smaller than the %dx%d crop: %s",
            len(skipped),
            folder,
            min_size,
            min_size,
            ", ".join(s for _, s, _ in skipped),
        )
    if not keep:
        raise ImageFolderError(
            f"no image in {folder} is at least {min_size}x{min_size} pixels (the HR patch with "
            f"its margin); use larger images or a smaller data.patch_size"
        )
    return ImageSet(
        Path(folder),
        tuple(p for p, _, _ in keep),
        tuple(s for _, s, _ in skipped),
        tuple(hw for _, _, hw in keep),
    )


def lr_path_for(hr_path: Path, lr_dir: str | os.PathLike, scale: int) -> Path:
    """The pre-made LR file of ``hr_path``: DIV2K layout ``<stem>x<scale><suffix>`` (0001.png ->
    0001x4.png), else the same file name.

    Raises:
        ImageFolderError: if neither exists (names both candidates).
    """
    lr_dir = Path(lr_dir).expanduser()
    for name in (f"{hr_path.stem}x{scale}{hr_path.suffix}", hr_path.name):
        if (lr_dir / name).is_file():
            return lr_dir / name
    raise ImageFolderError(
        f"no LR image for {hr_path.name} in {lr_dir} (looked for {hr_path.stem}x{scale}"
        f"{hr_path.suffix} and {hr_path.name}); set data.lr_dir=null to make LR by bicubic"
    )


def load_y_pair(hr_path: Path, lr_dir, scale: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Y of an HR image and, when ``lr_dir`` is set, of its pre-made LR partner.

    Returns:
        ``(hr_y, lr_y)``: uint8 ``[H, W]`` and uint8 ``[H // scale, W // scale]`` or None.

    Raises:
        ImageFolderError: if the LR file is missing or its size is not the HR size / scale.
    """
    hr = load_y(hr_path)
    if lr_dir is None:
        return hr, None
    lr_path = lr_path_for(hr_path, lr_dir, scale)
    lr = load_y(lr_path)
    want = (hr.shape[0] // scale, hr.shape[1] // scale)
    if lr.shape != want:
        raise ImageFolderError(
            f"LR image {lr_path} is {lr.shape[1]}x{lr.shape[0]}, expected {want[1]}x{want[0]} "
            f"(HR {hr_path.name} / {scale})"
        )
    return hr, lr
