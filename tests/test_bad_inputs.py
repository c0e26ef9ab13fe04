"""Bad inputs a user can hand the project: odd or broken images in the training folder, wrong
folders, config values, run folders for the scripts, and damaged shard sets. Each is either
handled (by content, skipped with a warning, rebuilt) or refused with a message that names the
file or key and the fix, before anything already written is touched."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from hydra.errors import ConfigCompositionException
from PIL import Image

import sr.config
from sr.config import ConfigError, build_source
from sr.core.color import y_channel
from sr.core.images import ImageFolderError, list_images, load_y, scan_folder
from sr.data import tfrecord
from tests.conftest import photo, write_photos
from tests.fake_run import load_script, make_run

evaluate = load_script("evaluate")
upscale = load_script("upscale")
export = load_script("export")

SMALL = ("data.patch_size=32", "data.batch_size=2", "data.val_dir=null")  # crop 32 + 2*8 = 48
CROP = 48


def digest(folder: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``folder`` (or of ``folder`` itself)."""
    folder = Path(folder)
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def tf_source(hr_dir, shards, *extra):
    """A tfrecord source on ``hr_dir`` with tiny shards in ``shards`` (nothing under data/)."""
    cfg = sr.config.compose(
        "data=tfrecord",
        f"data.hr_dir={hr_dir}",
        f"data.tfrecord_dir={shards}",
        "data.num_shards=2",
        "data.stride=64",
        *SMALL,
        *extra,
    )
    return build_source(cfg)


def gen_source(hr_dir, *extra):
    cfg = sr.config.compose("data=generator", f"data.hr_dir={hr_dir}", *SMALL, *extra)
    return build_source(cfg)


def source(mode, hr_dir, tmp_path, *extra):
    if mode == "tfrecord":
        return tf_source(hr_dir, tmp_path / "shards", *extra)
    return gen_source(hr_dir, *extra)


MODES = ["tfrecord", "generator"]


# ------------------------------------------------------------------------------------------------
# Bad images in the training folder
# ------------------------------------------------------------------------------------------------
def _zero_byte(path):
    path.write_bytes(b"")


def _text(path):
    path.write_text("these are my holiday notes, not a picture\n")


UNREADABLE_HEADERS = {"zero-byte": _zero_byte, "text": _text}


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", sorted(UNREADABLE_HEADERS))
def test_an_unreadable_png_in_the_training_folder_is_named_at_prepare(tmp_path, mode, kind):
    hr = tmp_path / "hr"
    write_photos(hr, size=64, names=("camera", "coffee"))
    UNREADABLE_HEADERS[kind](hr / "broken.png")
    src = source(mode, hr, tmp_path)
    with pytest.raises(ImageFolderError) as info:
        src.prepare()
    message = str(info.value)
    assert str(hr / "broken.png") in message and "remove or replace it" in message
    assert not (tmp_path / "shards").exists()  # nothing written before the check


def _jpeg_named_png(folder):
    Image.fromarray(photo("astronaut")[:80, :96]).save(folder / "a.png", format="JPEG")
    return folder / "a.png"


def _sixteen_bit(folder):
    Image.fromarray(photo("camera")[:80, :96].astype(np.uint16) * 257).save(folder / "a.png")
    return folder / "a.png"


def _palette_transparent(folder):
    im = Image.fromarray(photo("astronaut")[:80, :96]).convert("P")
    im.save(folder / "a.png", transparency=0)
    return folder / "a.png"


def _cmyk(folder):
    Image.fromarray(photo("coffee")[:80, :96]).convert("CMYK").save(folder / "a.jpg")
    return folder / "a.jpg"


def _upper_png(folder):
    Image.fromarray(photo("rocket")[:80, :96]).save(folder / "A.PNG")
    return folder / "A.PNG"


def _upper_jpg(folder):
    Image.fromarray(photo("rocket")[:80, :96]).save(folder / "A.JPG", quality=95)
    return folder / "A.JPG"


