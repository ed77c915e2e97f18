"""Steps and checks the group state-machine tests share over a GroupTestContext: a Stable
classic group to start from, a classic member's rejoin, and the one-owner-per-partition check."""

from __future__ import annotations

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from tests.support import builders
from tests.support.group_context import GroupTestContext

PROTOCOLS = (("range", builders.subscription("t")),)


def assignment_bytes(*partitions: int, topic: str = "t", user_data: bytes | None = None) -> bytes:
    tp = ConsumerProtocolAssignment.TopicPartition
    return ConsumerProtocolAssignment(version=0, assigned_partitions=[tp(topic=topic, partitions=list(partitions))],
                                      user_data=user_data).encode(version=0)


def classic_group(ctx: GroupTestContext, n: int = 2, *, protocol_type: str = "consumer",
                  user_data: bytes | None = None) -> list[str]:
    """n classic members, Stable at generation 1, t's 4 partitions split between them."""
    members, joins = [], []
    for i in range(n):
        member_id, call = ctx.join_dynamic(client_id=f"c{i}", protocols=PROTOCOLS, protocol_type=protocol_type)
        members.append(member_id)
        joins.append(call)
    ctx.finish_join_phase()
    leader, generation = joins[0].response.leader, joins[0].response.generation_id
    share = {m: [p for p in range(4) if p % n == i] for i, m in enumerate(members)}
    for member_id in members:
        assignments = [(m, assignment_bytes(*share[m], user_data=user_data)) for m in members] \
            if member_id == leader else ()
        ctx.sync(member_id=member_id, generation_id=generation, assignments=assignments,
                 protocol_type=protocol_type)
    assert ctx.state() == "Stable" and generation == 1
    return members


def rejoin(ctx: GroupTestContext, member_id: str, owned: dict[str, list[int]] | None = None):
    """A classic member's JoinGroup then SyncGroup; owned partitions go in a v1 subscription."""
    metadata = builders.subscription("t") if owned is None else builders.subscription_v1(["t"], owned)
    join = ctx.join(member_id=member_id, protocols=(("range", metadata),))
    assert join.error == 0, join.response
    sync = ctx.sync(member_id=member_id, generation_id=join.response.generation_id)
    return join.response.generation_id, sync


def owners_are_unique(ctx: GroupTestContext, group_id: str = "g") -> None:
    """No partition is held (assigned or being revoked) by two members."""
    seen: dict = {}
    for member in ctx.consumer_group(group_id).members.values():
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    assert (topic_id, p) not in seen, f"{topic_id}-{p} held by {seen[topic_id, p]} and {member.member_id}"
                    seen[topic_id, p] = member.member_id
