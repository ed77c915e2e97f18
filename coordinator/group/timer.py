"""The keys of the timers the state machine schedules (the `Timer` itself, keyed,
replaceable, fired as partition writes, is `coordinator.common.timer`).

Keys are tuples whose first item names the kind of timer; a group's timers carry the
group id second (`group_of` reads it back, so a failed timer op can be traced to the
one group it concerns). A member's session key holds ids the member already holds
(`heartbeat_key`), which a member builds once and keeps with its expiry op
(`classic.manager.HeartbeatExpiry`), so a heartbeat builds no key.
"""

from __future__ import annotations

from collections.abc import Hashable


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    # A tuple shares the two id strings the member already holds, where a joined string
    # would be a new object per member (docs/benchmarks/notes.md, "Memory per member").
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


# KIP-848 consumer group members (`consumer.manager`, `classic_members`).

def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-session", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", group_id, member_id)


def classic_join_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    """A classic member told to rejoin (REBALANCE_IN_PROGRESS) must do so within its rebalance timeout."""
    return ("consumer-classic-join", group_id, member_id)


def classic_sync_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    """A classic member that joined must send SyncGroup within its rebalance timeout."""
    return ("consumer-classic-sync", group_id, member_id)


_EXPIRE_OFFSETS_KEY = ("expire-offsets",)


def expire_offsets_key() -> tuple[str]:
    return _EXPIRE_OFFSETS_KEY


def group_of(key: Hashable) -> str | None:
    """The group a timer key belongs to; None for the partition's own timers."""
    return key[1] if isinstance(key, tuple) and len(key) > 1 else None
