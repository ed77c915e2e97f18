"""OffsetCommit and OffsetFetch v10 (topics by id) through a running kgc, over its socket.

kgc runs in-process with a fixed upstream topic image (`t`, `u`) standing in for the
gateway's Metadata reads (tests/e2e/test_consumer_protocol.py does it with Tansu's own
ids); everything else is real: the wire codecs, the id resolution at the edge, the service,
the partition runtime, the KIP-848 member epochs, the records.
"""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest

from coordinator.app import KgcApp
from coordinator.group.topics import TopicImage, TopicMetadata
from coordinator.net.topic_ids import TopicIds
from coordinator.offline.state import replay_state
from coordinator.settings import ServerConfig
from protocol.answers.transactions import txn_offset_commit_response
from protocol.errors import ErrorCode
from protocol.txn_offset_commit_messages import TxnOffsetCommitRequest
from tests.support.builders import consumer_heartbeat_request, topic_id
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.topic_id_offsets import commit, committed, fetch, fetched
from tests.support.wire_client import WireClient

E = ErrorCode
IMAGE = TopicImage.of(1, [TopicMetadata(topic_id("t"), "t", 4), TopicMetadata(topic_id("u"), "u", 2)])
T, U, NOWHERE = topic_id("t"), topic_id("u"), uuid.uuid5(uuid.NAMESPACE_URL, "no such topic")


@pytest.fixture
async def client(monkeypatch):
    monkeypatch.setattr(KgcApp, "_topics", lambda self: IMAGE)
    async with running_kgc() as app:
        wire = await WireClient.open(app.port)
        try:
            yield wire
        finally:
            wire.close()


async def join(client: WireClient) -> int:
    """Member `a` of consumer group `g`, subscribed to `t`: its epoch."""
    response = await client.call(consumer_heartbeat_request(1, IMAGE, member_id="a"))
    assert response.error_code == 0
    return response.member_epoch


async def test_v10_is_advertised(client):
    versions = {k.api_key: (k.min_version, k.max_version)
                for k in (await client.call(ApiVersionsRequest(version=3, client_software_name="t",
                                                               client_software_version="1"))).api_keys}
    assert versions[ApiKey.OffsetCommit] == (0, 10) and versions[ApiKey.OffsetFetch] == (0, 10)


async def test_a_v10_commit_is_stored_by_name_and_fetched_by_id(client):
    epoch = await join(client)
    assert committed(await client.call(commit(epoch, {T: {0: 5, 1: 6}}))) == {(T, 0): 0, (T, 1): 0}
    # Stored by topic name, as Kafka's records key them: a v9 fetch by name sees it.
    assert fetched(await client.call(fetch(epoch, {"t": [0, 1]}, version=9))) == {("t", 0): (5, 0), ("t", 1): (6, 0)}
    assert fetched(await client.call(fetch(epoch, {T: [0, 1, 2]}))) == {(T, 0): (5, 0), (T, 1): (6, 0),
                                                                        (T, 2): (-1, 0)}
    # A v9 commit by name reads back by id.
    await client.call(commit(epoch, {"t": {2: 7}}, version=9))
    assert fetched(await client.call(fetch(epoch, {T: [2]}))) == {(T, 2): (7, 0)}


async def test_a_v10_commit_keeps_the_topic_id_in_its_records_as_kafka_does(monkeypatch, tmp_path):
    """Kafka 4.1+ writes the id a commit named its topic by into the value (OffsetCommitValue
    v4, tagged field 0): the audit tells a recreated topic's offsets by it. A commit by
    name has none."""
    monkeypatch.setattr(KgcApp, "_topics", lambda self: IMAGE)
    config = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, data_dir=str(tmp_path))
    async with running_kgc(config) as app:
        client = await WireClient.open(app.port)
        try:
            epoch = await join(client)
            assert committed(await client.call(commit(epoch, {T: {0: 5}}))) == {(T, 0): 0}
            assert committed(await client.call(commit(epoch, {"t": {1: 6}}, version=9))) == {("t", 1): 0}
        finally:
            client.close()
    offsets = replay_state(tmp_path).offsets
    assert (offsets["g", "t", 0].offset, offsets["g", "t", 0].topic_id) == (5, T)
    assert (offsets["g", "t", 1].offset, offsets["g", "t", 1].topic_id) == (6, None)


