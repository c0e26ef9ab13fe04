"""Cut an image folder into shuffled TFRecord shards with a manifest.

    python scripts/make_tfrecords.py                                   # the demo photos
    python scripts/make_tfrecords.py data.hr_dir=/data/DIV2K/DIV2K_train_HR data.num_shards=20
    python scripts/make_tfrecords.py --verify 200                      # then check 200 records

Takes the same ``data.*`` overrides as ``train.py`` and writes where ``train.py data=tfrecord``
reads (``data.tfrecord_dir``, default ``data/tfrecords/<folder>-<hash>``). Existing shards whose
manifest matches the config and the source files are kept unless ``--force``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from hydra.errors import ConfigCompositionException  # noqa: E402

from sr.config import ConfigError, build_source, compose  # noqa: E402
from sr.data import tfrecord  # noqa: E402
from sr.data.demo import ensure_demo_for  # noqa: E402
from sr.data.images import ImageFolderError  # noqa: E402

log = logging.getLogger("make_tfrecords")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. data.hr_dir=PATH")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument(
        "--verify",
        type=int,
        default=0,
        metavar="N",
        help="afterwards compare N random records with their source pixels",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    try:
        cfg = compose("data=tfrecord", *args.overrides)
        loader = build_source(cfg)
        ensure_demo_for([loader.hr_dir], cfg.demo_dir)
        manifest = loader.ensure_shards(force=args.force)
    except ConfigCompositionException as e:  # a typo, or a key of the other mode
        log.error("%s: %s", e, e.__cause__)
        return 2
    except (ConfigError, ImageFolderError) as e:
        log.error("%s", e)
        return 2
    print(
        f"{manifest['records']} patches of {manifest['source']['files']} images in "
        f"{len(manifest['shards'])} shards: {loader.tfrecord_dir}"
    )
    if args.verify:
        n = tfrecord.verify_shards(loader.tfrecord_dir, args.verify)
        print(f"verified {n} records: identical to their source pixels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
