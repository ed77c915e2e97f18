"""OffsetFetch and OffsetDelete (REFERENCE §2.3).

Not here: 29/30 (authorization, not enforced), 88 (no transactional offsets exist yet),
25/22/113 for KIP-848 member checks, 100/3 resolved by the service.
"""

from coordinator.group.classic.state import GroupState
from coordinator.group.views import OffsetFetchPartition, OffsetFetchTopic
from tests.support.builders import subscription
from tests.support.group_context import GroupTestContext

NONE, INVALID_GROUP_ID, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 0, 24, 68, 69, 86


def test_fetch_of_a_missing_group_or_offset_reads_minus_one_without_error():
    ctx = GroupTestContext()
    missing = ctx.fetch("nope", [("t", [0, 1])])
    assert (missing.error, missing.topics) == (NONE, (OffsetFetchTopic("t", (
        OffsetFetchPartition(0, -1, -1, ""), OffsetFetchPartition(1, -1, -1, ""))),))
    ctx.commit(offsets=(("t", 1, 5, "m"),), version=8, leader_epoch=2)
    found = ctx.fetch("g", [("t", [0, 1]), ("u", [0])])
    assert found.topics == (
        OffsetFetchTopic("t", (OffsetFetchPartition(0, -1, -1, ""), OffsetFetchPartition(1, 5, 2, "m"))),
        OffsetFetchTopic("u", (OffsetFetchPartition(0, -1, -1, ""),)))


def test_fetch_all_returns_every_committed_offset_and_nothing_for_a_missing_group():
    ctx = GroupTestContext()
    ctx.commit(offsets=(("b", 1, 3, None), ("a", 0, 1, None), ("b", 0, 2, None)))
    assert [(t.name, [p.partition for p in t.partitions]) for t in ctx.fetch().topics] == [("a", [0]), ("b", [0, 1])]
    assert ctx.fetch("nope").topics == ()


def test_fetch_accepts_the_empty_group_id():
    ctx = GroupTestContext()
    ctx.commit(group_id="")
    assert ctx.fetch("").topics[0].partitions[0].offset == 10


def test_fetch_sees_a_dead_group_as_missing():
    ctx = GroupTestContext()
    ctx.commit()
    ctx.group().transition_to(GroupState.DEAD, 0)
    assert ctx.fetch().topics == ()


def test_offset_delete_with_empty_group_id_is_invalid():
    assert GroupTestContext().delete_offsets(group_id="").error == INVALID_GROUP_ID


def test_offset_delete_for_an_unknown_or_dead_group():
    ctx = GroupTestContext()
    assert ctx.delete_offsets(group_id="nope").error == GROUP_ID_NOT_FOUND
    ctx.commit()
    ctx.group().transition_to(GroupState.DEAD, 0)
    assert ctx.delete_offsets().error == GROUP_ID_NOT_FOUND


def test_offset_delete_refuses_a_non_empty_group_that_is_not_a_consumer_group():
    ctx = GroupTestContext()
    ctx.stable_group(1, protocol_type="connect")
    assert ctx.delete_offsets().error == NON_EMPTY_GROUP


def test_offset_delete_of_a_subscribed_topic_is_refused_per_partition():
    ctx = GroupTestContext()
    [m] = ctx.stable_group(1, protocols=(("range", subscription("t")),))
    ctx.commit(member_id=m, generation_id=1, offsets=(("t", 0, 1, None), ("old", 0, 1, None)))
    before = len(ctx.written)
    call = ctx.delete_offsets(topics=(("t", (0,)), ("old", (0, 1))))
    assert call.error == NONE
    assert [(t.name, p.partition_index, p.error_code) for t in call.response.topics for p in t.partitions] == [
        ("t", 0, GROUP_SUBSCRIBED_TO_TOPIC), ("old", 0, NONE), ("old", 1, NONE)]
    # a tombstone only where an offset existed
    assert [(r.key.topic, r.key.partition, r.value) for r in ctx.written[before:]] == [("old", 0, None)]
    assert ctx.fetch(topics=[("old", [0])]).topics[0].partitions[0].offset == -1


def test_offset_delete_on_an_empty_group():
    ctx = GroupTestContext()
    ctx.commit(offsets=(("t", 0, 1, None), ("t", 1, 1, None)))
    ctx.delete_offsets(topics=(("t", (1,)),))
    assert [p.partition for p in ctx.fetch().topics[0].partitions] == [0]
