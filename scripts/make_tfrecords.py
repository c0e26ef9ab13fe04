"""Cut an image folder into shuffled TFRecord shards with a manifest.

    python scripts/make_tfrecords.py                                   # the demo photos
    python scripts/make_tfrecords.py data.hr_dir=/data/DIV2K/DIV2K_train_HR data.num_shards=20
    python scripts/make_tfrecords.py --verify                          # then read every record
    python scripts/make_tfrecords.py --verify 200                      # ... and compare 200

Takes the same ``data.*`` overrides as ``train.py`` and writes where ``train.py data=tfrecord``
reads (``data.tfrecord_dir``, default ``data/tfrecords/<folder>-<hash>``). Existing shards whose
manifest matches the config and the source files are kept unless ``--force``.

``--verify`` reads every record of every shard (record CRC, parse, shapes, counts); ``--verify N``
also compares N random records with the pixels of their source images. Corrupt shards are named,
the set is marked stale (its manifest removed, so the next run rebuilds it), exit code 1.
"""

from __future__ import annotations

import argparse
import logging
import sys

from hydra.errors import ConfigCompositionException

from sr.config import ConfigError, build_source, compose  # no TensorFlow until build_source
from sr.core.errors import ImageFolderError
from sr.core.quiet import quiet_tensorflow
from sr.data.demo import ensure_demo_for

log = logging.getLogger("make_tfrecords")


def _verify_count(argv: list[str]) -> list[str]:
    """``--verify`` not followed by a number means ``--verify 0`` (check every record, compare
    none): without this, argparse would take the next override as N."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--verify" and (i + 1 == len(out) or not out[i + 1].isdigit()):
            out[i] = "--verify=0"
    return out


def refuse(e: Exception) -> int:
    """Log why the config or the data is refused; exit code 2."""
    if isinstance(e, ConfigCompositionException):  # a typo, or a key of the other mode
        log.error("%s: %s", e, e.__cause__)
    else:
        log.error("%s", e)
    return 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. data.hr_dir=PATH")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument(
        "--verify",
        type=int,
        nargs="?",
        const=0,
        default=None,
        metavar="N",
        help="afterwards read every record of every shard (CRC and parse), and compare N random "
        "records with their source pixels (default N: 0)",
    )
    args = parser.parse_args(_verify_count(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    try:
        cfg = compose("data=tfrecord", *args.overrides)  # the command line, checked
    except (ConfigCompositionException, ConfigError) as e:
        return refuse(e)
    quiet_tensorflow()  # the command line is checked: TensorFlow, its INFO lines hidden
    from sr.data import tfrecord

    try:
        loader = build_source(cfg)
        ensure_demo_for([loader.hr_dir], cfg.demo_dir)
        manifest = loader.ensure_shards(force=args.force)
    except (ConfigCompositionException, ConfigError, ImageFolderError) as e:
        return refuse(e)
    print(
        f"{manifest['records']} patches of {manifest['source']['files']} images in "
        f"{len(manifest['shards'])} shards: {loader.tfrecord_dir}"
    )
    if args.verify is None:
        return 0
    out_dir = loader.tfrecord_dir
    bad = tfrecord.check_shards(out_dir, manifest)
    if bad:
        tfrecord.mark_stale(out_dir)
        log.error("%s", tfrecord.describe_bad_shards(out_dir, bad))
        return 1
    print(f"checked all {manifest['records']} records of {len(manifest['shards'])} shards")
    if args.verify > 0:
        try:
            n = tfrecord.verify_shards(out_dir, args.verify)
        except ValueError as e:  # pixels differ from the source (ShardError: a corrupt record)
            log.error("%s", e)
            return 1
        print(f"verified {n} records: identical to their source pixels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
