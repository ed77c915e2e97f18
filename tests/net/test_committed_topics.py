"""`CommittedTopics`: which commits are checked at once and which are asked about first,
and the answer of a commit naming partitions the upstream does not have (Kafka's
UNKNOWN_TOPIC_OR_PARTITION for those, the rest submitted)."""

from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

from coordinator.net.committed_topics import CommittedTopics
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from protocol.txn_offset_commit_messages import TxnOffsetCommitRequest

UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
KNOWN = {"orders": (3, False), "fresh": (2, True), "deleted": (0, True)}


async def never_asked(names):
    raise AssertionError(f"asked {names}")


def checker() -> CommittedTopics:
    return CommittedTopics(KNOWN.get, never_asked)


def offset_commit(version: int = 7, **topics: list[int]):
    cls = OffsetCommitRequest[version]
    topic_cls = cls.OffsetCommitRequestTopic
    return cls(group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=[
        topic_cls(name=name, partitions=[topic_cls.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")
            for p in partitions]) for name, partitions in topics.items()])


def answered(response) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_topics_kgc_knows_with_partitions_in_range_are_not_asked_about():
    assert checker().to_ask(offset_commit(orders=[0, 1, 2], fresh=[1])) is None       # nothing to check
    # A partition past a count the upstream gave just now: checked at once, not asked again.
    assert checker().to_ask(offset_commit(orders=[0], fresh=[2], deleted=[0])) == []


def test_an_unknown_name_and_a_partition_past_a_read_count_are_asked_about():
    # The read may predate partitions added since; an answer just given is not asked again.
    assert checker().to_ask(offset_commit(orders=[3], other=[0], fresh=[2])) == ["orders", "other"]


def test_the_partitions_the_upstream_lacks_are_refused_and_the_rest_submitted():
    request = offset_commit(orders=[0, 1], fresh=[1, 4], other=[0], deleted=[0, 1], secret=[0])
    guarded = checker().check(ApiKey.OffsetCommit, 7, request, {"other": 0})
    assert guarded.refusal is None
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in guarded.request.topics] == [
        ("orders", [0, 1]), ("fresh", [1]), ("secret", [0])]        # secret: not answered, not known
    service_answer = error_response(ApiKey.OffsetCommit, 7, guarded.request, ErrorCode.NONE)
    assert answered(guarded.finish(service_answer)) == {
        ("orders", 0): 0, ("orders", 1): 0, ("fresh", 1): 0, ("secret", 0): 0,
        ("fresh", 4): UNKNOWN, ("other", 0): UNKNOWN, ("deleted", 0): UNKNOWN, ("deleted", 1): UNKNOWN}


def test_a_commit_with_nothing_left_is_answered_without_the_group():
    guarded = checker().check(ApiKey.OffsetCommit, 7, offset_commit(deleted=[0], orders=[-1, 3]), {"orders": 3})
    assert guarded.request is None
    assert isinstance(guarded.refusal, OffsetCommitResponse)
    assert answered(guarded.refusal) == {("deleted", 0): UNKNOWN, ("orders", -1): UNKNOWN, ("orders", 3): UNKNOWN}


def test_a_transactional_commit_is_checked_alike():
    cls = TxnOffsetCommitRequest[3]
    topic_cls = cls.TxnOffsetCommitRequestTopic
    request = cls(transactional_id="t", group_id="g", producer_id=1, producer_epoch=0, generation_id=-1,
                  member_id="", group_instance_id=None, topics=[
                      topic_cls(name=name, partitions=[topic_cls.TxnOffsetCommitRequestPartition(
                          partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")])
                      for name in ("orders", "deleted")])
    guarded = checker().check(ApiKey.TxnOffsetCommit, 3, request, {})
    assert [t.name for t in guarded.request.topics] == ["orders"]
    answer = guarded.finish(error_response(ApiKey.TxnOffsetCommit, 3, guarded.request, ErrorCode.NONE))
    assert answered(answer) == {("orders", 0): 0, ("deleted", 0): UNKNOWN}