ODD_BUT_VALID = {
    "jpeg-named-png": (_jpeg_named_png, "RGB"),
    "16-bit-png": (_sixteen_bit, "gray"),
    "palette-transparent": (_palette_transparent, "RGB"),
    "cmyk-jpeg": (_cmyk, "RGB"),
    "uppercase-PNG": (_upper_png, "RGB"),
    "uppercase-JPG": (_upper_jpg, "RGB"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(ODD_BUT_VALID))
def test_odd_but_valid_images_train_by_content(tmp_path, kind):
    make, _ = ODD_BUT_VALID[kind]
    hr = tmp_path / "hr"
    hr.mkdir()
    path = make(hr)
    assert list_images(hr) == [path]  # listed (suffixes compared case-insensitively)
    y = load_y(path)
    assert y.dtype == np.uint8 and y.shape == (80, 96)  # decoded by content, 8-bit Y
    src = tf_source(hr, tmp_path / "shards")
    src.prepare()
    manifest = tfrecord.read_manifest(tmp_path / "shards")
    assert manifest["images"] == [path.name] and manifest["records"] > 0
    batch = next(iter(src.patch_dataset()))
    assert batch["hr"].shape == (2, CROP, CROP, 1)
    # every patch is a crop of the image's Y (within the stride grid)
    hr_patch = batch["hr"].numpy()[0, ..., 0]
    found = any(
        np.array_equal(y[r : r + CROP, c : c + CROP], hr_patch)
        for r in range(0, 80 - CROP + 1)
        for c in range(0, 96 - CROP + 1)
    )
    assert found


def test_a_jpeg_named_png_gives_the_same_y_as_the_jpeg(tmp_path):
    rgb = photo("astronaut")[:80, :96]
    Image.fromarray(rgb).save(tmp_path / "a.png", format="JPEG", quality=90)
    Image.fromarray(rgb).save(tmp_path / "a.jpg", quality=90)
    np.testing.assert_array_equal(load_y(tmp_path / "a.png"), load_y(tmp_path / "a.jpg"))


def test_a_palette_with_transparency_drops_alpha_and_keeps_the_colours(tmp_path):
    im = Image.fromarray(photo("astronaut")[:80, :96]).convert("P")
    im.save(tmp_path / "p.png", transparency=0)
    want = y_channel(np.asarray(im.convert("RGB")))
    np.testing.assert_array_equal(load_y(tmp_path / "p.png"), want)


def test_a_truncated_jpeg_is_named_and_the_old_shards_are_kept(tmp_path):
    hr = tmp_path / "hr"
    write_photos(hr, size=64, names=("camera", "coffee"))
    src = tf_source(hr, tmp_path / "shards")
    src.prepare()
    before = digest(tmp_path / "shards")
    Image.fromarray(photo("astronaut")[:120, :120]).save(hr / "cut.jpg", quality=90)
    data = (hr / "cut.jpg").read_bytes()
    (hr / "cut.jpg").write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageFolderError) as info:
        tf_source(hr, tmp_path / "shards").prepare()  # the header reads, the pixels do not
    assert str(hr / "cut.jpg") in str(info.value) and "truncated" in str(info.value)
    assert "remove or replace it" in str(info.value)
    assert digest(tmp_path / "shards") == before  # the set in place is untouched
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".shards.")]  # no leftovers


@pytest.mark.parametrize("mode", MODES)
def test_images_all_smaller_than_the_crop_name_it_and_the_fix(tmp_path, mode):
    hr = tmp_path / "hr"
    write_photos(hr, size=40, names=("camera", "coffee"))  # 48x40 < 48x48
    with pytest.raises(ImageFolderError) as info:
        source(mode, hr, tmp_path).prepare()
    message = str(info.value)
    assert f"no image in {hr} is at least {CROP}x{CROP} pixels" in message
    assert "smaller data.patch_size" in message
    assert not (tmp_path / "shards").exists()


