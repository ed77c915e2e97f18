"""Timers the state machine schedules: keyed, replaceable, fired as partition writes.

An expired timer's op runs on its partition's executor like a request and returns a
`Result` that goes through the same write path. Scheduling a key that is already
scheduled replaces it.

Keys are hashable values: strings for the per-group and per-partition timers, and for
a member's session a tuple of ids the member already holds (`heartbeat_key`), which a
member builds once and keeps with its expiry op (`membership.HeartbeatExpiry`), so a
heartbeat builds no key. A tuple never equals a string, so the two kinds cannot collide.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol

from coordinator.group.result import Result

TimerOp = Callable[[], Result]


class KeyedTimerOp(Protocol):
    """A timer op that carries the key it is scheduled under (a member's session timer)."""

    key: Hashable

    def __call__(self) -> Result: ...


class Timer(Protocol):
    def schedule(self, key: Hashable, delay_ms: int, op: TimerOp) -> None: ...

    def cancel(self, key: Hashable) -> None: ...

    def is_scheduled(self, key: Hashable) -> bool: ...


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    # A tuple shares the two id strings the member already holds, where a joined string
    # would be a new object per member (BENCHMARKS.md, "Memory per member").
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


def expire_offsets_key() -> str:
    return "expire-offsets"
