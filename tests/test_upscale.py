"""scripts/upscale.py and sr.inference: Y by the model, chroma and alpha by bicubic, sizes and
modes, tiled == untiled, errors naming the files."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import skimage.color
import tensorflow as tf
from PIL import Image

from sr.core.color import rgb_to_ycbcr, y_channel, ycbcr_to_rgb
from sr.core.degrade import bicubic_upscale, quantize
from sr.inference import Upscaler, default_overlap, read_image, receptive_radius
from sr.loading.models import load_model_from_run
from sr.models.registry import make_model
from tests.conftest import photo
from tests.fake_run import load_script, make_run

upscale = load_script("upscale")


def crop(name: str, h: int, w: int, y: int = 100, x: int = 120) -> np.ndarray:
    return np.ascontiguousarray(photo(name)[y : y + h, x : x + w])


def bicubic_model(x, training=False):
    """A "model" that is the project's bicubic on Y: the upscaler must then reproduce the
    bicubic upscale of the whole RGB image (the colour transforms and bicubic are linear)."""
    return bicubic_upscale(x, 4)


@pytest.fixture(scope="module")
def tiny_edsr():
    """A model whose output depends on a wide neighbourhood and stays mid-range (EDSR adds 0.5)."""
    keras.utils.set_random_seed(1)
    return make_model("edsr", 4, features=8, blocks=1)


def test_ycbcr_matches_matlab_rgb2ycbcr_and_inverts():
    rgb = crop("astronaut", 40, 50)
    ycbcr = rgb_to_ycbcr(rgb)
    reference = skimage.color.rgb2ycbcr(rgb)  # MATLAB rgb2ycbcr: Y 16..235, Cb/Cr 16..240
    np.testing.assert_allclose(ycbcr, reference, atol=1e-9)
    np.testing.assert_array_equal(ycbcr[..., 0], y_channel(rgb.astype(np.float64)))  # one Y
    np.testing.assert_allclose(ycbcr_to_rgb(ycbcr), rgb, atol=1e-9)
    tf_rgb = ycbcr_to_rgb(rgb_to_ycbcr(tf.constant(rgb)))
    assert tf_rgb.dtype == tf.float32
    np.testing.assert_allclose(tf_rgb.numpy(), rgb, atol=1e-3)
    with pytest.raises(ValueError, match=r"needs \[..., 3\] input, got shape \(2, 4\)"):
        rgb_to_ycbcr(np.zeros((2, 4)))


def test_y_by_model_and_chroma_by_bicubic_reproduce_rgb_bicubic():
    rgb = crop("coffee", 30, 41)
    out = Upscaler(bicubic_model, 4, overlap=2)(rgb)
    reference = quantize(bicubic_upscale(rgb, 4)).numpy()
    assert out.shape == (120, 164, 3) and out.dtype == np.uint8
    assert np.abs(out.astype(int) - reference).max() <= 1
    assert np.mean(out == reference) > 0.99


def test_alpha_by_bicubic_and_gray_through_the_model():
    keras.utils.set_random_seed(0)
    model = make_model("espcn", 4, features=(8, 8))
    rgba = np.concatenate([crop("rocket", 21, 26), crop("camera", 21, 26)[..., None]], axis=-1)
    out = Upscaler(model, 4)(rgba)
    assert out.shape == (84, 104, 4)
    np.testing.assert_array_equal(out[..., 3], quantize(bicubic_upscale(rgba[..., 3:], 4))[..., 0])

    gray = crop("camera", 19, 22)[..., None]
    out = Upscaler(model, 4)(gray)
    expected = quantize(model(gray[None] / 255.0) * 255.0)[0].numpy()
    assert out.shape == (76, 88, 1)
    assert np.abs(out.astype(int) - expected).max() <= 1  # graph vs eager float rounding
    assert np.mean(out == expected) > 0.99


def test_the_y_of_the_output_is_the_models(tiny_edsr):
    rgb = crop("chelsea", 24, 30)
    out = Upscaler(tiny_edsr, 4)(rgb)
    y = y_channel(rgb.astype(np.float32)).astype(np.float32)
    sr_y = tiny_edsr(y[None, ..., None] / 255.0)[0].numpy() * 255.0
    inside = np.all((out > 0) & (out < 255), axis=-1)  # not clipped
    assert inside.mean() > 0.9
    # 8-bit rounding of R, G, B moves Y by at most (65.481 + 128.553 + 24.966) / 255 / 2 = 0.43
    assert np.abs(y_channel(out.astype(np.float64)) - sr_y[..., 0])[inside].max() < 0.44


def test_receptive_radius_bounds_the_real_field(tiny_edsr):
    keras.utils.set_random_seed(0)
    espcn = make_model("espcn", 4, features=(8, 8))
    assert receptive_radius(espcn) == 4.0  # 5x5, 3x3, 3x3 at LR
    assert default_overlap(espcn) == 6
    assert receptive_radius(make_model("edsr", 4)) == 35.75  # 1 + 32 + 1 + 1 + 1/2 + 1/4
    assert receptive_radius(bicubic_model) is None and default_overlap(bicubic_model) == 32
    unknown = keras.Sequential([keras.Input((None, None, 1)), keras.layers.MaxPooling2D(2)])
    assert receptive_radius(unknown) is None
    for model in (espcn, tiny_edsr):
        x = tf.Variable(np.random.default_rng(0).uniform(size=(1, 25, 25, 1)).astype(np.float32))
        with tf.GradientTape() as tape:
            centre = tf.reduce_sum(model(x)[0, 48:52, 48:52])  # the outputs of LR pixel (12, 12)
        reach = np.argwhere(tape.gradient(centre, x).numpy()[0, :, :, 0] != 0)
        # exact for LR-aligned outputs (tiles are): ceil of the summed radii
        assert np.abs(reach - 12).max() == math.ceil(receptive_radius(model))


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_tiled_equals_untiled(tiny_edsr, channels):
    rgba = np.concatenate([crop("astronaut", 61, 47), crop("camera", 61, 47)[..., None]], axis=-1)
    image = {1: rgba[..., 3:], 3: rgba[..., :3], 4: rgba}[channels]
    upscaler = Upscaler(tiny_edsr, 4)
    whole = upscaler(image)
    sizes = []
    function = upscaler.function

    def recording(c):
        fn = function(c)
        return lambda t: sizes.append(t.shape[1:3]) or fn(t)

    upscaler.function = recording
    tiled = upscaler(image, tile=16)
    assert len(sizes) == 4 * 3
    assert max(max(s) for s in sizes) <= 16 + 2 * upscaler.overlap  # memory bounded by the tile
    assert tiled.shape == whole.shape == (244, 188, channels)
    assert np.abs(tiled.astype(int) - whole).max() <= 1  # within 1/255 on every pixel
    assert whole.std() > 10  # a real image, not a flat one


def write_modes(folder):
    """One image of each mode in ``folder``; returns ``{file name: (mode, (w, h))}``."""
    folder.mkdir(parents=True, exist_ok=True)
    rgb = crop("coffee", 23, 17)
    rgba = np.concatenate([rgb, crop("camera", 23, 17)[..., None]], axis=-1)
    images = {
        "rgb.png": Image.fromarray(rgb),
        "gray.png": Image.fromarray(crop("camera", 23, 17)),
        "la.png": Image.fromarray(rgba[..., 2:]),
        "rgba.png": Image.fromarray(rgba),
        "palette.png": Image.fromarray(rgb).quantize(64),
        "photo.jpg": Image.fromarray(crop("astronaut", 30, 37)),
    }
    for name, im in images.items():
        im.save(folder / name)
    return {n: (im.mode, im.size) for n, im in images.items()}


@pytest.mark.slow
def test_cli_on_a_folder_keeps_modes_and_names_bad_files(tmp_path, compose, capsys):
    """The command's ``main`` in this process (the script as a process:
    test_stranger_weights.py's test_upscale_refuses_nan_weights_in_a_process)."""
    run = make_run(compose, tmp_path / "run")
    modes = write_modes(tmp_path / "in")
    (tmp_path / "in" / "broken.png").write_bytes(b"not a png")
    Image.fromarray(np.zeros((2, 9, 3), np.uint8)).save(tmp_path / "in" / "tiny.png")
    out = tmp_path / "out"
    argv = [
        str(run),
        str(tmp_path / "in"),
        str(out),
        "--tile",
        "8",
    ]
    code = upscale.main(argv)
    stdout, stderr = capsys.readouterr()
    assert code == 1
    assert "failed on 2 image(s)" in stderr
    assert "cannot decode image" in stderr and "broken.png" in stderr
    assert "tiny.png: image 9x2 is too small" in stderr
    assert "upscaled 6 of 8 image(s) x4" in stdout
    expected_mode = {"P": "RGB"}  # palette images come out RGB
    for name, (mode, (w, h)) in modes.items():
        with Image.open(out / name) as im:
            assert im.size == (4 * w, 4 * h), name
            assert im.mode == expected_mode.get(mode, mode), name

    model, _, _ = load_model_from_run(run)
    rgb = read_image(tmp_path / "in" / "rgb.png")
    assert rgb.shape == (23, 17, 3)
    np.testing.assert_array_equal(np.asarray(Image.open(out / "rgb.png")), Upscaler(model, 4)(rgb))


