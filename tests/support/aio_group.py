"""The topic the aiokafka-member group tests share (orders, 6 partitions), and when their
members have settled on it: one generation, every partition owned once."""

from __future__ import annotations

from tests.support.aio_member import AioMember

TOPIC, PARTITIONS = "orders", 6


def settled(members: list[AioMember]) -> bool:
    assignments = [m.assignment for m in members]
    if any(a is None for a in assignments):
        return False
    if len({a.generation for a in assignments}) != 1:
        return False
    owned = [p for a in assignments for p in a.partitions]
    return sorted(owned) == list(range(PARTITIONS))
