"""Both data sources (data=tfrecord, data=generator), built from the real config exactly as
train.py builds them."""

import logging

import hydra
import numpy as np
import pytest
import tensorflow as tf
from numpy.lib.stride_tricks import sliding_window_view

from sr.core.degrade import bicubic_downscale, quantize
from sr.core.images import ImageFolderError, load_y
from sr.data import GeneratorSource, PatchSource, TFRecordSource
from tests.conftest import write_photos

MODES = ["tfrecord", "generator"]


def _loader(compose, mode, hr_dir, tmp_path, *extra) -> PatchSource:
    shards = (f"data.data_root={tmp_path / 'root'}", "data.num_shards=3")
    cfg = compose(
        f"data={mode}",
        f"data.hr_dir={hr_dir}",
        "data.val_dir=null",  # no validation here (a fresh clone has no demo photos)
        "data.batch_size=16",
        *(shards if mode == "tfrecord" else ()),
        *extra,
    )
    loader = hydra.utils.instantiate(cfg.data)
    assert isinstance(loader, {"tfrecord": TFRecordSource, "generator": GeneratorSource}[mode])
    assert loader.mode == mode
    return loader


def _locate(image: np.ndarray, crop: np.ndarray) -> bool:
    """Whether ``crop`` [c, c] occurs in ``image`` (row-match candidates, then full compare)."""
    c = crop.shape[0]
    rows = np.all(sliding_window_view(image, c, axis=1) == crop[0], axis=-1)
    for y, x in zip(*np.nonzero(rows)):
        if y + c <= image.shape[0] and np.array_equal(image[y : y + c, x : x + c], crop):
            return True
    return False


@pytest.mark.parametrize("mode", MODES)
def test_batches_have_the_contract_shapes_dtypes_and_ranges(compose, photo_dir, tmp_path, mode):
    loader = _loader(compose, mode, photo_dir, tmp_path)
    loader.prepare()
    ds = loader.dataset()
    assert ds.element_spec[0].shape.as_list() == [16, 24, 24, 1]
    it = iter(ds)
    for _ in range(3):
        lr, hr = next(it)
        assert lr.dtype == tf.float32 and hr.dtype == tf.float32
        assert lr.shape == (16, 24, 24, 1) and hr.shape == (16, 96, 96, 1)
        for x in (lr.numpy(), hr.numpy()):
            assert 0.0 <= x.min() and x.max() <= 1.0
    del it


@pytest.mark.parametrize("mode", MODES)
def test_lr_is_the_matlab_bicubic_of_its_hr_partner_with_flips_on(
    compose, photo_dir, tmp_path, mode
):
    loader = _loader(compose, mode, photo_dir, tmp_path, "data.rot90=true")
    it = iter(loader.dataset())
    for _ in range(4):
        lr, hr = (t.numpy()[..., 0] * 255 for t in next(it))
        # Away from the patch border (2 LR pixels) the LR of the margin crop equals the LR of
        # the HR patch alone; a flip applied to one side only would give errors of tens of levels.
        own = quantize(bicubic_downscale(hr[..., None], 4)).numpy()[..., 0]
        diff = np.abs(lr - own)[:, 2:-2, 2:-2]
        assert diff.max() <= 1.0 + 1e-3 and (diff > 0.5).mean() < 0.01
    del it


@pytest.mark.parametrize("mode", MODES)
def test_patches_are_crops_of_the_y_of_the_named_source_image(compose, photo_dir, tmp_path, mode):
    loader = _loader(compose, mode, photo_dir, tmp_path)
    it = iter(loader.patch_dataset())
    batch = next(it)
    del it
    sources = {}
    for crop, i in zip(batch["hr"].numpy()[..., 0], batch["image"].numpy()):
        path = loader.images.files[i]
        sources.setdefault(i, load_y(path))
        assert crop.shape == (112, 112)
        assert _locate(sources[i], crop), f"{mode}: patch not found in {path.name}"


def test_generator_batches_draw_from_many_images_within_the_memory_bound(
    compose, tmp_path, caplog
):
    hr_dir = tmp_path / "many"
    files = write_photos(hr_dir, size=120, per_photo=12)  # 84 real crops
    loader = _loader(
        compose,
        "generator",
        hr_dir,
        tmp_path,
        "data.batch_size=64",
        "data.pool_size=70",
        "data.patches_per_image=16",
    )
    # no prefetch injected by tf.data: batches read ahead under load would count their decodes
    plain = tf.data.Options()
    plain.experimental_optimization.inject_prefetch = False
    plain.autotune.enabled = False
    it = iter(loader.patch_dataset().with_options(plain))
    distinct = [len(set(next(it)["image"].numpy())) for _ in range(20)]
    del it
    assert min(distinct) >= 60, distinct
    assert loader.pool.decodes <= 70 + 20 * 64 // 16 + 8  # decoded once per 16 patches
    # a memory bound of 0.3 MB holds about 20 images of 120x128 bytes
    with caplog.at_level(logging.INFO):
        small = _loader(compose, "generator", hr_dir, tmp_path, "data.pool_memory_mb=0.3")
        it = iter(small.patch_dataset())
        next(it)
        del it
    pool_lines = [r.getMessage() for r in caplog.records if "generator: pool of" in r.getMessage()]
    held = int(pool_lines[-1].split("pool of ")[1].split()[0])
    assert held * 120 * 128 <= 0.3 * 2**20 < (held + 1) * 120 * 128
    assert held < len(files)  # the bound, not the folder, limited the pool


