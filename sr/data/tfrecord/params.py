"""What a shard set is cut with (:class:`PatchParams`), the names of its files, and the error of
a shard folder that cannot serve (:class:`ShardError`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sr.core.images import ImageFolderError

MANIFEST = "manifest.json"
FORMAT = "sr-tfrecord-patches/1"
CHANNEL = "Y of ITU-R BT.601 as MATLAB rgb2ycbcr (16..235), uint8, rounded; gray images as is"
CHANNEL_RGB = "RGB, uint8; gray images in all three channels, flagged"


class ShardError(ImageFolderError):
    """A shard folder that cannot serve as a dataset: corrupt, truncated or unreadable shards,
    or a destination holding files a shard build did not write."""


@dataclass(frozen=True)
class PatchParams:
    """What a set of shards was cut with; shards are rebuilt when any of it changes."""

    patch_size: int  # HR patch P (pixels)
    scale: int
    margin: int  # extra pixels on each side of the HR patch (0 with pre-made LR)
    stride: int  # grid step between record corners (pixels)
    lr_dir: str | None  # absolute path of the pre-made LR folder, or None for bicubic LR
    channel: str = CHANNEL
    subimage: int = 0  # side of a record's sub-image (HR pixels); 0: records are the crops

    @property
    def crop(self) -> int:
        """Side of a training crop: P + 2 margin (HR pixels)."""
        return self.patch_size + 2 * self.margin

    @property
    def channels(self) -> int:
        """Channels of a record: 3 for RGB sets (``data.lr_from=rgb``), else 1."""
        return 3 if self.channel == CHANNEL_RGB else 1

    @property
    def record(self) -> int:
        """Side of a record's HR square: the sub-image, or the crop (HR pixels)."""
        return self.subimage or self.crop

    @property
    def align(self) -> int:
        """Record corners and crop offsets are multiples of this: ``scale`` with pre-made LR
        (so that the LR grid stays aligned with the HR), else 1."""
        return self.scale if self.lr_dir is not None else 1


def full_coverage_stride(subimage: int, crop: int, align: int = 1) -> int:
    """The largest grid step of ``subimage``-sized records that leaves no crop position out: any
    ``crop``-sized window at a multiple of ``align`` lies inside some record (pixels)."""
    return (subimage - crop) // align * align + align


def normalized(params: dict) -> dict:
    """A manifest's ``params`` with the fields it predates at their defaults (an older set of
    patches is still up to date)."""
    return asdict(PatchParams(**params))


def shard_name(i: int, n: int) -> str:
    """File name of shard ``i`` of ``n``: ``patches-XXXXX-of-YYYYY.tfrecord``."""
    return f"patches-{i:05d}-of-{n:05d}.tfrecord"


def shard_files(out_dir, manifest: dict) -> Sequence[str]:
    """Paths of the shards a manifest lists, in its order."""
    return [str(Path(out_dir) / s["file"]) for s in manifest["shards"]]
