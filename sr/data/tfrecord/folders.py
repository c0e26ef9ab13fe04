"""The destination of a build: only shard sets are ever replaced or deleted.

Before anything is decoded, a destination that exists and holds anything but what a build writes
(``manifest.json`` and ``patches-XXXXX-of-YYYYY.tfrecord`` files) is refused
(:func:`check_destination`). The complete new set is renamed into place (:func:`swap_into_place`)
after a re-check, and old sets and leftovers are removed file by file, only files a build writes
(:func:`remove_build_folder`); a folder still holding anything else is kept (and named in a
warning). A destination given as a symlink is resolved (:func:`real_dir`).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from sr.data.tfrecord.params import MANIFEST, ShardError

log = logging.getLogger(__name__)

OWNER = "owner.pid"  # inside a temporary build folder: {"host", "pid"} of the building process

SHARD_FILE = re.compile(r"patches-\d{5,}-of-\d{5,}\.tfrecord")
BUILD_FILES = re.compile(
    r"manifest\.json|owner\.pid|bucket-\d+|patches-\d{5,}-of-\d{5,}\.tfrecord"
)


def real_dir(out_dir) -> Path:
    """``out_dir`` with symlinks resolved (the folder a build really writes)."""
    return Path(os.path.realpath(out_dir))


def swap_into_place(work: Path, out_dir: Path) -> None:
    """Rename the complete set in ``work`` to ``out_dir``, moving the previous set aside first
    and then deleting it file by file (only files a build writes)."""
    check_destination(out_dir)  # again: files may have been put there during the build
    final = out_dir.parent / f".{out_dir.name}.new"
    old = out_dir.parent / f".{out_dir.name}.old"
    for path in (final, old):
        if not remove_build_folder(path):
            raise ShardError(
                f"{path} (left by an earlier shard build) holds files a build does not write: "
                f"move them out and delete {path}, then run again"
            )
    work.rename(final)
    if out_dir.exists():
        out_dir.rename(old)
    final.rename(out_dir)
    remove_build_folder(old)  # keeps (and names) anything put there since the check


def foreign_files(out_dir) -> list[str]:
    """Sorted names of the entries of ``out_dir`` that a shard build does not write (anything
    but ``manifest.json`` and ``patches-XXXXX-of-YYYYY.tfrecord`` regular files; folders end in
    ``/``). Empty if ``out_dir`` is missing or empty."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    foreign = []
    for path in out_dir.iterdir():
        ours = path.name == MANIFEST or SHARD_FILE.fullmatch(path.name)
        if not (ours and path.is_file() and not path.is_symlink()):
            foreign.append(path.name + ("/" if path.is_dir() and not path.is_symlink() else ""))
    return sorted(foreign)


def check_destination(out_dir) -> None:
    """Refuse a shard destination that a build would have to delete anything but a shard set
    from. A missing or empty folder, or one holding only a previous set, is fine.

    Raises:
        ShardError: if ``out_dir`` is not a folder, or holds other files; names the folder, a
            few of the files, and the fix.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ShardError(
            f"data.tfrecord_dir {out_dir} is a file, not a folder: set data.tfrecord_dir to an "
            "empty or new folder"
        )
    foreign = foreign_files(out_dir)
    if not foreign:
        return
    few = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    raise ShardError(
        f"refusing to build TFRecord shards into {out_dir}: it holds {len(foreign)} file(s) that "
        f"a shard build did not write ({few}), and a build replaces the whole folder. Set "
        "data.tfrecord_dir to an empty or new folder (or null for the default under "
        f"<data_root>/tfrecords), or move those files out of {out_dir}."
    )


def remove_build_folder(path: Path) -> bool:
    """Delete the files a build writes in ``path`` (manifest, shards, buckets, owner file), then
    ``path`` if it is empty. Anything else is kept, with a warning naming it.

    Returns:
        Whether ``path`` is gone.
    """
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        return False  # not a build's folder
    kept = []
    try:
        entries = list(path.iterdir())
    except FileNotFoundError:
        return True
    for f in entries:
        if BUILD_FILES.fullmatch(f.name) and (f.is_symlink() or not f.is_dir()):
            f.unlink(missing_ok=True)
        else:
            kept.append(f.name)
    if not kept:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:  # a file appeared meanwhile
            kept = sorted(f.name for f in path.iterdir())
    log.warning(
        "kept %s: it holds files a shard build does not write (%s); move them out and delete it",
        path,
        ", ".join(sorted(kept)[:5]),
    )
    return False
