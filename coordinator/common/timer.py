"""Timers the state machine schedules: keyed, replaceable, fired as partition writes
(Kafka's `CoordinatorTimer`).

An expired timer's op runs on its partition's executor like a request and returns a
`Result` that goes through the same write path. Scheduling a key that is already
scheduled replaces it. The keys the groups use are `coordinator.group.timer`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol

from coordinator.common.result import Result

TimerOp = Callable[[], Result]


class KeyedTimerOp(Protocol):
    """A timer op that carries the key it is scheduled under (a member's session timer)."""

    @property
    def key(self) -> Hashable: ...

    def __call__(self) -> Result: ...


class Timer(Protocol):
    def schedule(self, key: Hashable, delay_ms: int, op: TimerOp) -> None: ...

    def cancel(self, key: Hashable) -> None: ...

    def is_scheduled(self, key: Hashable) -> bool: ...
