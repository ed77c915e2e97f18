"""Timers the state machine schedules: keyed, replaceable, fired as partition writes.

An expired timer's op runs on its partition's executor like a request and returns a
`Result` that goes through the same write path. Scheduling a key that is already
scheduled replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from coordinator.group.result import Result

TimerOp = Callable[[], Result]


class Timer(Protocol):
    def schedule(self, key: str, delay_ms: int, op: TimerOp) -> None: ...

    def cancel(self, key: str) -> None: ...

    def is_scheduled(self, key: str) -> bool: ...


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


def expire_offsets_key() -> str:
    return "expire-offsets"
