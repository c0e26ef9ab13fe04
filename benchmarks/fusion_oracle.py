"""How much can a frame's neighbours add, and does alignment matter? A linear oracle on the demo
sequences, measured in seconds, no training.

    python benchmarks/fusion_oracle.py [--frames 3]

For every frame t of every demo sequence (``sr.data.demo``), the LR (x4, the project's operator)
of the window t-k+1..t (the first frame standing in before the start) predicts the HR of frame t
by least squares: each 4x4 HR block from the 5x5 LR neighbourhoods of its LR pixel in the k
frames (ridge 1e-4, plus a constant). Fitted on the training sequences, scored on the validation
sequences: PSNR (dB, peak 1) of the clipped prediction over all blocks at least 5 LR pixels from
the borders. The neighbours enter:

- ``as they are`` (shift-agnostic fusion: the best linear early fusion without alignment);
- aligned onto frame t by the demo's true camera path (``demo_sequence_paths``), warped with a
  Fourier shift (``sr.models.align.shift_frames``), a cubic spline or bilinear interpolation
  (``scipy.ndimage.shift``, orders 3 and 1);
- aligned by the shift ``sr.models.align.estimate_shift`` estimates from the LR frames (what
  ``model=espcn_mf`` with ``align=global`` does), on whole frames.

Prints a markdown table; the 1-frame row is the single-image linear baseline.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from scipy import ndimage  # noqa: E402

from sr.config import PROJECT_ROOT  # noqa: E402
from sr.core.color import y_channel  # noqa: E402
from sr.core.degrade import make_lr  # noqa: E402
from sr.core.frames import list_sequences  # noqa: E402
from sr.data.demo import demo_sequence_paths, ensure_demo_sequences  # noqa: E402

SCALE, RADIUS, MARGIN = 4, 2, 5


def load_split(root, split: str) -> list[tuple[list, list, np.ndarray]]:
    """``[(hr frames, lr frames, true offsets in HR pixels)]`` of a split, Y in [0, 1]."""
    paths = demo_sequence_paths()
    out = []
    for seq in list_sequences(root / split, "folder"):
        hr = [y_channel(np.asarray(Image.open(f))).astype(np.float32) for f in seq.files]
        lr = [np.asarray(make_lr(h[None, ..., None], SCALE))[0, ..., 0] / 255.0 for h in hr]
        out.append(([h / 255.0 for h in hr], lr, paths[f"{split}/{seq.name}"]))
    return out


def warp(frame: np.ndarray, shift: np.ndarray, how: str) -> np.ndarray:
    """``frame`` moved by ``shift`` LR pixels (``out(x) = in(x - shift)``)."""
    if how == "fourier":
        import tensorflow as tf

        from sr.models.align import shift_frames

        moved = shift_frames(tf.constant(frame[None], tf.float32), tf.constant(shift[None]))
        return moved.numpy()[0]
    return ndimage.shift(frame, shift, order={"cubic": 3, "bilinear": 1}[how], mode="mirror")


def design(seqs, frames: int, how: str | None, shifts: str) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares rows: k 5x5 LR neighbourhoods (+1) -> the 4x4 HR block of frame t."""
    import tensorflow as tf

    from sr.models.align import estimate_shift

    xs, ys = [], []
    side = 2 * RADIUS + 1
    for hr, lr, offsets in seqs:
        for t in range(len(hr)):
            h, w = lr[t].shape
            rows, cols = np.arange(MARGIN, h - MARGIN), np.arange(MARGIN, w - MARGIN)
            parts = []
            for j in (max(t - (frames - 1 - i), 0) for i in range(frames)):
                frame = lr[j]
                if j != t and how is not None:
                    if shifts == "true":
                        shift = ((offsets[j] - offsets[t]) / SCALE).astype(np.float32)
                    else:
                        pair = tf.constant(np.stack([lr[t], lr[j]])[:, None], tf.float32)
                        shift = estimate_shift(pair[0], pair[1]).numpy()[0]
                    frame = warp(frame, shift, how)
                patches = [
                    frame[rows[:, None] + dy, cols[None, :] + dx]
                    for dy in range(-RADIUS, RADIUS + 1)
                    for dx in range(-RADIUS, RADIUS + 1)
                ]
                parts.append(np.stack(patches, -1).reshape(-1, side * side))
            xs.append(np.concatenate(parts, 1))
            blocks = [
                hr[t][rows[:, None] * SCALE + a, cols[None, :] * SCALE + b]
                for a in range(SCALE)
                for b in range(SCALE)
            ]
            ys.append(np.stack(blocks, -1).reshape(-1, SCALE * SCALE))
    x = np.concatenate(xs)
    return np.concatenate([x, np.ones((len(x), 1), x.dtype)], 1), np.concatenate(ys)


def psnr_of_fit(train, val, frames: int, how, shifts: str) -> tuple[float, float]:
    """(training, validation) PSNR in dB of the least-squares fit."""
    x, y = design(train, frames, how, shifts)
    weights = np.linalg.solve(x.T @ x + 1e-4 * np.eye(x.shape[1]), x.T @ y)
    xv, yv = design(val, frames, how, shifts)
    fit = np.mean((x @ weights - y) ** 2)
    held = np.mean((np.clip(xv @ weights, 0, 1) - yv) ** 2)
    return -10 * np.log10(fit), -10 * np.log10(held)


def main(argv=None) -> dict[str, tuple[float, float]]:
    """Print the table; returns ``{row label: (training PSNR, validation PSNR)}``."""
    parser = argparse.ArgumentParser(prog="fusion_oracle.py", description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=3, help="k of the multi-frame rows")
    parser.add_argument("--limit", type=int, help="fit on the first N training sequences only")
    args = parser.parse_args(argv)
    root = ensure_demo_sequences(PROJECT_ROOT / "data" / "demo")
    train, val = load_split(root, "train")[: args.limit], load_split(root, "val")
    k = args.frames
    cases = [
        ("1 frame", 1, None, "true"),
        (f"{k} frames as they are", k, None, "true"),
        (f"{k} frames, true shift, bilinear warp", k, "bilinear", "true"),
        (f"{k} frames, true shift, cubic-spline warp", k, "cubic", "true"),
        (f"{k} frames, true shift, Fourier shift", k, "fourier", "true"),
        (f"{k} frames, estimated shift (align=global)", k, "fourier", "estimated"),
    ]
    print("| neighbours | training PSNR (dB) | validation PSNR (dB) | vs 1 frame |")
    print("| --- | --- | --- | --- |")
    base = None
    rows = {}
    for label, frames, how, shifts in cases:
        fit, held = psnr_of_fit(train, val, frames, how, shifts)
        base = held if base is None else base
        rows[label] = (fit, held)
        print(f"| {label} | {fit:.3f} | {held:.3f} | {held - base:+.3f} |", flush=True)
    return rows


if __name__ == "__main__":
    main()
    sys.exit(0)