def test_cli_single_image_paths(tmp_path, compose, capsys):
    run = make_run(compose, tmp_path / "run")
    write_modes(tmp_path / "in")
    src = tmp_path / "in" / "rgb.png"
    assert upscale.main([str(run), str(src), str(tmp_path / "big.png"), "--no-progress"]) == 0
    assert Image.open(tmp_path / "big.png").size == (68, 92)  # 17x23 -> 68x92
    assert upscale.main([str(run), str(src), str(tmp_path / "new") + "/", "--no-progress"]) == 0
    assert Image.open(tmp_path / "new" / "rgb.png").size == (68, 92)
    assert upscale.main([str(run), str(src), str(tmp_path / "new"), "--no-progress"]) == 0
    assert "upscaled 1 of 1 image(s) x4 with espcn_x4 (step 5)" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message, code",
    [
        (["{run}", "{tmp}/nothing.png", "{tmp}/o.png"], "nothing.png does not exist", 2),
        (["{run}", "{src}", "{tmp}/o"], "has no image suffix: name it .png", 2),
        (["{run}", "{src}", "{src}"], "would overwrite the input", 2),
        (["{run}", "{tmp}/in", "{src}"], "must be one too", 2),
        (["{run}", "{src}", "{tmp}/o.png", "--tile", "-1"], "--tile must be a positive", 2),
        (["{run}", "{src}", "{tmp}/o.png", "--overlap", "1"], "tile overlap 1 is too small", 2),
        (["{tmp}", "{src}", "{tmp}/o.png"], "is not a run directory of train.py", 2),
        (["{run}", "{tmp}/in/rgba.png", "{tmp}/o.jpg"], "has an alpha channel; use a .png", 1),
    ],
)
def test_errors_name_the_fault(tmp_path, compose, capsys, args, message, code):
    run = make_run(compose, tmp_path / "run")
    write_modes(tmp_path / "in")
    values = {"run": run, "tmp": tmp_path, "src": tmp_path / "in" / "rgb.png"}
    assert upscale.main([a.format(**values) for a in args] + ["--no-progress"]) == code
    err = capsys.readouterr().err
    assert err.startswith("upscale.py: error: ") and message in err