def test_shards_are_built_once_and_rebuilt_when_the_config_changes(
    compose, photo_dir, tmp_path, caplog
):
    with caplog.at_level(logging.INFO):
        _loader(compose, "tfrecord", photo_dir, tmp_path).prepare()
        _loader(compose, "tfrecord", photo_dir, tmp_path).prepare()
        _loader(compose, "tfrecord", photo_dir, tmp_path, "data.stride=48").prepare()
    builds = [
        r.getMessage() for r in caplog.records if "building TFRecord shards" in r.getMessage()
    ]
    assert len(builds) == 2
    assert "no shards" in builds[0] and "parameters changed" in builds[1]


@pytest.mark.parametrize("mode", MODES)
def test_empty_folder_is_an_error_naming_it(compose, tmp_path, mode):
    (tmp_path / "empty").mkdir()
    loader = _loader(compose, mode, tmp_path / "empty", tmp_path)
    with pytest.raises(ImageFolderError, match=str(tmp_path / "empty")):
        loader.prepare()


def test_config_typos_and_bad_values_fail_at_start(compose, photo_dir, tmp_path):
    with pytest.raises(Exception, match="pach"):
        compose("data.pach=64")
    with pytest.raises(Exception, match="patch_size"):
        compose("data.patch_size=abc")
    with pytest.raises(Exception, match="data.patch_size 90 is not a multiple of data.scale 4"):
        _loader(compose, "tfrecord", photo_dir, tmp_path, "data.patch_size=90")


@pytest.mark.parametrize(
    "mode, key, schema",
    [
        ("tfrecord", "data.pool_size=16", "TFRecordConfig"),
        ("tfrecord", "data.patches_per_image=8", "TFRecordConfig"),
        ("generator", "data.num_shards=4", "GeneratorConfig"),
        ("generator", "data.stride=32", "GeneratorConfig"),
    ],
)
@pytest.mark.slow
def test_a_key_of_the_other_mode_is_an_error_naming_the_mode(compose, mode, key, schema):
    from sr.config import ConfigError, build_source

    name = key.split("=")[0].split(".")[1]
    with pytest.raises(Exception, match=f"Could not override 'data.{name}'") as info:
        compose(f"data={mode}", key)
    assert f"Key '{name}' not in '{schema}'" in str(info.value.__cause__)  # Hydra prints both
    # forced in with Hydra's "+" it is still refused, before anything is built
    other = "generator" if mode == "tfrecord" else "tfrecord"
    with pytest.raises(
        ConfigError, match=f"data.{name} is a key of data={other}, not of data={mode}"
    ):
        build_source(compose(f"data={mode}", f"+{key}"))