@pytest.mark.parametrize("mode", MODES)
def test_some_images_too_small_are_named_in_one_warning_and_training_goes_on(
    tmp_path, caplog, mode
):
    hr = tmp_path / "hr"
    write_photos(hr, size=64, names=("camera", "coffee"))
    Image.fromarray(photo("rocket")[:30, :100]).save(hr / "thin.png")
    Image.fromarray(photo("moon")[:40, :40]).save(hr / "tiny.jpg")
    src = source(mode, hr, tmp_path)
    with caplog.at_level(logging.WARNING):
        src.prepare()
    warnings = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(warnings) == 1
    assert f"smaller than the {CROP}x{CROP} crop" in warnings[0]
    assert "thin.png (100x30)" in warnings[0] and "tiny.jpg (40x40)" in warnings[0]
    assert [p.name for p in src.images.files] == ["camera_00.png", "coffee_00.png"]
    lr, hr_batch = next(iter(src.dataset()))
    assert lr.shape == (2, 8, 8, 1) and hr_batch.shape == (2, 32, 32, 1)


def test_subfolders_and_broken_symlinks_are_not_images(tmp_path):
    hr = tmp_path / "hr"
    write_photos(hr, size=64, names=("camera",))
    (hr / "more.png").mkdir()  # a folder with an image suffix
    write_photos(hr / "more.png", size=64, names=("coffee",))
    (hr / "gone.png").symlink_to(tmp_path / "deleted.png")  # broken link
    assert [p.name for p in list_images(hr)] == ["camera_00.png"]
    src = tf_source(hr, tmp_path / "shards")
    src.prepare()
    assert tfrecord.read_manifest(tmp_path / "shards")["images"] == ["camera_00.png"]


def test_a_folder_of_only_subfolders_and_broken_links_is_named(tmp_path):
    hr = tmp_path / "hr"
    write_photos(hr / "nested", size=64, names=("camera",))
    (hr / "gone.jpg").symlink_to(tmp_path / "deleted.jpg")
    with pytest.raises(ImageFolderError, match=f"image folder {hr} holds no .png, .jpg or .jpeg"):
        gen_source(hr).prepare()


# ------------------------------------------------------------------------------------------------
# Bad folders
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_missing_hr_dir_is_named_with_the_key_to_set(tmp_path, mode):
    with pytest.raises(ImageFolderError) as info:
        source(mode, tmp_path / "nope", tmp_path).prepare()
    assert f"image folder {tmp_path / 'nope'} does not exist" in str(info.value)
    assert "set data.hr_dir" in str(info.value)
    assert not (tmp_path / "shards").exists()


@pytest.mark.parametrize("mode", MODES)
def test_an_hr_dir_that_is_a_file_is_named_and_left_alone(tmp_path, mode):
    Image.fromarray(photo("camera")[:64, :64]).save(tmp_path / "one.png")
    before = digest(tmp_path / "one.png")
    with pytest.raises(ImageFolderError) as info:
        source(mode, tmp_path / "one.png", tmp_path).prepare()
    assert str(tmp_path / "one.png") in str(info.value) and "set data.hr_dir" in str(info.value)
    assert digest(tmp_path / "one.png") == before


@pytest.mark.parametrize("suffixes", [(".gif", ".bmp", ".webp"), (".txt", ".json", ".tif")])
def test_a_folder_of_other_formats_names_the_accepted_suffixes(tmp_path, suffixes):
    hr = tmp_path / "hr"
    hr.mkdir()
    for i, suffix in enumerate(suffixes):
        path = hr / f"f{i}{suffix}"
        if suffix in (".gif", ".bmp", ".webp", ".tif"):
            Image.fromarray(photo("camera")[:64, :64]).save(path)
        else:
            path.write_text("{}")
    with pytest.raises(ImageFolderError, match=f"image folder {hr} holds no .png, .jpg or .jpeg"):
        tf_source(hr, tmp_path / "shards").prepare()
    assert len(list(hr.iterdir())) == 3


def _lr_folder(tmp_path, lr_name, lr_size):
    hr, lr = tmp_path / "hr", tmp_path / "lr"
    hr.mkdir()
    lr.mkdir()
    Image.fromarray(photo("camera")[:64, :80]).save(hr / "0001.png")
    if lr_name:
        Image.fromarray(photo("camera")[: lr_size[1], : lr_size[0]]).save(lr / lr_name)
    return hr, lr


