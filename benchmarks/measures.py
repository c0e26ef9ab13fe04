"""Statistics of a loader's draws: source diversity per batch, order bias, uniformity.

All functions take the source-image index of every drawn patch, in draw order (int array
``[N]``), or per-image counts; none of them touches TensorFlow.
"""

from __future__ import annotations

import math

import numpy as np


def ideal_distinct(n_images: int, batch_size: int) -> float:
    """Expected number of distinct images in a batch of ``batch_size`` independent uniform draws
    from ``n_images`` images: ``n (1 - (1 - 1/n)^B)`` (44.2 for n = 80, B = 64).

    Raises:
        ValueError: if ``n_images < 1``.
    """
    if n_images < 1:
        raise ValueError(f"n_images must be >= 1, got {n_images}")
    return n_images * (1.0 - (1.0 - 1.0 / n_images) ** batch_size)


def distinct_per_batch(image: np.ndarray, batch_size: int) -> np.ndarray:
    """Distinct source images in each consecutive full batch of ``batch_size`` draws.

    Args:
        image: int ``[N]`` source index of each draw in draw order (or ``[n_batches, B]``).
        batch_size: B; a trailing partial batch is dropped.

    Returns:
        int ``[N // B]``.
    """
    image = np.asarray(image).reshape(-1)
    n = len(image) // batch_size
    batches = np.sort(image[: n * batch_size].reshape(n, batch_size), axis=1)
    return 1 + np.count_nonzero(np.diff(batches, axis=1), axis=1)


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..N of ``x`` with ties given their average rank (as ``scipy.stats.rankdata``)."""
    x = np.asarray(x).reshape(-1)
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    # start of each run of equal values, and the average rank of that run
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], len(x)]
    avg = (starts + ends + 1) / 2.0  # ranks starts+1 .. ends averaged
    out = np.empty(len(x), dtype=np.float64)
    out[order] = np.repeat(avg, ends - starts)
    return out


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation: Pearson's correlation of the tie-averaged ranks, in [-1, 1]
    (0 when either input is constant).

    Raises:
        ValueError: if the inputs differ in length or hold fewer than 2 values.
    """
    x, y = np.asarray(x).reshape(-1), np.asarray(y).reshape(-1)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(
            f"spearman needs two sequences of equal length >= 2, got {len(x)}, {len(y)}"
        )
    rx, ry = ranks(x) - (len(x) + 1) / 2.0, ranks(y) - (len(y) + 1) / 2.0
    den = math.sqrt(float(rx @ rx) * float(ry @ ry))
    return float(rx @ ry / den) if den > 0 else 0.0


def order_bias(image: np.ndarray) -> float:
    """Spearman correlation between draw order (0, 1, ...) and source index: about 0 for an
    unbiased shuffle of sorted data (|rho| ~ 1/sqrt(N)), near 1 when early draws come from the
    first images."""
    image = np.asarray(image).reshape(-1)
    return spearman(np.arange(len(image)), image)


def chi_square(counts: np.ndarray, expected_share: np.ndarray | None = None) -> dict:
    """Pearson's chi-square test of per-image draw counts against expected shares.

    Args:
        counts: int ``[n]`` draws of each image.
        expected_share: ``[n]`` non-negative weights (normalised here); None for uniform.

    Returns:
        ``{"chi2": statistic, "dof": n - 1, "p": upper-tail p-value, "chi2_per_dof": ...}``;
        under the null hypothesis chi2 / dof is about 1.

    Raises:
        ValueError: on an empty ``counts`` or an expected share of 0 where draws were counted.
    """
    counts = np.asarray(counts, dtype=np.float64).reshape(-1)
    if counts.size < 1:
        raise ValueError("chi_square needs at least one count")
    share = np.ones_like(counts) if expected_share is None else np.asarray(expected_share, float)
    expected = counts.sum() * share / share.sum()
    if np.any((expected == 0) & (counts > 0)):
        raise ValueError("an image with expected share 0 was drawn")
    keep = expected > 0
    stat = float(np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep]))
    dof = int(keep.sum()) - 1
    from scipy.special import gammaincc  # upper regularised gamma: the chi-square tail

    p = float(gammaincc(dof / 2.0, stat / 2.0)) if dof > 0 else 1.0
    return {"chi2": stat, "dof": dof, "p": p, "chi2_per_dof": stat / dof if dof else 0.0}


def draw_stats(
    image: np.ndarray,
    n_images: int,
    batch_size: int,
    first: int = 10_000,
    expected_share: np.ndarray | None = None,
) -> dict:
    """All shuffle figures for one sequence of draws (see the functions above)."""
    image = np.asarray(image).reshape(-1)
    d = distinct_per_batch(image, batch_size)
    counts = np.bincount(image, minlength=n_images)
    out = {
        "draws": int(len(image)),
        "rho_first": order_bias(image[:first]),
        "first": int(min(first, len(image))),
        "rho_all": order_bias(image),
        "distinct_mean": float(d.mean()) if len(d) else float("nan"),
        "distinct_min": int(d.min()) if len(d) else 0,
        "distinct_ideal": ideal_distinct(n_images, batch_size),
        "chi2_uniform": chi_square(counts),
    }
    if expected_share is not None:
        out["chi2_expected"] = chi_square(counts, expected_share)
    return out
