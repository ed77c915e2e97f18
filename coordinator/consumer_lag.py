"""Consumer lag of one partition: the log end minus the committed offset, or unknown and why.

Lag is only as true as the log end offset the upstream reports. Some upstreams answer
ListOffsets "latest" with something other than the end offset: the bundled Tansu gives
the base offset of the partition's last batch + 1, which is the end only when that batch
holds one record. Lag computed from such a number is too small, and below zero when the
group has read past it. A negative lag cannot be true, so it is never reported: the lag
is unknown, with the reason (the committed offset is past the reported end). A lag that
is merely too small cannot be told from a true one; docs/operations.md says which upstreams do
this.
"""

from __future__ import annotations

from typing import NamedTuple

NOT_FETCHED = "log end offset not fetched yet"
NO_COMMIT = "no committed offset"


class Lag(NamedTuple):
    value: int | None                # None: unknown, `reason` says why
    reason: str | None = None


class LogEnd(NamedTuple):
    """Where a partition's log ended when the upstream last said (`as_of_ms`, wall clock),
    or why that is unknown. A known end outlives failed refreshes, so its time shows how
    stale a lag computed from it may be."""
    offset: int | None               # None: unknown, `error` says why
    error: str | None
    as_of_ms: int | None = None

    def lag(self, committed: int | None) -> Lag:
        return partition_lag(committed, self.offset, self.error)


def partition_lag(committed: int | None, log_end: int | None, end_error: str | None = None) -> Lag:
    """`end_error` says why `log_end` is None (an upstream error), if it is known."""
    if committed is None or committed < 0:
        return Lag(None, NO_COMMIT)
    if log_end is None:
        return Lag(None, end_error or NOT_FETCHED)
    if committed > log_end:
        return Lag(None, f"committed offset {committed} is past the log end offset {log_end} the upstream "
                         "reports (an upstream whose ListOffsets counts batches, not records, reports too "
                         "low an end: the bundled Tansu does)")
    return Lag(log_end - committed)