def test_an_lr_dir_missing_a_partner_names_both_candidates(tmp_path):
    hr, lr = _lr_folder(tmp_path, "0002x4.png", (20, 16))
    with pytest.raises(ImageFolderError) as info:
        tf_source(hr, tmp_path / "shards", f"data.lr_dir={lr}").prepare()
    message = str(info.value)
    assert f"no LR image for 0001.png in {lr}" in message
    assert "0001x4.png and 0001.png" in message and "data.lr_dir=null" in message
    assert tfrecord.read_manifest(tmp_path / "shards") is None


@pytest.mark.parametrize("lr_name", ["0001x4.png", "0001.png"])
def test_an_lr_partner_of_the_wrong_size_names_both_sizes(tmp_path, lr_name):
    hr, lr = _lr_folder(tmp_path, lr_name, (21, 16))  # 80x64 / 4 is 20x16
    before = digest(lr)
    with pytest.raises(ImageFolderError) as info:
        tf_source(hr, tmp_path / "shards", f"data.lr_dir={lr}").prepare()
    message = str(info.value)
    assert f"LR image {lr / lr_name} is 21x16, expected 20x16 (HR 0001.png / 4)" in message
    assert digest(lr) == before
    assert tfrecord.read_manifest(tmp_path / "shards") is None


# ------------------------------------------------------------------------------------------------
# Bad config values: refused at start-up, before any data work
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ("data=generator", "data.patch_size=90"),
            "data.patch_size 90 is not a multiple of data.scale 4: use 88",
        ),
        (
            ("data.scale=3", "data.patch_size=100"),
            "data.patch_size 100 is not a multiple of data.scale 3: use 99",
        ),
        (("data.batch_size=-4",), "data.batch_size must be an integer >= 1, got -4"),
        (("data=generator", "data.batch_size=-1"), "data.batch_size must be an integer >= 1"),
        (("data=generator", "data.pool_memory_mb=0"), "data.pool_memory_mb must be a number >= "),
        (("data=generator", "data.pool_memory_mb=-5"), "data.pool_memory_mb must be a number"),
        (("data=generator", "data.shuffle_buffer=-1"), None),  # a key of the other mode
        (("data.write_workers=0",), "data.write_workers must be an integer >= 1, got 0"),
        (("data.patch_size=0",), "data.patch_size must be an integer >= 1, got 0"),
    ],
)
def test_data_values_out_of_range_are_refused_before_any_folder_is_read(
    tmp_path, overrides, message
):
    hr = tmp_path / "never-read"  # does not exist: the value is refused first
    if message is None:  # Hydra refuses a key of the other schema at composition
        with pytest.raises(ConfigCompositionException, match="data.shuffle_buffer") as info:
            sr.config.compose(*overrides)
        assert "GeneratorConfig" in str(info.value.__cause__)
        return
    shards = () if "data=generator" in overrides else (f"data.tfrecord_dir={tmp_path}/s",)
    cfg = sr.config.compose(*overrides, f"data.hr_dir={hr}", *shards)
    with pytest.raises(ConfigError, match=message):
        build_source(cfg)
    assert not (tmp_path / "s").exists()


def test_an_unknown_data_mode_lists_the_modes():
    with pytest.raises(ConfigError) as info:
        sr.config.compose("data=foo")
    assert str(info.value) == (
        "data=foo: the data group has no option 'foo'; choose one of generator, sequence, "
        "tfrecord (conf/data/)"
    )


@pytest.mark.parametrize(
    "override, key, schema",
    [
        ("train.stpes=5", "stpes", "TrainConfig"),
        ("train.learning_rate=0.1", "learning_rate", "TrainConfig"),
        ("data.batchsize=8", "batchsize", "TFRecordConfig"),
    ],
)
def test_a_typo_in_a_key_is_refused_naming_it_and_the_schema(override, key, schema):
    with pytest.raises(ConfigCompositionException) as info:
        sr.config.compose(override)
    assert f"Could not override '{override.split('=')[0]}'" in str(info.value)
    assert f"Key '{key}' not in '{schema}'" in str(info.value.__cause__)