async def test_an_offset_of_a_topic_since_recreated_reads_as_none_by_the_new_id(monkeypatch):
    """Kafka 4.1+ (OffsetMetadataManager.isMismatchedTopicId): an OffsetFetch by id of an
    offset committed with another id, to the topic of that name before it was deleted and
    created again, answers -1; by name (no id asked) or for all topics it reads the offset."""
    reborn = uuid.uuid5(uuid.NAMESPACE_URL, "t, created again")
    images = [IMAGE]
    monkeypatch.setattr(KgcApp, "_topics", lambda self: images[-1])
    async with running_kgc() as app:
        client = await WireClient.open(app.port)
        try:
            simple = {"member_id": "", "group_id": "simple"}
            assert committed(await client.call(commit(-1, {T: {0: 5, 1: 6}}, **simple))) == {(T, 0): 0, (T, 1): 0}
            images.append(TopicImage.of(2, [TopicMetadata(reborn, "t", 4), TopicMetadata(U, "u", 2)]))
            by_id = fetch(-1, {reborn: [0, 1]}, member_id=None, group_id="simple")
            assert fetched(await client.call(by_id)) == {(reborn, 0): (-1, 0), (reborn, 1): (-1, 0)}
            by_name = fetch(-1, {"t": [0, 1]}, member_id=None, version=9, group_id="simple")
            assert fetched(await client.call(by_name)) == {("t", 0): (5, 0), ("t", 1): (6, 0)}
            everything = fetch(-1, None, member_id=None, group_id="simple")
            assert fetched(await client.call(everything)) == {(reborn, 0): (5, 0), (reborn, 1): (6, 0)}
            # a commit to the topic now, by its id, reads back by it
            assert committed(await client.call(commit(-1, {reborn: {0: 2}}, **simple))) == {(reborn, 0): 0}
            assert fetched(await client.call(by_id)) == {(reborn, 0): (2, 0), (reborn, 1): (-1, 0)}
        finally:
            client.close()


async def test_an_unknown_topic_id_is_answered_alone(client):
    epoch = await join(client)
    answer = await client.call(commit(epoch, {NOWHERE: {0: 1, 1: 1}, T: {0: 9}}))
    assert committed(answer) == {(NOWHERE, 0): E.UNKNOWN_TOPIC_ID, (NOWHERE, 1): E.UNKNOWN_TOPIC_ID, (T, 0): 0}
    assert fetched(await client.call(fetch(epoch, {T: [0], NOWHERE: [3]}))) == {
        (T, 0): (9, 0), (NOWHERE, 3): (-1, E.UNKNOWN_TOPIC_ID)}
    # Nothing but unknown ids: answered without the group, which stays as it was.
    assert committed(await client.call(commit(epoch, {NOWHERE: {0: 2}}))) == {(NOWHERE, 0): E.UNKNOWN_TOPIC_ID}
    assert fetched(await client.call(fetch(epoch, {T: [0]}))) == {(T, 0): (9, 0)}


async def test_member_epochs_are_checked_as_in_v9(client):
    epoch = await join(client)
    assert committed(await client.call(commit(epoch - 1, {T: {0: 3}}))) == {(T, 0): E.STALE_MEMBER_EPOCH}
    assert committed(await client.call(commit(epoch, {T: {0: 3}}, member_id="ghost"))) == {
        (T, 0): E.UNKNOWN_MEMBER_ID}
    stale = await client.call(fetch(epoch + 1, {T: [0], NOWHERE: [0]}))
    assert (stale.groups[0].error_code, stale.groups[0].topics) == (E.STALE_MEMBER_EPOCH, [])
    assert fetched(await client.call(fetch(epoch, {T: [0]}))) == {(T, 0): (-1, 0)}


