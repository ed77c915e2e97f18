"""A clock that moves only when a test says so."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now_ms: int = 0):
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("time does not go backwards")
        self._now_ms += ms
        return self._now_ms
