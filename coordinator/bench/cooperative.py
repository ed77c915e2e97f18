"""A simulated classic member with the cooperative-sticky protocol (KIP-429), as the Java
client's `CooperativeStickyAssignor` and librdkafka's `cooperative-sticky` behave.

Each JoinGroup carries the partitions the member holds (ConsumerProtocolSubscription v1,
`OwnedPartitions`). The leader computes a balanced, sticky target (everyone keeps what
it holds up to its share; the rest goes to whoever is below it), then holds back every
partition another member still owns: that owner only loses it in this rebalance. A member
whose assignment lacks a partition it held has revoked it and rejoins at once, which
starts a second rebalance in which the held-back partitions are free and handed out.
So a member joining costs two rebalances; a member leaving costs one (its partitions
are nobody's). Unlike an eager member, nobody gives up the partitions it keeps.

The member counts as synced (for `Phase`) only on an assignment that revoked nothing:
a group is settled once every member holds its final share on one generation.
"""

from __future__ import annotations

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from coordinator.bench.member import Member

ASSIGNOR = "cooperative-sticky"
_SUBSCRIPTION_VERSION = 1        # the first with OwnedPartitions
_ASSIGNMENT_VERSION = 1


class CooperativeMember(Member):
    assignor = ASSIGNOR

    def __init__(self, *args, topic: str, partitions: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.topic = topic
        self.partitions = partitions
        self.owned: list[int] = []

    def _subscription(self) -> bytes:
        cls = ConsumerProtocolSubscription
        return bytes(cls(version=_SUBSCRIPTION_VERSION, topics=[self.topic], user_data=None, owned_partitions=[
            cls.TopicPartition(version=_SUBSCRIPTION_VERSION, topic=self.topic, partitions=self.owned)]).encode())

    def _assigned(self, assignment: bytes) -> bool:
        now = sorted(p for topic, parts in _decode_assignment(assignment) if topic == self.topic for p in parts)
        revoked = set(self.owned) - set(now)
        self.owned = now
        return not revoked

    def _assign(self, join) -> dict[str, bytes]:
        if join.leader != join.member_id:
            return {}
        owned = {m.member_id: _owned(m.metadata, self.topic) for m in join.members}
        target = sticky_target(owned, self.partitions)
        previous_owner = {p: mid for mid, parts in owned.items() for p in parts}
        cls = ConsumerProtocolAssignment
        answers = {}
        for mid, parts in target.items():
            # A partition still owned by another member waits for the next rebalance.
            given = [p for p in parts if previous_owner.get(p, mid) == mid]
            answers[mid] = bytes(cls(version=_ASSIGNMENT_VERSION, assigned_partitions=[
                cls.TopicPartition(version=_ASSIGNMENT_VERSION, topic=self.topic, partitions=given)],
                user_data=None).encode())
        return answers


def sticky_target(owned: dict[str, list[int]], partitions: int) -> dict[str, list[int]]:
    """Every partition to one member, shares within one of each other; members keep what
    they own up to their share, the members owning most getting the larger shares."""
    ids = sorted(owned, key=lambda mid: (-len(owned[mid]), mid))
    base, extra = divmod(partitions, len(ids))
    quota = {mid: base + (1 if rank < extra else 0) for rank, mid in enumerate(ids)}
    target: dict[str, list[int]] = {}
    taken: set[int] = set()
    for mid in ids:
        kept = [p for p in owned[mid] if 0 <= p < partitions and p not in taken][:quota[mid]]
        taken.update(kept)
        target[mid] = kept
    free = iter(p for p in range(partitions) if p not in taken)
    for mid in ids:
        target[mid] += [next(free) for _ in range(quota[mid] - len(target[mid]))]
    return target


def _owned(metadata: bytes, topic: str) -> list[int]:
    subscription = ConsumerProtocolSubscription.decode(metadata)
    return sorted(p for tp in subscription.owned_partitions or () if tp.topic == topic for p in tp.partitions)


def _decode_assignment(assignment: bytes) -> list[tuple[str, list[int]]]:
    if not assignment:
        return []
    decoded = ConsumerProtocolAssignment.decode(assignment)
    return [(tp.topic, list(tp.partitions)) for tp in decoded.assigned_partitions]