@pytest.mark.parametrize(
    "override, kind",
    [
        ("train.steps=abc", "Integer"),
        ("train.log_every=ten", "Integer"),
        ("data.batch_size=many", "Integer"),
        ("data.num_shards=1.5", "Integer"),
        ("train.lr=fast", "Float"),
        ("data.rot90=sometimes", "bool"),
    ],
)
def test_a_value_of_the_wrong_type_names_the_key(override, kind):
    key, value = override.split("=")
    with pytest.raises(ConfigCompositionException, match=f"Error merging override {override}"):
        try:
            sr.config.compose(override)
        except ConfigCompositionException as e:
            cause = str(e.__cause__)
            assert f"full_key: {key}" in cause and f"'{value}'" in cause and kind in cause
            raise


# ------------------------------------------------------------------------------------------------
# train.py: the message users see, raised before any checkpoint (in-process; exit 2)
# ------------------------------------------------------------------------------------------------
def _train(tmp_path, *overrides) -> str:
    """The message of the error that ``run`` (what ``python train.py`` runs) raises for
    ``overrides``: one of the types train.py turns into exit code 2 with that message alone
    (tests/test_train.py runs the process itself)."""
    from sr.train.app import run

    cfg = sr.config.compose("data=generator", "data.val_dir=null", *overrides)
    with pytest.raises((ConfigError, ImageFolderError)) as e:
        run(cfg, tmp_path / "run")
    return str(e.value)


def test_an_hr_dir_that_is_a_file_is_refused_before_any_checkpoint(tmp_path):
    Image.fromarray(photo("camera")[:64, :64]).save(tmp_path / "one.png")
    before = digest(tmp_path / "one.png")
    out = _train(tmp_path, f"data.hr_dir={tmp_path / 'one.png'}")
    assert f"image folder {tmp_path / 'one.png'}" in out and "set data.hr_dir" in out
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert digest(tmp_path / "one.png") == before


def test_images_all_smaller_than_the_crop_are_refused_before_any_checkpoint(tmp_path):
    write_photos(tmp_path / "hr", size=40, names=("camera", "coffee"))
    before = digest(tmp_path / "hr")
    out = _train(tmp_path, f"data.hr_dir={tmp_path / 'hr'}", "data.patch_size=32")
    assert f"no image in {tmp_path / 'hr'} is at least 48x48 pixels" in out
    assert "smaller data.patch_size" in out
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert digest(tmp_path / "hr") == before


# ------------------------------------------------------------------------------------------------
# Bad run folders for evaluate / upscale / export
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    return make_run(sr.config.compose, tmp_path_factory.mktemp("base") / "run", steps=(3, 5))


@pytest.fixture
def run(base_run, tmp_path):
    """A private copy of a fake run (ckpt-3 and ckpt-5) and one input image ``in/rgb.png``."""
    shutil.copytree(base_run, tmp_path / "run")
    (tmp_path / "in").mkdir()
    Image.fromarray(photo("astronaut")[:20, :24]).save(tmp_path / "in" / "rgb.png")
    return tmp_path / "run"


def _no_checkpoints(run):
    shutil.rmtree(run / "checkpoints")


def _not_a_run(run):
    (run / ".hydra" / "config.yaml").unlink()


