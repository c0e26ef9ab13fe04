"""Unsharp masking of the HR target (BasicSR ``USMSharp``); placeholder until the tested module."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def _gaussian(radius: int) -> np.ndarray:
    if radius % 2 == 0:
        radius += 1
    sigma = 0.3 * ((radius - 1) * 0.5 - 1) + 0.8
    x = np.arange(radius) - (radius - 1) / 2
    k = np.exp(-(x**2) / (2 * sigma**2))
    return k / k.sum()


def _matrix(n: int, k: np.ndarray) -> np.ndarray:
    """[n, n]: correlation with k, borders reflected (reflect-101)."""
    pad = len(k) // 2
    m = np.zeros((n, n))
    for i in range(n):
        for t, w in enumerate(k):
            j = i + t - pad
            j = -j if j < 0 else (2 * (n - 1) - j if j >= n else j)
            m[i, j] += w
    return m.astype(np.float32)


def _filter(images, k):
    from sr.core.interpolate import separable
    h, w = images.shape[1], images.shape[2]
    rows, cols = tf.constant(_matrix(h, k)), tf.constant(_matrix(w, k))
    return separable(images, rows, cols)


def usm_sharp(images, weight=0.5, radius=50, threshold=10):
    k = _gaussian(radius)
    images = tf.convert_to_tensor(images, tf.float32)
    blurred = _filter(images, k)
    residual = images - blurred
    mask = tf.cast(tf.abs(residual) * 255 > threshold, tf.float32)
    soft = _filter(mask, k)
    sharp = tf.clip_by_value(images + weight * residual, 0.0, 1.0)
    return soft * sharp + (1 - soft) * images
