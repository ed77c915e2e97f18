"""The state machine's `Timer` on the asyncio loop: an expiry becomes a partition write.

A timer never runs its op inside the loop callback. Expiry hands the entry to the
partition (`on_expired`), which enqueues a write event; when that event runs, the op is
run only if the entry is still the one scheduled under its key. A heartbeat that
reschedules `heartbeat-g-m` after the old deadline passed, but before the expiry event
ran, must win (Kafka's `EventBasedCoordinatorTimer` makes the same check).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from coordinator.group.timer import TimerOp


@dataclass(eq=False, slots=True)
class TimerEntry:
    key: str
    op: TimerOp
    handle: asyncio.TimerHandle | None = field(default=None, repr=False)


class LoopTimer:
    def __init__(self, loop: asyncio.AbstractEventLoop, on_expired: Callable[[LoopTimer, TimerEntry], None]):
        self._loop = loop
        self._on_expired = on_expired
        self._entries: dict[str, TimerEntry] = {}

    def schedule(self, key: str, delay_ms: int, op: TimerOp) -> None:
        self.cancel(key)
        entry = TimerEntry(key, op)
        entry.handle = self._loop.call_later(max(delay_ms, 0) / 1000, self._on_expired, self, entry)
        self._entries[key] = entry

    def cancel(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry.handle.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._entries

    def claim(self, entry: TimerEntry) -> bool:
        """Remove `entry` if it is still the live one for its key; the caller then runs its op."""
        if self._entries.get(entry.key) is not entry:
            return False
        del self._entries[entry.key]
        return True

    def cancel_all(self) -> None:
        for entry in self._entries.values():
            entry.handle.cancel()
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