@pytest.mark.parametrize(
    "script, argv, spoil, message",
    [
        ("evaluate", ["{run}", "{tmp}/in"], _no_checkpoints, "no checkpoint in {run}/checkpoints"),
        ("upscale", ["{run}", "{src}", "{tmp}/o.png"], _no_checkpoints, "no checkpoint in"),
        (
            "upscale",
            ["{run}", "{src}", "{tmp}/o.png"],
            _not_a_run,
            "{run} is not a run directory of train.py: {run}/.hydra/config.yaml is missing",
        ),
        ("export", ["{run}", "{tmp}/saved"], _not_a_run, "is not a run directory of train.py"),
        (
            "upscale",
            ["{run}", "{src}", "{tmp}/o.png", "--checkpoint", "ckpt-99"],
            None,
            "no checkpoint {run}/checkpoints/ckpt-99 (expected {run}/checkpoints/ckpt-99.index)",
        ),
        (
            "export",
            ["{run}", "{tmp}/saved", "--checkpoint", "ckpt-99"],
            None,
            "no checkpoint {run}/checkpoints/ckpt-99",
        ),
        (
            "export",
            ["{run}", "{tmp}/saved", "--checkpoint", "ckpt-4"],
            None,
            "no checkpoint {run}/checkpoints/ckpt-4",
        ),
    ],
)
def test_a_bad_run_folder_exits_2_naming_it_and_writes_nothing(
    run, tmp_path, capsys, script, argv, spoil, message
):
    if spoil:
        spoil(run)
    before = digest(run)
    values = {"run": run, "tmp": tmp_path, "src": tmp_path / "in" / "rgb.png"}
    argv = [a.format(**values) for a in argv]
    if script != "export":
        argv.append("--no-progress")
    main = {"evaluate": evaluate, "upscale": upscale, "export": export}[script].main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{script}.py: error: ") and message.format(**values) in err
    assert digest(run) == before
    assert not (tmp_path / "o.png").exists() and not (tmp_path / "saved").exists()
    assert not (run / "results.json").exists()


