"""A topic deleted at the upstream Kafka takes its committed offsets at kgc with it, in every
group, as Kafka's own coordinator does (`OffsetMetadataManager.onTopicsDeleted`): a topic
recreated under the same name is then read from where `auto.offset.reset` says, not from
the old topic's offsets."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition
from kafka.protocol.api_key import ApiKey

from coordinator.settings import ServerConfig, host_ports
from tests.support.admin import admin, create_topic, new_name
from tests.support.clients import wait_until
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# kgc reads the upstream's topics every 5 s; a deletion takes one read and one write.
DELETION_SEEN_S = 30


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})


def committed(client: Consumer, *partitions: tuple[str, int]) -> dict[tuple[str, int], int]:
    answer = client.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
    return {(tp.topic, tp.partition): tp.offset for tp in answer}


def test_the_offsets_of_a_deleted_topic_go_in_every_group_and_a_recreated_topic_starts_without(kgc):
    gone, kept = create_topic(kgc.bootstrap, 2), create_topic(kgc.bootstrap, 1)
    groups = [new_name("deleted-topic"), new_name("deleted-topic")]
    clients = [consumer(kgc.bootstrap, group) for group in groups]
    try:
        for i, client in enumerate(clients):
            client.commit(offsets=[TopicPartition(gone, 0, 5 + i), TopicPartition(gone, 1, 6 + i),
                                   TopicPartition(kept, 0, 7 + i)], asynchronous=False)
        asked = ((gone, 0), (gone, 1), (kept, 0))
        assert committed(clients[1], *asked) == {(gone, 0): 6, (gone, 1): 7, (kept, 0): 8}

        deleter = admin(kgc.bootstrap)     # DeleteTopics is forwarded to Kafka
        try:
            deleter.delete_topics([gone], timeout_ms=10_000)
        finally:
            deleter.close()
        for client, i in zip(clients, range(2), strict=True):
            wait_until(lambda c=client: committed(c, *asked)[(gone, 0)] == OFFSET_INVALID, DELETION_SEEN_S,
                       lambda c=client: f"offsets after the deletion: {committed(c, *asked)}")
            assert committed(client, *asked) == {(gone, 0): OFFSET_INVALID, (gone, 1): OFFSET_INVALID,
                                                 (kept, 0): 7 + i}

        create_topic(kgc.bootstrap, 2, name=gone)
        assert committed(clients[0], *asked) == {(gone, 0): OFFSET_INVALID, (gone, 1): OFFSET_INVALID,
                                                 (kept, 0): 7}
    finally:
        for client in clients:
            client.close()


async def test_with_delete_offsets_of_deleted_topics_off_the_offsets_stay(kafka):
    config = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, upstream=host_ports(kafka.bootstrap),
                          broker_ports=((kafka.node_id, free_port()),), delete_offsets_of_deleted_topics=False)
    async with running_kgc(config) as app:
        # Until kgc first reaches Kafka it answers Metadata itself, without Kafka's controller:
        # kafka-python's admin client then fails at once (UnknownBrokerIdError), not retries.
        await asyncio.wait_for(app.cluster.wait_reachable(), 30)
        assert ApiKey.TxnOffsetCommit in app.service.api_keys      # only the deletion is off
        bootstrap = f"127.0.0.1:{app.port}"
        gone = await asyncio.to_thread(create_topic, bootstrap, 1)
        client = consumer(bootstrap, new_name("deleted-topic-kept"))
        try:
            await asyncio.to_thread(client.commit, offsets=[TopicPartition(gone, 0, 5)], asynchronous=False)
            await asyncio.to_thread(wait_until, lambda: gone in app.cluster.topics.by_name, DELETION_SEEN_S,
                                    lambda: f"kgc's topics: {sorted(app.cluster.topics.by_name)}")
            deleter = await asyncio.to_thread(admin, bootstrap)
            await asyncio.to_thread(deleter.delete_topics, [gone], timeout_ms=10_000)
            await asyncio.to_thread(deleter.close)
            await asyncio.to_thread(wait_until, lambda: gone not in app.cluster.topics.by_name, DELETION_SEEN_S,
                                    lambda: f"kgc's topics: {sorted(app.cluster.topics.by_name)}")
            assert await asyncio.to_thread(committed, client, (gone, 0)) == {(gone, 0): 5}
        finally:
            await asyncio.to_thread(client.close)
