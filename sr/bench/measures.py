"""Statistics of a loader's draws: source diversity per batch, order bias, uniformity.

All functions take the source-image index of every drawn patch, in draw order (int array
``[N]``), or per-image counts; none of them touches TensorFlow.
"""

from __future__ import annotations

import numpy as np
import scipy.stats


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


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (``scipy.stats.spearmanr``, ties given their average rank), in
    [-1, 1]; 0 when either input is constant (where scipy returns NaN).

    Raises:
        ValueError: if the inputs differ in length or hold fewer than 2 values.
    """
    x, y = np.asarray(x).reshape(-1), np.asarray(y).reshape(-1)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(
            f"spearman needs two sequences of equal length >= 2, got {len(x)}, {len(y)}"
        )
    if np.all(x == x[0]) or np.all(y == y[0]):
        return 0.0
    return float(scipy.stats.spearmanr(x, y).statistic)


def order_bias(image: np.ndarray) -> float:
    """Spearman correlation between draw order (0, 1, ...) and source index: about 0 for an
    unbiased shuffle of sorted data (|rho| ~ 1/sqrt(N)), near 1 when early draws come from the
    first images."""
    image = np.asarray(image).reshape(-1)
    return spearman(np.arange(len(image)), image)


def chi_square(counts: np.ndarray, expected_share: np.ndarray | None = None) -> dict:
    """Pearson's chi-square test of per-image draw counts against expected shares
    (``scipy.stats.chisquare`` over the images of non-zero expected share).

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
    dof = int(keep.sum()) - 1
    if dof < 1:  # one image (or no draw): nothing to test, where scipy would return NaN
        return {"chi2": 0.0, "dof": dof, "p": 1.0, "chi2_per_dof": 0.0}
    stat, p = scipy.stats.chisquare(counts[keep], expected[keep])
    return {"chi2": float(stat), "dof": dof, "p": float(p), "chi2_per_dof": float(stat) / dof}


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