@pytest.mark.parametrize("spelling", ["{tmp}/in/../in/rgb.png", "{tmp}/in/./rgb.png", "{tmp}/in/"])
def test_upscale_refuses_to_overwrite_its_input_however_spelled(run, tmp_path, capsys, spelling):
    src = tmp_path / "in" / "rgb.png"
    before = digest(tmp_path / "in")
    out = spelling.format(tmp=tmp_path)
    assert upscale.main([str(run), str(src), out, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("upscale.py: error: ") and "would overwrite the input" in err
    assert digest(tmp_path / "in") == before


def test_upscale_refuses_a_folder_into_itself(run, tmp_path, capsys):
    before = digest(tmp_path / "in")
    folder = tmp_path / "in"
    assert upscale.main([str(run), str(folder), f"{tmp_path}/in/../in", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"output folder {tmp_path}/in/../in is the input folder: pick another" in err
    assert digest(tmp_path / "in") == before


@pytest.mark.parametrize("suffix", [".txt", ".dat", ""])
def test_upscale_to_a_non_image_suffix_is_refused_before_loading_the_run(
    run, tmp_path, capsys, suffix
):
    out = tmp_path / f"result{suffix}"
    assert upscale.main([str(run), str(tmp_path / "in" / "rgb.png"), str(out)]) == 2
    err = capsys.readouterr().err
    assert f"output {out} has no image suffix: name it .png" in err
    assert not out.exists()


def test_upscale_to_gif_writes_a_4x_gif(run, tmp_path, capsys):
    out = tmp_path / "o.gif"
    assert upscale.main([str(run), str(tmp_path / "in" / "rgb.png"), str(out)]) == 0
    with Image.open(out) as im:
        assert im.format == "GIF" and im.size == (96, 80)


def test_export_into_a_non_empty_folder_leaves_it_unchanged(run, tmp_path, capsys):
    target = tmp_path / "exported"
    assert export.main([str(run), str(target), "--checkpoint", "ckpt-3"]) == 0
    (target / "NOTES.md").write_text("my notes on this export\n")
    before = digest(target)
    assert export.main([str(run), str(target)]) == 2  # the latest, ckpt-5, over it: refused
    err = capsys.readouterr().err
    assert f"output {target} already exists and is not empty: pick a new folder" in err
    assert digest(target) == before


# ------------------------------------------------------------------------------------------------
# Bad shards and manifests (data=tfrecord)
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def built(tmp_path):
    hr = tmp_path / "hr"
    write_photos(hr, size=64, names=("camera", "coffee", "rocket"))
    src = tf_source(hr, tmp_path / "shards")
    manifest = src.ensure_shards()
    return hr, tmp_path / "shards", manifest


def _rebuild_log(caplog, hr, shards, *extra):
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sr.data.tfrecord"):
        manifest = tf_source(hr, shards, *extra).ensure_shards()
    building = [r.getMessage() for r in caplog.records if r.getMessage().startswith("building")]
    return manifest, building


def _not_json(shards, manifest):
    (shards / tfrecord.MANIFEST).write_text('{"format": "sr-tfrecord-patches/1", "records": ')


def _other_format(shards, manifest):
    (shards / tfrecord.MANIFEST).write_text(json.dumps(dict(manifest, format="sr-tfrecord/0")))


def _binary(shards, manifest):
    (shards / tfrecord.MANIFEST).write_bytes(b"\xff\xfe\x00garbage")


@pytest.mark.slow
@pytest.mark.parametrize("spoil", [_not_json, _other_format, _binary])
def test_an_unreadable_manifest_makes_the_set_rebuilt(built, caplog, spoil):
    hr, shards, manifest = built
    spoil(shards, manifest)
    rebuilt, building = _rebuild_log(caplog, hr, shards)
    why = f"manifest.json of {shards} is unreadable or of another format (not {tfrecord.FORMAT})"
    assert building == [f"building TFRecord shards in {shards}: {why}"]
    assert tfrecord.read_manifest(shards) == rebuilt and rebuilt["records"] == manifest["records"]
    assert tfrecord.check_shards(shards, rebuilt) == []


def test_a_deleted_shard_is_named_and_the_set_rebuilt(built, caplog):
    hr, shards, manifest = built
    name = manifest["shards"][1]["file"]
    (shards / name).unlink()
    rebuilt, building = _rebuild_log(caplog, hr, shards)
    assert building == [f"building TFRecord shards in {shards}: shard {name} is missing"]
    assert (shards / name).is_file() and tfrecord.check_shards(shards, rebuilt) == []


def test_a_stray_file_in_the_shard_folder_is_ignored(built, caplog):
    hr, shards, manifest = built
    (shards / "README.txt").write_text("copied from the other machine\n")
    (shards / "extra-00000-of-00001.tfrecord").write_bytes(b"\0" * 64)
    before = digest(shards)
    again, building = _rebuild_log(caplog, hr, shards)
    assert building == [] and again == manifest  # not stale: nothing rebuilt, nothing read
    assert digest(shards) == before
    batch = next(iter(tf_source(hr, shards).patch_dataset()))  # the listed shards only
    assert batch["hr"].shape == (2, CROP, CROP, 1)


def test_shards_of_another_patch_size_are_rebuilt_and_the_log_says_why(built, caplog):
    hr, shards, manifest = built
    rebuilt, building = _rebuild_log(caplog, hr, shards, "data.patch_size=24")
    assert len(building) == 1 and "parameters changed" in building[0]
    assert "'patch_size': 32" in building[0] and "'patch_size': 24" in building[0]
    assert rebuilt["params"]["patch_size"] == 24 and tfrecord.read_manifest(shards) == rebuilt
    batch = next(iter(tf_source(hr, shards, "data.patch_size=24").patch_dataset()))
    assert batch["hr"].shape == (2, 24 + 16, 24 + 16, 1)


def test_a_new_image_too_small_for_the_crop_does_not_make_the_set_stale(built, caplog):
    hr, shards, manifest = built
    Image.fromarray(photo("moon")[:20, :20]).save(hr / "thumb.png")
    before = digest(shards)
    again, building = _rebuild_log(caplog, hr, shards)
    assert building == [] and digest(shards) == before
    assert scan_folder(hr, CROP).skipped == ("thumb.png (20x20)",)


# ------------------------------------------------------------------------------------------------
# A shard destination holding the user's own files (data.tfrecord_dir=~/photos)
# ------------------------------------------------------------------------------------------------
def _notes(shards):
    (shards / "notes.txt").write_text("my notes\n")
    return "notes.txt"


def _photos_and_a_folder(shards):
    write_photos(shards, size=64, names=("chelsea",))
    (shards / "raw").mkdir()
    (shards / "raw" / "0001.dng").write_bytes(b"\0" * 32)
    return "chelsea_00.png"


def _a_stale_set_and_a_readme(shards):
    # a previous set (its manifest removed: stale) plus a file the user added
    (shards / tfrecord.shard_name(0, 2)).write_bytes(b"\0" * 64)
    (shards / "README.md").write_text("shards for the paper\n")
    return "README.md"


@pytest.mark.parametrize("fill", [_notes, _photos_and_a_folder, _a_stale_set_and_a_readme])
def test_a_tfrecord_dir_holding_other_files_is_refused_before_decoding_and_nothing_deleted(
    tmp_path, monkeypatch, fill
):
    hr = tmp_path / "hr"
    write_photos(hr, size=64, names=("camera", "coffee"))
    shards = tmp_path / "shards"
    shards.mkdir()
    name = fill(shards)
    before = digest(tmp_path)

    def no_decoding(*args, **kwargs):
        raise AssertionError("an image was decoded")

    from sr.data.tfrecord import write

    # every decoder the shard writer calls
    monkeypatch.setattr(write, "load_y_pair", no_decoding)
    monkeypatch.setattr(write, "load_rgb", no_decoding)
    src = tf_source(hr, shards)
    with pytest.raises(tfrecord.ShardError) as error:
        src.ensure_shards()
    assert isinstance(error.value, ImageFolderError)  # exits 2 like any bad folder
    message = str(error.value)
    assert f"refusing to build TFRecord shards into {shards}" in message and name in message
    assert "data.tfrecord_dir to an empty or new folder" in message
    assert f"move those files out of {shards}" in message
    with pytest.raises(tfrecord.ShardError, match="notes|chelsea|README"):  # writing directly too
        tfrecord.write_shards(src.images, shards, src.params(), 2, progress=False)
    after = digest(tmp_path)
    assert after == before  # nothing deleted or changed; no temporary folder
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".shards.") and p.is_dir()]


def test_a_tfrecord_dir_that_is_a_file_is_refused(tmp_path):
    hr = tmp_path / "hr"
    write_photos(hr, size=64, names=("camera",))
    (tmp_path / "shards").write_text("not a folder")
    with pytest.raises(tfrecord.ShardError, match="is a file, not a folder"):
        tf_source(hr, tmp_path / "shards").ensure_shards()
    assert (tmp_path / "shards").read_text() == "not a folder"


def test_an_empty_existing_tfrecord_dir_is_built_into(tmp_path):
    hr = tmp_path / "hr"
    write_photos(hr, size=64, names=("camera", "coffee"))
    (tmp_path / "shards").mkdir()
    manifest = tf_source(hr, tmp_path / "shards").ensure_shards()
    assert tfrecord.read_manifest(tmp_path / "shards") == manifest
    assert tfrecord.check_shards(tmp_path / "shards", manifest) == []


def test_a_stale_set_is_rebuilt_in_place_and_nothing_beside_it_touched(built, caplog):
    hr, shards, manifest = built
    root = shards.parent
    (root / "notes.txt").write_text("beside the shards\n")
    shutil.copytree(shards, root / "shards-backup")
    (root / ".shards.mine").mkdir()  # a folder named like a build's, but not one
    (root / ".shards.mine" / "keep.txt").write_text("keep\n")

    def outside():
        return {k: v for k, v in digest(root).items() if not k.startswith("shards/")}

    before = outside()
    rebuilt, building = _rebuild_log(caplog, hr, shards, "data.stride=48", "data.num_shards=3")
    assert len(building) == 1 and "parameters changed" in building[0]
    assert outside() == before  # only the set itself changed (the build lock file is empty)
    want = {tfrecord.MANIFEST} | {tfrecord.shard_name(i, 3) for i in range(3)}
    assert {p.name for p in shards.iterdir()} == want
    assert tfrecord.read_manifest(shards) == rebuilt
    assert tfrecord.check_shards(shards, rebuilt) == []
