"""Shuffle quality: both loader modes draw sorted images without order bias, the reference
pipeline (c) does not; and the draw statistics agree with scipy and hand-checked values."""

import hydra
import numpy as np
import pytest
import scipy.stats

from sr.bench import references as ref
from sr.bench.measures import (
    chi_square,
    distinct_per_batch,
    ideal_distinct,
    order_bias,
    spearman,
)
from sr.core.images import list_images
from tests.conftest import write_photos

DRAWS = 8192  # |rho| of an ideal shuffle is about 1/sqrt(8192) = 0.011 here


@pytest.fixture(scope="module")
def sorted_dir(tmp_path_factory):
    """21 real-photo crops whose names sort in a known order (7 photos x 3 crops)."""
    folder = tmp_path_factory.mktemp("sorted") / "hr"
    write_photos(folder, size=160, per_photo=3)
    return folder


def _draws(compose, mode, folder, root, *extra):
    cfg = compose(
        f"data={mode}",
        f"data.hr_dir={folder}",
        "data.patch_size=32",
        *((f"data.data_root={root}", "data.stride=16") if mode == "tfrecord" else ()),
        *extra,
    )
    loader = hydra.utils.instantiate(cfg.data)
    it = iter(loader.patch_dataset())
    out = np.concatenate([next(it)["image"].numpy() for _ in range(DRAWS // 64)])
    del it
    return out, loader


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, extra",
    [
        ("tfrecord", ()),
        ("generator", ()),
        ("generator", ("data.pool_size=16", "data.patches_per_image=8")),
    ],  # pool < folder
)
def test_loaders_draw_sorted_images_without_order_bias(compose, sorted_dir, tmp_path, mode, extra):
    draws, loader = _draws(compose, mode, sorted_dir, tmp_path / "root", *extra)
    assert abs(order_bias(draws)) <= 0.05
    # every image of the folder is drawn (none skipped, none left out of the shards or pool)
    assert set(draws.tolist()) == set(range(len(list_images(sorted_dir))))


def test_reference_c_draws_the_first_images_first(sorted_dir, tmp_path):
    # reference (c) with its records in one sorted file and a buffer much smaller than the file
    # (DIV2K's proportions: ~52,000 records per shard against a 2000-record buffer)
    files = list_images(sorted_dir)
    n = ref.gen_tfrecords(files, tmp_path / "c", patch_size=24, tfrecord_num=1)
    assert n == 21 * 9 * 10  # 160x168 crops: rows 0..128, columns 0..144 at stride 16
    ds = ref.read_tfrecords(tmp_path / "c", patch_size=24, seed=0, shuffle_num=200, pairs=False)
    it = iter(ds)
    draws = np.concatenate([next(it).numpy() for _ in range(n // 64)])
    del it
    assert order_bias(draws) > 0.8


def test_ideal_distinct_matches_the_closed_form_and_a_simulation():
    assert ideal_distinct(80, 64) == pytest.approx(44.234, abs=1e-3)
    assert ideal_distinct(1, 64) == 1.0
    rng = np.random.default_rng(0)
    sim = distinct_per_batch(rng.integers(0, 80, 64 * 4000), 64).mean()
    assert sim == pytest.approx(44.23, abs=0.15)


def test_distinct_per_batch_counts_by_hand():
    draws = [0, 0, 1, 2, 5, 5, 5, 5, 3, 4, 3]  # batches of 4: {0,1,2}, {5}; trailing 3 dropped
    np.testing.assert_array_equal(distinct_per_batch(draws, 4), [3, 1])
    np.testing.assert_array_equal(distinct_per_batch(np.arange(8).reshape(2, 4), 4), [4, 4])


def test_spearman_and_order_bias_by_hand_including_ties():
    assert order_bias(np.arange(50)) == pytest.approx(1.0)
    assert order_bias(np.arange(50)[::-1]) == pytest.approx(-1.0)
    # ranks with ties averaged: x -> 1, 2.5, 2.5, 4 and y -> 1, 3, 2, 4; centred, their
    # covariance is 4.5 against variances 4.5 and 5, so rho = 4.5 / sqrt(22.5) = 3 / sqrt(10)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(3 / np.sqrt(10))
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0  # no order at all (scipy: nan)


def test_chi_square_agrees_with_scipy_and_by_hand():
    # by hand: counts (10, 20, 30) against uniform 20 each -> (100 + 0 + 100) / 20 = 10, dof 2,
    # p = exp(-10 / 2) for 2 degrees of freedom
    out = chi_square([10, 20, 30])
    assert out["chi2"] == pytest.approx(10.0) and out["dof"] == 2
    assert out["p"] == pytest.approx(np.exp(-5.0))
    counts = np.array([12, 30, 18, 40])
    share = np.array([1.0, 2.0, 1.0, 3.0])
    want = scipy.stats.chisquare(counts, counts.sum() * share / share.sum())
    got = chi_square(counts, share)
    assert got["chi2"] == pytest.approx(want.statistic) and got["p"] == pytest.approx(want.pvalue)
