"""The manifest (``manifest.json``, written last: a folder with one holds a complete set) and
staleness: a set is rebuilt when its manifest is missing or incomplete, when the parameters or
the source files changed, or when a shard is missing or of another size in bytes than written
(truncated)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from sr.core.images import ImageSet
from sr.core.runfiles import RunFileError, read_json
from sr.data.tfrecord.params import FORMAT, MANIFEST, PatchParams, normalized


def new_manifest(images: ImageSet, params: PatchParams, shards: list[dict], counts, seed) -> dict:
    """The manifest of a set just written: ``shards`` (``{"file", "records", "bytes"}`` each),
    ``counts`` records per image (in ``images`` order), the write-time shuffle's ``seed``
    (``build_seconds`` is added by the writer)."""
    return {
        "format": FORMAT,
        "records": int(sum(counts)),
        "shards": shards,
        "params": asdict(params),
        "source": {
            "hr_dir": str(images.folder.resolve()),
            "fingerprint": images.fingerprint(),
            "files": len(images.files),
            "skipped": list(images.skipped),
        },
        "images": [p.name for p in images.files],
        "patches_per_image": [int(c) for c in counts],
        "seed": seed,
    }


def read_manifest(out_dir) -> dict | None:
    """The manifest of a shard folder, or None if there is no complete set there (no file,
    unreadable JSON, another format). Check its content with :func:`manifest_problem`."""
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        return None
    try:  # the documented fallback: an unreadable manifest makes the set stale, rebuilt
        manifest = read_json(path, "the set is rebuilt")
    except RunFileError:  # stale_reason names it; the rebuild is logged
        return None
    return manifest if manifest.get("format") == FORMAT else None


def manifest_problem(manifest: dict) -> str | None:
    """What is missing or of the wrong type in a manifest (None: complete)."""
    want = {
        "records": int,
        "shards": list,
        "params": dict,
        "source": dict,
        "images": list,
        "patches_per_image": list,
    }
    for key, kind in want.items():
        if not isinstance(manifest.get(key), kind):
            return f"key {key!r} is missing or not a {kind.__name__}"
    if not isinstance(manifest["source"].get("fingerprint"), str):
        return "key 'source.fingerprint' is missing or not a str"
    if not all(isinstance(name, str) for name in manifest["images"]):
        return "key 'images' is not a list of file names"
    if not manifest["shards"]:
        return "it lists no shard"
    for i, shard in enumerate(manifest["shards"]):
        ok = isinstance(shard, dict) and isinstance(shard.get("file"), str)
        ok = ok and all(isinstance(shard.get(k), int) for k in ("records", "bytes"))
        if not ok:
            return f"shard entry {i} lacks 'file', 'records' or 'bytes' (an older version's)"
    try:
        PatchParams(**manifest["params"])
    except TypeError as e:
        return f"key 'params' does not describe the patches: {e}"
    return None


def stale_reason(manifest: dict | None, out_dir, images: ImageSet, params: PatchParams):
    """Why the shards in ``out_dir`` cannot serve ``images`` and ``params`` (None: usable).

    Stale: no manifest; a manifest with missing keys or wrong types; other parameters or source
    files; a shard missing, or of another size in bytes than the manifest recorded (truncated or
    overwritten).
    """
    if manifest is None:
        if (Path(out_dir) / MANIFEST).is_file():
            return f"{MANIFEST} of {out_dir} is unreadable or of another format (not {FORMAT})"
        return f"no shards in {out_dir}"
    problem = manifest_problem(manifest)
    if problem is not None:
        return f"{MANIFEST} of {out_dir} is incomplete: {problem}"
    if normalized(manifest["params"]) != asdict(params):
        return f"parameters changed: {manifest['params']} -> {asdict(params)}"
    if manifest["source"]["fingerprint"] != images.fingerprint():
        return f"the files of {images.folder} changed (names, sizes or mtimes)"
    for shard in manifest["shards"]:
        path = Path(out_dir) / shard["file"]
        if not path.is_file():
            return f"shard {shard['file']} is missing"
        size = path.stat().st_size
        if size != shard["bytes"]:
            return (
                f"shard {shard['file']} is {size} bytes, {shard['bytes']} when written "
                "(truncated or overwritten)"
            )
    return None


def mark_stale(out_dir) -> None:
    """Remove the manifest of ``out_dir``, so the next run (``train.py`` or
    ``scripts/make_tfrecords.py``) rebuilds the set."""
    (Path(out_dir) / MANIFEST).unlink(missing_ok=True)
