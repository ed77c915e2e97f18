"""`kgc repair --accept-loss PARTITION DATA_DIR`: bring back a partition kgc refuses.

kgc refuses a partition whose closed segments are not what their manifest recorded when
they closed (truncated, emptied, deleted, changed) or that do not scan whole: it never
loads such a log silently, since acknowledged commits may be gone. Repair is the one
explicit way back, run while kgc is stopped: it accepts what is on disk as the new truth
(a closed segment that does not scan whole is cut at its first bad batch, the cut bytes
kept as `.torn-N`), records the manifest anew, and prints what was accepted. The groups
of that partition go back to the offsets that survive; `kgc inspect` before and after
shows what that means for each group. It takes the partition's lock in the data dir
(`storage.dir_lock`) while it works, so it refuses to run while a kgc serves that
partition, whose appends would race the rewrite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from storage.dir_lock import DataDirInUse, lock_partitions
from storage.file_store import partition_dir
from storage.partition_log import PartitionLog
from storage.segment import SegmentIO


def accept_loss(data_dir: str | Path, partition: int) -> list[str]:
    directory = partition_dir(Path(data_dir), partition)
    if not directory.is_dir():
        raise FileNotFoundError(f"no partition directory {directory}")
    with lock_partitions(data_dir, [partition]):
        return PartitionLog(directory, 1, SegmentIO()).accept_loss()


def add_repair_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("repair", help="accept the loss in a damaged partition, with kgc stopped",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("data_dir", metavar="DATA_DIR", help="the data dir of a stopped kgc")
    p.add_argument("--accept-loss", type=int, required=True, metavar="PARTITION",
                   help="the partition whose damaged log is accepted as it is on disk")
    p.set_defaults(handler=run_repair, log_level="WARNING")
    return p


def run_repair(args: argparse.Namespace, out=None) -> int:
    out = out or sys.stdout
    try:
        accepted = accept_loss(args.data_dir, args.accept_loss)
    except FileNotFoundError as e:
        print(f"kgc repair: {e}", file=sys.stderr)
        return 2
    except DataDirInUse as e:
        print(f"kgc repair: {e}; stop it first: nothing was changed", file=sys.stderr)
        return 2
    for line in accepted or ["nothing was damaged"]:
        print(f"partition {args.accept_loss}: {line}", file=out)
    print(f"partition {args.accept_loss}: manifest reset; kgc records what is on disk at its next start", file=out)
    return 0
