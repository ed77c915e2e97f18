"""A topic deleted upstream takes its committed offsets with it, in every group (Kafka's
`OffsetMetadataManager.onTopicsDeleted`), and which topics count as deleted (`gone_topics`)."""

import uuid

from coordinator.common.result import MARKER_COMMIT
from coordinator.group.topics import EMPTY_TOPIC_IMAGE, TopicImage, TopicMetadata, gone_topics
from protocol.txn_offset_commit_messages import TxnOffsetCommitRequest
from tests.support import builders
from tests.support.builders import subscription
from tests.support.group_context import GroupTestContext

ORDERS = uuid.UUID("7d6e7b0c-1f3a-4b2c-9d8e-0a1b2c3d4e5f")
ORDERS_AGAIN = uuid.UUID("11111111-2222-4333-8444-555555555555")


def offsets(ctx, group_id="g"):
    return {(t.name, p.partition): p.offset for t in ctx.fetch(group_id).topics for p in t.partitions}


def commit_by_id(ctx, topic, topic_id, partition, offset, group_id="g"):
    """An OffsetCommit v10 as the edge hands it on: the topic named by id, its name resolved."""
    request = builders.commit_request(10, group_id, offsets=((topic, partition, offset, None),))
    request.topics[0].topic_id = topic_id
    request.topics[0].name = topic
    return ctx._apply(ctx.shard.commit_offsets(ctx.rctx(10), request))


def txn_commit(topic, partition, offset):
    cls = TxnOffsetCommitRequest[3]
    topic_cls = cls.TxnOffsetCommitRequestTopic
    return cls(transactional_id="tx", group_id="g", producer_id=42, producer_epoch=0, generation_id=-1,
               member_id="", group_instance_id=None, topics=[topic_cls(name=topic, partitions=[
                   topic_cls.TxnOffsetCommitRequestPartition(partition_index=partition, committed_offset=offset,
                                                             committed_leader_epoch=-1, committed_metadata="")])])


def delete(ctx, **deleted):
    return ctx._apply(ctx.shard.delete_offsets_of_topics(deleted)).records


def test_every_groups_offsets_of_a_deleted_topic_go_and_other_topics_stay():
    ctx = GroupTestContext()
    ctx.commit(group_id="a", offsets=(("orders", 0, 5, None), ("orders", 1, 6, None), ("audit", 0, 7, None)))
    [m] = ctx.stable_group(1, group_id="b", protocols=(("range", subscription("orders")),))
    ctx.commit(group_id="b", member_id=m, generation_id=1, offsets=(("orders", 0, 9, None),))
    records = delete(ctx, orders=ORDERS)
    assert sorted((r.key.group, r.key.topic, r.key.partition) for r in records) == [
        ("a", "orders", 0), ("a", "orders", 1), ("b", "orders", 0)]
    assert all(r.value is None for r in records)
    assert offsets(ctx, "a") == {("audit", 0): 7}
    # Whatever the group subscribes to, as Kafka: its member still consumes, with no offset.
    assert offsets(ctx, "b") == {} and ctx.state("b") == "Stable"


def test_an_offset_committed_by_the_id_of_a_topic_recreated_since_stays():
    ctx = GroupTestContext()
    commit_by_id(ctx, "orders", ORDERS, 0, 5)
    commit_by_id(ctx, "orders", ORDERS_AGAIN, 1, 6)
    ctx.commit(offsets=(("orders", 2, 7, None),))        # by name: no id recorded, as Kafka's zero uuid
    delete(ctx, orders=ORDERS)
    assert offsets(ctx) == {("orders", 1): 6}


def test_offsets_pending_in_a_transaction_go_too():
    ctx = GroupTestContext()
    staged = ctx.shard.txn_commit_offsets(ctx.rctx(3), txn_commit("orders", 0, 5), source_offset=1)
    for offset, record in enumerate(staged.records):
        ctx.shard.replay_transactional(100 + offset, 42, record)
    assert ctx.shard.offsets.txn.is_open("g", "orders", 0)
    records = delete(ctx, orders=ORDERS)
    assert [(r.key.topic, r.key.partition, r.value) for r in records] == [("orders", 0, None)]
    assert not ctx.shard.offsets.txn.is_open("g", "orders", 0)
    ctx.shard.replay_end_transaction(42, MARKER_COMMIT)   # a late COMMIT marker brings nothing back
    assert offsets(ctx) == {}


def test_nothing_to_delete_writes_nothing():
    ctx = GroupTestContext()
    ctx.commit(offsets=(("audit", 0, 1, None),))
    assert delete(ctx, orders=ORDERS) == ()


def image(version, **ids):
    return TopicImage.of(version, (TopicMetadata(topic_id, name, 3) for name, topic_id in ids.items()))


def test_gone_topics_are_the_ids_the_new_read_lacks():
    old = image(4, orders=ORDERS, audit=uuid.UUID(int=7))
    assert gone_topics(old, image(5, audit=uuid.UUID(int=7))) == {"orders": ORDERS}
    assert gone_topics(old, image(5, orders=ORDERS_AGAIN, audit=uuid.UUID(int=7))) == {"orders": ORDERS}
    assert gone_topics(old, image(5, orders=ORDERS, audit=uuid.UUID(int=7), new=uuid.UUID(int=9))) == {}
    # Before kgc first reads the upstream's topics it knows of none to lose.
    assert gone_topics(EMPTY_TOPIC_IMAGE, image(1)) == {}
