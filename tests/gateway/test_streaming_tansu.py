"""Cut-through Fetch responses in a running kgc in front of Tansu, over real sockets.

The wiring the unit tests fake: kgc's client connection and its upstream connection
passing a multi-megabyte Fetch v15 response on as it arrives, a Fetch v16 (never
offered, sent anyway) still served whole with its node endpoints rewritten, and a
client that hangs up mid-response costing kgc its upstream connection and nothing else.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

import pytest
from kafka.protocol.admin import CreateTopicsResponse
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import MetadataResponse
from kafka.protocol.producer import ProduceResponse
from kafka.record.memory_records import MemoryRecords

from coordinator.probe import request_response
from coordinator.settings import ServerConfig
from protocol.errors import ErrorCode
from tests.support.gateway_client import create_topic, fetch, metadata, new_topic_name, produce
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.kgc_http import in_process
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

VALUE_BYTES = 32 * 1024
# 5 MiB in batches of 512 KiB, the most Tansu answers in one Fetch. That is more than the
# kernel's socket buffers between kgc and a client that stopped reading hold (they grow to
# 4 MiB of send buffer here), so kgc cannot take the whole response from upstream before a
# client that reads a little and hangs up is gone: the hang-up always comes mid-stream.
BATCHES, PER_BATCH = 10, 16
STREAMED = "kgc_upstream_streamed_responses_total"


def value(n: int) -> bytes:
    return b"%08d" % n + b"v" * (VALUE_BYTES - 8)


def call(port: int, request, response_class):
    return request_response(("127.0.0.1", port), request, response_class, timeout_s=10)


def large_fetch(topic_id, version: int):
    request = fetch(topic_id, 0, version=version)
    for topic in request.topics:
        for partition in topic.partitions:
            partition.partition_max_bytes = 16 << 20
    request.max_bytes = 16 << 20
    return request


def values_in(response) -> list[bytes]:
    data = response.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NONE
    batches, values = MemoryRecords(data.records), []
    while batches.has_next():
        values += [r.value for r in batches.next_batch()]
    return values


@pytest.fixture
async def loaded(tansu):
    """kgc in front of Tansu, and a topic holding BATCHES x PER_BATCH values, by id."""
    broker_port = free_port()
    config = ServerConfig(host="127.0.0.1", port=0, upstream=(tansu.address,),
                          broker_ports=((tansu.node_id, broker_port),), group=TEST_GROUP_CONFIG)
    async with running_kgc(config) as app:
        await asyncio.wait_for(app.cluster.wait_reachable(), 10)
        name = new_topic_name()
        created = await asyncio.to_thread(call, broker_port, create_topic(name), CreateTopicsResponse)
        assert created.topics[0].error_code == ErrorCode.NONE
        for batch in range(BATCHES):
            values = [value(batch * PER_BATCH + n) for n in range(PER_BATCH)]
            produced = await asyncio.to_thread(call, broker_port, produce(name, *values), ProduceResponse)
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        described = await asyncio.to_thread(call, broker_port, metadata(name), MetadataResponse)
        yield broker_port, described.topics[0].topic_id


async def test_a_large_fetch_v15_response_streams_through_byte_for_byte(loaded):
    port, topic_id = loaded
    streamed = in_process().get(STREAMED)
    response = await asyncio.to_thread(call, port, large_fetch(topic_id, 15), FetchResponse)
    assert values_in(response) == [value(n) for n in range(BATCHES * PER_BATCH)]
    assert in_process().get(STREAMED) == streamed + 1


async def test_a_fetch_v16_sent_anyway_is_served_whole_with_its_endpoints_rewritten(loaded):
    port, topic_id = loaded
    streamed = in_process().get(STREAMED)
    response = await asyncio.to_thread(call, port, large_fetch(topic_id, 16), FetchResponse)
    assert values_in(response) == [value(n) for n in range(BATCHES * PER_BATCH)]
    assert in_process().get(STREAMED) == streamed, "v16 carries node endpoints: rewritten, so whole"
    # Tansu sends the list in every v16 response, empty unless a partition's leader moved.
    assert {(e.host, e.port) for e in response.node_endpoints} <= {("127.0.0.1", port)}


async def test_a_client_gone_mid_response_closes_its_upstream_connection_and_nothing_else(loaded, caplog):
    port, topic_id = loaded
    request = large_fetch(topic_id, 15)
    request.with_header(correlation_id=7, client_id="hangs-up")

    def hang_up_mid_response() -> int:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request.encode(header=True, framed=True))
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            sock.recv(64 * 1024, socket.MSG_WAITALL)
        return size

    with caplog.at_level(logging.INFO, logger="coordinator.gateway.upstream"):
        assert await asyncio.to_thread(hang_up_mid_response) > BATCHES * PER_BATCH * VALUE_BYTES
        await wait_until(lambda: "the client went away during a response" in caplog.text,
                         what="the upstream connection aborted")
    response = await asyncio.to_thread(call, port, large_fetch(topic_id, 15), FetchResponse)
    assert values_in(response) == [value(n) for n in range(BATCHES * PER_BATCH)]
