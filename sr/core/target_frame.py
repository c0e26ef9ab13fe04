"""The target frame of a window of frames (``data.target_frame``, ``model.target_frame``), without
TensorFlow: the config checks it before TensorFlow starts."""

from __future__ import annotations

TARGETS = ("last", "center")  # data.target_frame's names; an index 0..k-1 is the third choice


def target_index(frames: int, target_frame) -> int:
    """Index of the target frame in a window of ``frames`` frames.

    Args:
        frames: k >= 1.
        target_frame: a name of :data:`TARGETS` (``last``; ``center``, k odd) or an integer
            0..k-1 (also as a string of digits, as a command line may give it).

    Raises:
        ValueError: if the target is not a frame of the window (names ``data.target_frame``).
    """
    last, center = TARGETS
    if isinstance(target_frame, str) and target_frame.lstrip("-").isdigit():
        target_frame = int(target_frame)
    if target_frame == last:
        return frames - 1
    if target_frame == center:
        if frames % 2 == 0:
            raise ValueError(
                f"data.target_frame=center needs an odd data.frames, got {frames}: a window of "
                f"{frames} frames has no centre frame; use last or an index 0..{frames - 1}"
            )
        return frames // 2
    if isinstance(target_frame, int) and not isinstance(target_frame, bool):
        if 0 <= target_frame < frames:
            return target_frame
    raise ValueError(
        f"data.target_frame={target_frame!r} is not a frame of the window of data.frames="
        f"{frames}: use {last}, {center} or an index 0..{frames - 1}"
    )
