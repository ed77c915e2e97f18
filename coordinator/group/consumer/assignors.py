"""KIP-848 server-side assignors: `uniform` (Kafka's default) and `range`.

An assignor sees the members' subscriptions as topic ids (topics that exist only), each
topic's partition count, and the previous target assignment; it returns every member's
new target. Iteration is always in sorted order, so the same input gives the same output.

- `uniform`: balanced to within one partition per member where subscriptions allow,
  and sticky: a member keeps what it had up to its quota. With one common subscription
  (Kafka's homogeneous case) each member gets `total // n` or one more, those holding
  the most keeping the extra slots. Otherwise each free partition goes to its least
  loaded subscriber, then partitions move from the most to the least loaded subscriber
  of a topic while that narrows the gap (at most 16 rounds, as Kafka).
- `range`: per topic, members in order (static members by instance id first, then the
  others by member id) get contiguous ranges; co-partitioned topics line up. Not
  sticky beyond its stable order, like Kafka's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from coordinator.group.consumer.group import Assignment

_MAX_BALANCING_ROUNDS = 16


@dataclass(frozen=True, slots=True)
class AssignmentMember:
    member_id: str
    instance_id: str | None
    topics: frozenset[uuid.UUID]        # subscribed topics that exist


Targets = dict[str, Assignment]


def _freeze(assignments: dict[str, dict[uuid.UUID, set[int]]]) -> Targets:
    return {m: {t: frozenset(ps) for t, ps in sorted(by_topic.items(), key=lambda i: i[0].bytes) if ps}
            for m, by_topic in assignments.items()}


def uniform(members: list[AssignmentMember], partitions: Mapping[uuid.UUID, int],
            previous: Mapping[str, Assignment]) -> Targets:
    members = sorted(members, key=lambda m: m.member_id)
    out: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
    if not members:
        return {}
    taken: set[tuple[uuid.UUID, int]] = set()
    kept: dict[str, list[tuple[uuid.UUID, int]]] = {}
    for m in members:
        mine = []
        for topic_id, parts in sorted(previous.get(m.member_id, {}).items(), key=lambda i: i[0].bytes):
            if topic_id not in m.topics:
                continue
            for p in sorted(parts):
                if p < partitions.get(topic_id, 0) and (topic_id, p) not in taken:
                    taken.add((topic_id, p))
                    mine.append((topic_id, p))
        kept[m.member_id] = mine
    subscriptions = {m.topics for m in members}
    if len(subscriptions) == 1:
        _uniform_homogeneous(members, partitions, kept, taken, out)
    else:
        _uniform_heterogeneous(members, partitions, kept, taken, out)
    return _freeze(out)


def _all_partitions(topics, partitions: Mapping[uuid.UUID, int]) -> list[tuple[uuid.UUID, int]]:
    return [(t, p) for t in sorted(topics, key=lambda t: t.bytes) for p in range(partitions[t])]


def _uniform_homogeneous(members, partitions, kept, taken, out) -> None:
    everything = _all_partitions(members[0].topics, partitions)
    quota, extra = divmod(len(everything), len(members))
    # Those holding the most keep the extra slots: the fewest partitions move.
    by_holding = sorted(members, key=lambda m: (-len(kept[m.member_id]), m.member_id))
    quotas = {m.member_id: quota + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
    freed = []
    for m in members:
        mine = kept[m.member_id]
        for topic_id, p in mine[:quotas[m.member_id]]:
            out[m.member_id].setdefault(topic_id, set()).add(p)
        freed += mine[quotas[m.member_id]:]
    for tp in freed:
        taken.discard(tp)
    free = [tp for tp in everything if tp not in taken]
    free_iter = iter(free)
    for m in members:
        missing = quotas[m.member_id] - min(len(kept[m.member_id]), quotas[m.member_id])
        for _ in range(missing):
            topic_id, p = next(free_iter)
            out[m.member_id].setdefault(topic_id, set()).add(p)


def _uniform_heterogeneous(members, partitions, kept, taken, out) -> None:
    load = {m.member_id: 0 for m in members}
    for m in members:
        for topic_id, p in kept[m.member_id]:
            out[m.member_id].setdefault(topic_id, set()).add(p)
            load[m.member_id] += 1
    subscribers: dict[uuid.UUID, list[str]] = {}
    for m in members:
        for t in m.topics:
            subscribers.setdefault(t, []).append(m.member_id)
    # Topics with the most partitions per subscriber first: they constrain the balance most.
    topics = sorted(subscribers, key=lambda t: (-partitions[t] / len(subscribers[t]), len(subscribers[t]), t.bytes))
    for t in topics:
        for p in range(partitions[t]):
            if (t, p) in taken:
                continue
            member_id = min(subscribers[t], key=lambda m: (load[m], m))
            out[member_id].setdefault(t, set()).add(p)
            load[member_id] += 1
    for _ in range(_MAX_BALANCING_ROUNDS):
        moved = False
        for t in topics:
            while True:
                holders = [m for m in subscribers[t] if out[m].get(t)]
                if not holders:
                    break
                giver = max(holders, key=lambda m: (load[m], m))
                taker = min(subscribers[t], key=lambda m: (load[m], m))
                if load[giver] - load[taker] <= 1:
                    break
                p = max(out[giver][t])
                out[giver][t].discard(p)
                out[taker].setdefault(t, set()).add(p)
                load[giver] -= 1
                load[taker] += 1
                moved = True
        if not moved:
            break


def range_(members: list[AssignmentMember], partitions: Mapping[uuid.UUID, int],
           previous: Mapping[str, Assignment]) -> Targets:
    ordered = sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id))
    out: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
    topics = sorted({t for m in members for t in m.topics}, key=lambda t: t.bytes)
    for t in topics:
        subscribers = [m.member_id for m in ordered if t in m.topics]
        quota, extra = divmod(partitions[t], len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            if size:
                out[member_id][t] = set(range(start, start + size))
            start += size
    return _freeze(out)


ASSIGNORS = {"uniform": uniform, "range": range_}
