"""A `Timer` fired only by `poll(now_ms)`, like Kafka's MockCoordinatorTimer.

A heap of (deadline, sequence, key) plus a dict of live entries: rescheduling or
cancelling a key leaves its old heap entry behind, recognised as stale by its sequence.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

from coordinator.common.timer import TimerOp


@dataclass(frozen=True, slots=True)
class _Entry:
    deadline_ms: int
    seq: int
    op: TimerOp


class ManualTimer:
    def __init__(self, now_ms: Callable[[], int]):
        self._now_ms = now_ms
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, _Entry] = {}
        self._seq = 0

    def schedule(self, key: Hashable, delay_ms: int, op: TimerOp) -> None:
        self._seq += 1
        entry = _Entry(self._now_ms() + delay_ms, self._seq, op)
        self._live[key] = entry
        heapq.heappush(self._heap, (entry.deadline_ms, entry.seq, key))

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._live

    def deadline_ms(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return entry.deadline_ms if entry else None

    def keys(self) -> set[Hashable]:
        return set(self._live)

    def poll(self, now_ms: int) -> Iterator[tuple[Hashable, TimerOp]]:
        """Yield due timers one at a time, earliest first.

        Lazily, so that a timer scheduled or cancelled by an op the caller runs before
        asking for the next one is seen, as on the real partition executor.
        """
        while self._heap and self._heap[0][0] <= now_ms:
            _, seq, key = heapq.heappop(self._heap)
            entry = self._live.get(key)
            if entry is None or entry.seq != seq:
                continue
            del self._live[key]
            yield key, entry.op