def test_bad_images_are_rejected_with_their_size():
    upscaler = Upscaler(bicubic_model, 4, overlap=2)
    with pytest.raises(ValueError, match="image 2x5 is too small: upscaling needs at least 3x3"):
        upscaler(np.zeros((5, 2, 3), np.uint8))
    with pytest.raises(ValueError, match=r"expected a uint8 image \[h, w, 1\|2\|3\|4\]"):
        upscaler(np.zeros((5, 5, 3), np.float32))


def test_cli_writes_the_images_after_one_whose_header_declares_a_huge_size(
    tmp_path, compose, capsys
):
    import struct
    import zlib

    run = make_run(compose, tmp_path / "run")
    (tmp_path / "in").mkdir()
    Image.fromarray(crop("coffee", 23, 17)).save(tmp_path / "in" / "a.png")
    Image.fromarray(crop("camera", 20, 21)).save(tmp_path / "in" / "c.png")
    bomb = tmp_path / "in" / "b.png"  # a 4x4 PNG whose IHDR claims 40000x40000 (CRC fixed)
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(bomb)
    data = bytearray(bomb.read_bytes())
    data[16:24] = struct.pack(">II", 40000, 40000)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    bomb.write_bytes(bytes(data))

    args = [str(run), str(tmp_path / "in"), str(tmp_path / "out"), "--no-progress"]
    assert upscale.main(args) == 1
    captured = capsys.readouterr()
    assert "upscaled 2 of 3 image(s)" in captured.out
    assert "failed on 1 image(s)" in captured.err
    assert f"{bomb}: image {bomb} is too large to decode" in captured.err
    assert "SR_MAX_IMAGE_PIXELS" in captured.err
    assert Image.open(tmp_path / "out" / "a.png").size == (68, 92)
    assert Image.open(tmp_path / "out" / "c.png").size == (84, 80)
    assert not (tmp_path / "out" / "b.png").exists()
