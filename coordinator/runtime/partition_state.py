"""The states of one `__consumer_offsets` partition, and which moves between them are legal.

States (Kafka's `CoordinatorRuntime.CoordinatorState`):

    INITIAL --> LOADING --> ACTIVE
                  ^   \\       |
                  |    v      v
                  +--- FAILED          (any state) --> CLOSED

`PartitionRuntime` (`partition.py`) moves through them and checks each move against
`VALID_PREVIOUS`.
"""

from __future__ import annotations

import enum


class PartitionState(enum.Enum):
    INITIAL = "initial"
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    CLOSED = "closed"


def failed_to_load(failed: int, total: int) -> str:
    """How the log and /readyz alike say that some partitions cannot serve."""
    return f"{failed} of {total} partitions failed to load: the groups they hold cannot be served"


VALID_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.INITIAL: frozenset(),
    PartitionState.LOADING: frozenset({PartitionState.INITIAL, PartitionState.FAILED}),
    PartitionState.ACTIVE: frozenset({PartitionState.LOADING}),
    PartitionState.FAILED: frozenset({PartitionState.LOADING, PartitionState.ACTIVE}),
    PartitionState.CLOSED: frozenset({PartitionState.INITIAL, PartitionState.LOADING,
                                      PartitionState.ACTIVE, PartitionState.FAILED}),
}


class IllegalPartitionTransition(Exception):
    pass
