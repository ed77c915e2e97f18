"""`CommittedTopics`: which commits are checked at once and which are asked about first,
and the answer of a commit naming partitions the upstream does not have (Kafka's
UNKNOWN_TOPIC_OR_PARTITION for those, the rest submitted); and, through a real
`Dispatcher` on a fake transport, that what a connection sends behind a commit being asked
about waits for it."""

from __future__ import annotations

import asyncio
import struct

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

from coordinator.net.codec import LARGE_FRAME_BYTES
from coordinator.net.committed_topics import CommittedTopics
from coordinator.net.connection import KafkaConnection
from coordinator.net.dispatch import Dispatcher
from coordinator.net.local_answers import LocalAnswers
from coordinator.node import CoordinatorNode
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from protocol.txn_offset_commit_messages import TxnOffsetCommitRequest
from tests.net.test_large_frames import GatedPool, RecordingService, correlation_ids, framed
from tests.support.builders import commit_request, heartbeat_request
from tests.support.fake_transport import FakeTransport
from tests.support.waiting import wait_until

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


class GatedAsk:
    """The upstream's answers by name, given when the test says so."""

    def __init__(self, answers: dict[str, int]) -> None:
        self.answers = answers
        self.go = asyncio.Event()
        self.asked: list[list[str]] = []

    async def __call__(self, names):
        self.asked.append(list(names))
        await self.go.wait()
        return {name: self.answers[name] for name in names if name in self.answers}


async def connected(ask: GatedAsk, pool=None) -> tuple[KafkaConnection, FakeTransport, RecordingService]:
    service = RecordingService()
    dispatcher = Dispatcher(service, LocalAnswers(CoordinatorNode(0, "127.0.0.1", 9092)), codec_pool=pool,
                            committed_topics=CommittedTopics(KNOWN.get, ask))
    conn = KafkaConnection(dispatcher, max_frame_bytes=2**24, max_in_flight=16)
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport, service


def answers_of(written: bytes, version: int = 8) -> dict[tuple[str, int], int]:
    size = struct.unpack_from(">i", written)[0]
    return answered(OffsetCommitResponse.decode(written[4:4 + size], version=version, header=True))


async def test_requests_behind_a_commit_asked_about_wait_for_it_and_keep_their_turn():
    ask = GatedAsk({"new": 2})
    conn, transport, service = await connected(ask)
    conn.data_received(framed(commit_request(8, "g", [("new", 0, 1, None), ("new", 5, 1, None),
                                                      ("orders", 0, 1, None)]), 1)
                       + framed(heartbeat_request(4, "g", "m"), 2))
    await asyncio.sleep(0.05)
    assert ask.asked == [["new"]]
    assert service.seen == [] and transport.writes == []         # the heartbeat waits behind it

    ask.go.set()
    await wait_until(lambda: len(correlation_ids(transport.written)) == 2, timeout_s=10)
    assert service.seen == [ApiKey.OffsetCommit, ApiKey.Heartbeat]
    assert correlation_ids(transport.written) == [1, 2]
    assert answers_of(transport.written) == {("new", 0): 0, ("orders", 0): 0, ("new", 5): UNKNOWN}


async def test_a_large_commit_asked_about_after_its_decode_off_the_loop_keeps_its_turn_too():
    ask = GatedAsk({"gone": 0})     # the upstream does not have it
    pool = GatedPool()
    pool.go.set()
    try:
        conn, transport, service = await connected(ask, pool)
        large = framed(commit_request(8, "g", [("gone", p, 1, None) for p in range(10_000)]), 1)
        assert len(large) > LARGE_FRAME_BYTES
        conn.data_received(large + framed(heartbeat_request(4, "g", "m"), 2))
        await wait_until(lambda: ask.asked == [["gone"]], timeout_s=10)
        await asyncio.sleep(0.05)
        assert service.seen == [] and transport.writes == []

        ask.go.set()
        await wait_until(lambda: len(correlation_ids(transport.written)) == 2, timeout_s=10)
        assert service.seen == [ApiKey.Heartbeat]           # nothing of the commit was left to submit
        assert correlation_ids(transport.written) == [1, 2]
        assert set(answers_of(transport.written).values()) == {UNKNOWN}
    finally:
        pool.shutdown()
