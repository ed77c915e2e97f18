"""The connection bounds' bookkeeping, on a manual clock: per-address counts with their
overrides, and which connections the idle sweep closes."""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.net.connection_limits import NEVER, ConnectionsPerIp, IdleLimit


def test_an_address_is_admitted_up_to_its_limit_and_again_after_a_release():
    per_ip = ConnectionsPerIp(2, {"10.0.0.7": 3})
    assert [per_ip.admit("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert [per_ip.admit("10.0.0.7") for _ in range(4)] == [True, True, True, False]
    per_ip.release("10.0.0.1")
    assert per_ip.admit("10.0.0.1")
    assert not per_ip.admit("10.0.0.1")


@dataclass
class Conn:
    last_active: float
    in_flight: int = 0


def test_the_sweep_closes_what_was_idle_past_the_limit_with_nothing_owed():
    limit = IdleLimit(600_000)
    fresh, stale, waiting = Conn(last_active=100.0), Conn(last_active=0.0), Conn(last_active=0.0, in_flight=1)
    assert limit.idle([fresh, stale, waiting], now=600.0) == [stale]
    assert limit.idle([fresh, stale, waiting], now=599.9) == []
    assert limit.sweep_interval_ms == 1_000
    assert IdleLimit(NEVER).idle([stale], now=10**9) == []
    assert IdleLimit(300).sweep_interval_ms == 300