async def test_all_topics_by_id_leave_out_a_topic_the_upstream_no_longer_has(client):
    epoch = await join(client)
    await client.call(commit(epoch, {"t": {0: 1}, "gone": {0: 2}}, version=9))
    await client.call(commit(epoch, {U: {1: 3}}))
    assert fetched(await client.call(fetch(epoch, None))) == {(T, 0): (1, 0), (U, 1): (3, 0)}
    assert fetched(await client.call(fetch(epoch, None, version=9))) == {
        ("gone", 0): (2, 0), ("t", 0): (1, 0), ("u", 1): (3, 0)}


async def test_each_group_of_a_fetch_gets_its_own_answer(client):
    epoch = await join(client)
    await client.call(commit(-1, {T: {0: 8}}, member_id="", group_id="h"))
    request = fetch(epoch + 1, {NOWHERE: [0], T: [0]})                  # g: a stale epoch
    request.groups += fetch(-1, {T: [0], NOWHERE: [1]}, member_id=None, group_id="h").groups
    request.groups += fetch(epoch, {NOWHERE: [2]}).groups              # g again, at its epoch
    answer = await client.call(request)
    assert [(g.group_id, g.error_code) for g in answer.groups] == [("g", E.STALE_MEMBER_EPOCH), ("h", 0), ("g", 0)]
    assert answer.groups[0].topics == []
    assert {(t.topic_id, p.partition_index): (p.committed_offset, p.error_code)
            for t in answer.groups[1].topics for p in t.partitions} == {(T, 0): (8, 0), (NOWHERE, 1): (-1, E.UNKNOWN_TOPIC_ID)}
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in answer.groups[2].topics] == [(NOWHERE, [(2, E.UNKNOWN_TOPIC_ID)])]


def txn_commit_v6(topics: dict[uuid.UUID, list[int]]) -> TxnOffsetCommitRequest:
    cls = TxnOffsetCommitRequest[6]
    topic = cls.TxnOffsetCommitRequestTopic
    return cls(transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0, generation_id=-1, member_id="",
               group_instance_id=None, topics=[topic(topic_id=tid, partitions=[topic.TxnOffsetCommitRequestPartition(
                   partition_index=p, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")
                   for p in partitions]) for tid, partitions in topics.items()])


def test_txn_offset_commit_v6_names_known_ids_and_answers_unknown_ones_alone():
    ids = TopicIds(lambda: IMAGE)
    request = TxnOffsetCommitRequest[6].decode(txn_commit_v6({T: [0], NOWHERE: [1, 2]}).encode())
    ids.name(ApiKey.TxnOffsetCommit, 6, request)
    assert [t.name for t in request.topics] == ["t", ""]
    guarded = ids.resolve(ApiKey.TxnOffsetCommit, 6, request)
    assert [t.name for t in guarded.request.topics] == ["t"]
    answer = guarded.finish(txn_offset_commit_response(6, guarded.request))
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics] == [
        (T, [(0, 0)]), (NOWHERE, [(1, E.UNKNOWN_TOPIC_ID), (2, E.UNKNOWN_TOPIC_ID)])]
    # only unknown ids: answered at the edge, the group untouched
    alone = ids.resolve(ApiKey.TxnOffsetCommit, 6, TxnOffsetCommitRequest[6].decode(
        txn_commit_v6({NOWHERE: [0]}).encode()))
    assert alone.refusal is not None and alone.refusal.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_ID


def test_txn_offset_commit_before_v6_is_left_by_name():
    request = TxnOffsetCommitRequest[5](transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0,
                                        generation_id=-1, member_id="", group_instance_id=None, topics=[])
    assert TopicIds(lambda: IMAGE).resolve(ApiKey.TxnOffsetCommit, 5, request).request is request
