"""Kafka's bounds on client connections, with its names and defaults.

- `max.connections.per.ip` (default Integer.MAX_VALUE) and
  `max.connections.per.ip.overrides`: connections open at once from one address, counted
  across every listener (Kafka's `ConnectionQuotas` counts per broker, and kgc is one
  broker to its clients). A connection past the limit is closed as soon as it is
  accepted, before it is read.
- `connections.max.idle.ms` (default 600000, -1: never): a connection with nothing read
  or written for that long, and no response owed, is closed. A response still owed (a
  JoinGroup parked until its rebalance ends) is kgc's wait, not the client's idleness.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

UNLIMITED_CONNECTIONS = 2**31 - 1     # Kafka's default for max.connections.per.ip
NEVER = -1                            # connections.max.idle.ms that closes nothing


class ConnectionsPerIp:
    """Open connections per client address, against Kafka's per-address limit."""

    __slots__ = ("_default", "_overrides", "_open")

    def __init__(self, default: int = UNLIMITED_CONNECTIONS, overrides: Mapping[str, int] | None = None):
        self._default = default
        self._overrides = dict(overrides or {})
        self._open: Counter[str] = Counter()

    def limit(self, host: str) -> int:
        return self._overrides.get(host, self._default)

    def admit(self, host: str) -> bool:
        """Count a new connection from `host`, unless it already has its limit."""
        if self._open[host] >= self.limit(host):
            return False
        self._open[host] += 1
        return True

    def release(self, host: str) -> None:
        self._open[host] -= 1
        if self._open[host] <= 0:
            del self._open[host]


class Activity(Protocol):
    last_active: float      # seconds, on the clock the sweep is given

    @property
    def in_flight(self) -> int: ...


_A = TypeVar("_A", bound=Activity)


@dataclass(frozen=True, slots=True)
class IdleLimit:
    max_idle_ms: int = 600_000
    sweep_interval_ms: int = field(init=False)

    def __post_init__(self) -> None:
        # Kafka looks at each poll; a second's lateness is nothing next to ten minutes, and
        # a short limit (tests) is looked at as often as it lasts.
        object.__setattr__(self, "sweep_interval_ms", min(max(self.max_idle_ms, 1), 1_000))

    @property
    def enabled(self) -> bool:
        return self.max_idle_ms >= 0

    def idle(self, connections: Iterable[_A], now: float) -> list[_A]:
        """The connections idle past the limit at `now`."""
        if not self.enabled:
            return []
        oldest = now - self.max_idle_ms / 1000
        return [conn for conn in connections if conn.last_active <= oldest and not conn.in_flight]