@pytest.mark.parametrize(
    "mode, override, message",
    [
        ("tfrecord", "data.num_shards=0", "data.num_shards must be an integer >= 1, got 0"),
        ("tfrecord", "data.stride=0", "data.stride must be an integer >= 1"),
        ("tfrecord", "data.shuffle_buffer=-1", "data.shuffle_buffer must be an integer >= 0"),
        ("generator", "data.pool_size=0", "data.pool_size must be an integer >= 1"),
        ("generator", "data.patches_per_image=0", "data.patches_per_image must be an integer"),
        ("generator", "data.decode_workers=0", "data.decode_workers must be"),
        ("generator", "data.batch_size=0", "data.batch_size must be an integer >= 1"),
        ("tfrecord", "data.scale=0", "data.scale must be an integer >= 1"),
        ("tfrecord", "data.threads=-1", "data.threads must be an integer >= 0, got -1"),
    ],
)
@pytest.mark.slow
def test_values_out_of_range_are_errors_naming_the_key(
    compose, photo_dir, tmp_path, mode, override, message
):
    from sr.config import ConfigError, build_source

    cfg = compose(f"data={mode}", f"data.hr_dir={photo_dir}", override)
    with pytest.raises(ConfigError, match=message):
        build_source(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_the_same_seed_gives_the_same_batches_and_another_seed_others(
    compose, photo_dir, tmp_path, mode
):
    def first_batches(seed):
        loader = _loader(
            compose, mode, photo_dir, tmp_path, f"seed={seed}", "data.deterministic=true"
        )
        it = iter(loader.dataset())
        out = [np.concatenate([t.numpy().ravel() for t in next(it)]) for _ in range(3)]
        del it
        return np.concatenate(out)

    a, b, c = first_batches(3), first_batches(3), first_batches(4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.slow
def test_the_pipeline_has_threads_of_its_own_on_a_cpu_and_the_same_batches(
    compose, photo_dir, tmp_path, monkeypatch
):
    """data.threads: by default (null) a pool of its own, one thread per 4 cores, at least one,
    where no GPU is visible; TensorFlow's shared pools (0) or N threads when asked; the last
    prefetch has slack (tf.data's ``experimental_slack``); the batches are the same bit for bit
    with any pool, and without the slack."""
    from sr.data.source import pipeline_threads

    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    for cores, want in ((1, 1), (2, 1), (7, 1), (8, 2), (32, 8)):
        monkeypatch.setattr("os.sched_getaffinity", lambda pid, n=cores: set(range(n)))
        assert pipeline_threads(None) == want
    assert (pipeline_threads(0), pipeline_threads(3)) == (0, 3)
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: ["GPU:0"])
    assert pipeline_threads(None) == 0  # the step runs on the GPU: the cores are the pipeline's

    def batches(*threads, slack=True):
        ordered = "data.deterministic=true"
        loader = _loader(compose, "tfrecord", photo_dir, tmp_path, ordered, *threads)
        ds = loader.dataset(slack=slack)  # without: an iterator restored from a checkpoint
        it = iter(ds)
        out = [t.numpy() for _ in range(3) for t in next(it)]
        return (
            ds.options().threading.private_threadpool_size,
            ds.options().experimental_slack,
        ), out

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    (own, mine), (shared, theirs) = batches(), batches("data.threads=0")
    unslack, plain = batches(slack=False)
    # a pool of its own or the shared ones, and the last prefetch's slack on or off: same batches
    assert (own, shared, unslack) == ((1, True), (None, True), (1, False))
    for a, b, c in zip(mine, theirs, plain, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_the_handoff_takes_the_iterators_elements():
    """``sr.data.pipeline.handoff`` (the training loop's ``next()``, ``IteratorGetNextSync`` on
    the calling thread): the elements of ``next()`` in the same order and structure, from a
    graph pipeline and from a Python generator (no deadlock: the op releases the GIL), and
    ``OutOfRangeError`` at the end; an element with a ragged part is taken by ``next()``. Fails
    if TensorFlow changes the iterator's public composite encoding that it relies on (one
    resource tensor)."""
    from sr.core.batch import Batch
    from sr.data.pipeline import handoff

    def graph():
        return tf.data.Dataset.range(5).map(
            lambda i: Batch(tf.fill([2, 3, 3, 1], tf.cast(i, tf.float32)), tf.fill([2, 1], i))
        )

    def generated():
        rows = ((np.full([2], i, np.uint8), np.int32(i)) for i in range(5))
        sig = (tf.TensorSpec([2], tf.uint8), tf.TensorSpec([], tf.int32))
        return tf.data.Dataset.from_generator(lambda: rows, output_signature=sig).prefetch(2)

    for make in (graph, generated):
        it = iter(make())
        assert [t.dtype for t in tf.nest.flatten(it, expand_composites=True)] == [tf.resource]
        take = handoff(it)
        for want in make():
            got = take()
            assert type(got) is type(want)
            for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(want), strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_array_equal(a, b)
        with pytest.raises(tf.errors.OutOfRangeError):
            take()
    ragged = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1], [2, 3]]))
    take = handoff(iter(ragged))
    assert [take().numpy().tolist() for _ in range(2)] == [[1], [2, 3]]


@pytest.mark.slow
@pytest.mark.parametrize("rot90", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_premade_lr_folder_pairs_stay_aligned(compose, photo_dir, tmp_path, mode, rot90):
    from PIL import Image

    from sr.core.images import list_images

    # An LR folder in the DIV2K X4 layout, made with the project's operator: the LR patches read
    # from it must then equal the bicubic of their (flipped) HR partners.
    lr_dir = tmp_path / "X4"
    lr_dir.mkdir()
    for path in list_images(photo_dir):
        y = load_y(path)
        y = y[: y.shape[0] // 4 * 4, : y.shape[1] // 4 * 4].astype(np.float32)
        lr = quantize(bicubic_downscale(y[..., None], 4)).numpy()[..., 0].astype(np.uint8)
        Image.fromarray(lr).save(lr_dir / f"{path.stem}x4.png")
        Image.fromarray(y.astype(np.uint8)).save(path)  # HR cropped to a multiple of 4, as Y
    loader = _loader(
        compose, mode, photo_dir, tmp_path, f"data.lr_dir={lr_dir}", f"data.rot90={rot90}"
    )
    assert loader.margin == 0
    it = iter(loader.dataset())
    lr, hr = (
        np.concatenate([b.numpy()[..., 0] * 255 for b in t])
        for t in zip(*[next(it) for _ in range(3)])
    )
    del it
    # a flip or transpose applied to one side only would give errors of tens of levels
    own = quantize(bicubic_downscale(hr[..., None], 4)).numpy()[..., 0]
    diff = np.abs(lr - own)[:, 2:-2, 2:-2]
    assert diff.max() <= 1.0 + 1e-3 and (diff > 0.5).mean() < 0.01
