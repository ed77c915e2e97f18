"""confluent-kafka's AdminClient (librdkafka) lists, describes and deletes groups and
their offsets on kgc."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.aio_member import AioMember
from tests.support.kgc import running_kgc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def admin_for(port: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "kgc-admin-test"})


def result_of(futures: dict, key, timeout: float = 10):
    return futures[key].result(timeout=timeout)


async def test_admin_client_lists_describes_and_deletes_groups_and_offsets():
    async with running_kgc() as app:
        admin = admin_for(app.port)
        active = AioMember(f"127.0.0.1:{app.port}", "g-active", "t", 2, client_id="aio-active")
        await active.start()
        while active.assignment is None:
            await asyncio.sleep(0.02)

        # A simple group: offsets committed by an admin tool, generation -1, no members.
        offsets = [TopicPartition("t", 0, 42), TopicPartition("t", 1, 7)]
        altered = await asyncio.to_thread(
            lambda: admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("g-simple", offsets)]))
        assert [(tp.partition, tp.offset, tp.error) for tp in
                (await asyncio.to_thread(altered["g-simple"].result, 10)).topic_partitions] == \
            [(0, 42, None), (1, 7, None)]

        listed = await asyncio.to_thread(lambda: admin.list_consumer_groups().result(10))
        states = {g.group_id: g.state.name for g in listed.valid}
        assert states["g-active"] == "STABLE"
        assert states["g-simple"] == "EMPTY"

        described = await asyncio.to_thread(
            lambda: admin.describe_consumer_groups(["g-active", "g-simple"]))
        active_desc = await asyncio.to_thread(described["g-active"].result, 10)
        assert active_desc.state.name == "STABLE"
        assert [m.member_id for m in active_desc.members] == [active.member_id]
        assert active_desc.members[0].client_id == "aio-active"
        simple_desc = await asyncio.to_thread(described["g-simple"].result, 10)
        assert simple_desc.state.name == "EMPTY" and simple_desc.members == []

        fetched = await asyncio.to_thread(
            lambda: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
                "g-simple", [TopicPartition("t", 0), TopicPartition("t", 1)])]))
        got = await asyncio.to_thread(fetched["g-simple"].result, 10)
        assert {tp.partition: tp.offset for tp in got.topic_partitions} == {0: 42, 1: 7}

        deleted = await asyncio.to_thread(lambda: admin.delete_consumer_groups(["g-active", "g-simple"]))
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
            await asyncio.to_thread(deleted["g-active"].result, 10)
        assert await asyncio.to_thread(deleted["g-simple"].result, 10) is None

        listed = await asyncio.to_thread(lambda: admin.list_consumer_groups().result(10))
        assert {g.group_id for g in listed.valid} == {"g-active"}
        fetched = await asyncio.to_thread(
            lambda: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
                "g-simple", [TopicPartition("t", 0)])]))
        got = await asyncio.to_thread(fetched["g-simple"].result, 10)
        assert [tp.offset for tp in got.topic_partitions] == [-1001]  # librdkafka's OFFSET_INVALID
        await active.close()
