"""The state machine's `Timer` on the asyncio loop: an expiry becomes a partition write.

A timer never runs its op inside the loop callback. Expiry hands the entry to the
partition (`on_expired`), which enqueues a write event; when that event runs, the op is
run only if the entry is still the one scheduled under its key. A heartbeat that
reschedules a member's session after the old deadline passed, but before the expiry
event ran, must win (Kafka's `EventBasedCoordinatorTimer` makes the same check).

Memory: a partition holds one deadline heap and at most one loop handle, armed for the
earliest deadline, rather than a loop handle per timer. A session timer is rescheduled on
every heartbeat, so a later deadline only moves the entry's `deadline`; the entry keeps
its place in the heap (at the older `heap_deadline`) and is pushed back when that place
comes due. Each entry is in the heap at most once, so the heap never grows with
heartbeats. A cancelled entry is left in the heap (lazy deletion) with its op dropped;
the heap is rebuilt when such leftovers outnumber the live entries.

Cost: that reschedule is the one timer call on the heartbeat path, so it is one dict
lookup, an identity check and two attribute stores. An entry out of the heap has an infinite
`heap_deadline`, which sends it down the slow path by the same comparison.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable, Hashable

from coordinator.common.timer import TimerOp

# uvloop rounds timers to whole milliseconds and may wake up to a millisecond early;
# deadlines that close are treated as due rather than re-armed for a sub-ms wait.
_SLACK_S = 0.001
_MIN_HEAP_TO_COMPACT = 64


class TimerEntry:
    __slots__ = ("key", "op", "deadline", "heap_deadline")

    def __init__(self, key: Hashable, op: TimerOp, deadline: float):
        self.key = key
        self.op: TimerOp | None = op
        self.deadline = deadline
        # The deadline this entry was pushed with; the heap orders by it, so it must not
        # change while the entry is in the heap (`deadline` may move later meanwhile).
        # Infinite while the entry is not in the heap.
        self.heap_deadline = deadline

    def __lt__(self, other: TimerEntry) -> bool:
        return self.heap_deadline < other.heap_deadline


class LoopTimer:
    def __init__(self, loop: asyncio.AbstractEventLoop, on_expired: Callable[[LoopTimer, TimerEntry], None]):
        self._loop = loop
        self._time = loop.time
        self._on_expired = on_expired
        self._entries: dict[Hashable, TimerEntry] = {}
        self._heap: list[TimerEntry] = []
        self._armed: asyncio.TimerHandle | None = None
        self._armed_at = 0.0

    def schedule(self, key: Hashable, delay_ms: int, op: TimerOp) -> None:
        deadline = self._time() + (delay_ms if delay_ms > 0 else 0) / 1000
        entry = self._entries.get(key)
        if entry is not None and deadline >= entry.heap_deadline:
            entry.op = op
            entry.deadline = deadline
            if entry.key is not key:
                # An equal key built by someone else (a member taking over the timer of its
                # pending id): keep the newer one, so the old key's strings can be freed.
                del self._entries[key]
                entry.key = key
                self._entries[key] = entry
            return
        self.cancel(key)
        entry = TimerEntry(key, op, deadline)
        self._entries[key] = entry
        self._push(entry)
        if self._heap[0] is entry:
            self._arm()

    def cancel(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry.op = None     # a leftover in the heap must not keep the op's closure alive
            if len(self._heap) > max(2 * len(self._entries), _MIN_HEAP_TO_COMPACT):
                self._compact()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._entries

    def claim(self, entry: TimerEntry) -> TimerOp | None:
        """Remove `entry` if it is still the live one for its key, and return its op for the
        caller to run; None if it is not (rescheduled or cancelled since it expired)."""
        if self._entries.get(entry.key) is not entry:
            return None
        del self._entries[entry.key]
        return entry.op

    def cancel_all(self) -> None:
        if self._armed is not None:
            self._armed.cancel()
            self._armed = None
        for entry in self._entries.values():
            entry.op = None
        self._entries.clear()
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _is_live(self, entry: TimerEntry) -> bool:
        return self._entries.get(entry.key) is entry

    def _push(self, entry: TimerEntry) -> None:
        entry.heap_deadline = entry.deadline
        heapq.heappush(self._heap, entry)

    def _arm(self) -> None:
        if not self._heap:
            if self._armed is not None:
                self._armed.cancel()
                self._armed = None
            return
        when = self._heap[0].heap_deadline
        if self._armed is not None:
            if self._armed_at == when:
                return
            self._armed.cancel()
        self._armed = self._loop.call_at(when, self._fire)
        self._armed_at = when

    def _fire(self) -> None:
        self._armed = None
        now = self._time() + _SLACK_S
        heap = self._heap
        due = []
        while heap and heap[0].heap_deadline <= now:
            entry = heapq.heappop(heap)
            entry.heap_deadline = math.inf
            if not self._is_live(entry):
                continue
            if entry.deadline > now:
                self._push(entry)
            else:
                due.append(entry)
        self._arm()
        for entry in due:
            self._on_expired(self, entry)

    def _compact(self) -> None:
        live = [e for e in self._heap if self._is_live(e)]
        for entry in self._heap:
            if not self._is_live(entry):
                entry.heap_deadline = math.inf
        heapq.heapify(live)
        self._heap = live
        self._arm()
