"""A group API kgc does not serve is refused by kgc, never forwarded: upstream it would act
on a group kgc holds (a streams or share group would live half upstream). TxnOffsetCommit
is served by kgc itself (coordinator/txn): it never plants offsets upstream. Kafka answers an API it does not serve
UNSUPPORTED_VERSION; where kgc has no codec to shape that answer, it closes the
connection, as Kafka does for an API its listener does not serve."""

from __future__ import annotations

import asyncio
import logging
import struct
import time

import pytest
from kafka.protocol.admin import CreateTopicsResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from coordinator.settings import ServerConfig
from protocol.api_keys import UNSERVED_GROUP_APIS
from protocol.errors import ErrorCode
from tests.support.admin import new_name
from tests.support.gateway_client import create_topic
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.security import KafkaSocket
from tests.support.tansu import TansuBroker, request_response

pytestmark = pytest.mark.integration


async def _ask(address: tuple[str, int], request, response_class, timeout_s: float = 2.0):
    return await asyncio.to_thread(request_response, address, request, response_class, timeout_s=timeout_s)


def _txn_offset_commit(transactional_id: str, group: str, producer_id: int, epoch: int,
                       topic_name: str) -> TxnOffsetCommitRequest:
    cls = TxnOffsetCommitRequest[3]
    topic = cls.TxnOffsetCommitRequestTopic
    return cls(transactional_id=transactional_id, group_id=group, producer_id=producer_id, producer_epoch=epoch,
               generation_id=-1, member_id="", group_instance_id=None, topics=[
                   topic(name=topic_name, partitions=[topic.TxnOffsetCommitRequestPartition(
                       partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                       committed_metadata="")])])


@pytest.fixture(params=["tansu", "kafka"], ids=["tansu", "kafka-4.4"])
def upstream(request):
    """A real upstream that serves TxnOffsetCommit itself: Tansu, and Apache Kafka."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def upstream_config(upstream):
    return ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, upstream=(_address(upstream),),
                        broker_ports=((upstream.node_id, free_port()),))


def upstream_kind(broker) -> str:
    return "tansu" if isinstance(broker, TansuBroker) else "kafka"


def _address(broker) -> tuple[str, int]:
    return broker.host, broker.port


# While a new cluster creates its transaction state topic it answers COORDINATOR_NOT_AVAILABLE.
_NOT_YET = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.CONCURRENT_TRANSACTIONS}


async def _until_settled(address: tuple[str, int], request, response_class, error=lambda a: a.error_code):
    deadline = time.monotonic() + 60
    while True:
        answer = await _ask(address, request, response_class)
        if error(answer) not in _NOT_YET or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.2)


def _commit_error(answer) -> int:
    return answer.topics[0].partitions[0].error_code


async def _begin_transaction(address: tuple[str, int], transactional_id: str, group: str) -> tuple[int, int]:
    """FindCoordinator (transaction), InitProducerId and AddOffsetsToTxn: the transaction
    coordinator's part, which stays upstream's. Kafka creates its transaction state topic
    when a transaction coordinator is first looked up."""
    found = await _until_settled(address, FindCoordinatorRequest[3](key=transactional_id, key_type=1),
                                 FindCoordinatorResponse)
    assert found.error_code == ErrorCode.NONE, found
    init = await _until_settled(address, InitProducerIdRequest[3](
        transactional_id=transactional_id, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1),
        InitProducerIdResponse)
    assert init.error_code == ErrorCode.NONE, init
    added = await _until_settled(address, AddOffsetsToTxnRequest[3](
        transactional_id=transactional_id, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
        group_id=group), AddOffsetsToTxnResponse)
    assert added.error_code == ErrorCode.NONE, added
    return init.producer_id, init.producer_epoch


async def test_txn_offset_commit_through_kgc_is_kgcs_never_forwarded(upstream, upstream_config):
    topic = new_name("payments")
    created = await _ask(_address(upstream), create_topic(topic), CreateTopicsResponse)
    assert created.topics[0].error_code == ErrorCode.NONE, created
    # The upstream takes this commit from anyone who started a transaction...
    producer_id, epoch = await _begin_transaction(_address(upstream), f"direct-{topic}", f"direct-{topic}")
    # (Kafka creates its offsets topic when a group coordinator is first looked up)
    found = await _until_settled(_address(upstream), FindCoordinatorRequest[3](key=f"direct-{topic}", key_type=0),
                                 FindCoordinatorResponse)
    assert found.error_code == ErrorCode.NONE, found
    direct = await _until_settled(_address(upstream), _txn_offset_commit(
        f"direct-{topic}", f"direct-{topic}", producer_id, epoch, topic), TxnOffsetCommitResponse, _commit_error)
    assert _commit_error(direct) == ErrorCode.NONE

    async with running_kgc(upstream_config) as app:
        await asyncio.wait_for(app.cluster.wait_reachable(), 10)
        kgc = ("127.0.0.1", app.port)
        # ...through kgc the transaction's own APIs still reach it (AddOffsetsToTxn adds kgc's
        # participant partition)...
        producer_id, epoch = await _begin_transaction(kgc, f"via-kgc-{topic}", f"victim-{topic}")
        # ...and the group's part of it is kgc's: served here (Kafka takes kgc's participant
        # record; Tansu closes on it, and kgc answers retriably once its commit timeout is up)...
        served = await _ask(kgc, _txn_offset_commit(f"via-kgc-{topic}", f"victim-{topic}", producer_id, epoch,
                                                    topic), TxnOffsetCommitResponse, timeout_s=20)
        assert _commit_error(served) == (ErrorCode.NONE if upstream_kind(upstream) == "kafka"
                                         else ErrorCode.COORDINATOR_NOT_AVAILABLE)
    # ...never planted upstream, where the group has no offset.
    fetched = await _ask(_address(upstream), OffsetFetchRequest[1](group_id=f"victim-{topic}", topics=[
        OffsetFetchRequest[1].OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]), OffsetFetchResponse)
    assert fetched.topics[0].partitions[0].committed_offset == -1


def _bare_request(api_key: int, version: int) -> bytes:
    """A request header v2 (every one of these APIs is flexible) and an empty body."""
    client_id = b"kgc-test"
    body = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id + b"\x00"
    return struct.pack(">i", len(body)) + body


UNSHAPED = sorted(UNSERVED_GROUP_APIS - {ApiKey.TxnOffsetCommit})


@pytest.mark.parametrize("api_key", UNSHAPED, ids=[ApiKey(key).name for key in UNSHAPED])
async def test_group_apis_without_a_codec_close_the_connection_in_kgc(upstream_config, api_key, caplog):
    async with running_kgc(upstream_config) as app:
        await asyncio.wait_for(app.cluster.wait_reachable(), 10)

        def scenario():
            with KafkaSocket(app.port) as s:
                versions = s.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
                assert api_key not in {k.api_key for k in versions.api_keys}    # not offered...
                s.sock.sendall(_bare_request(api_key, 0))                         # ...sent anyway
                assert s.closed_by_peer()

        with caplog.at_level(logging.WARNING, logger="coordinator.net.connection"):
            await asyncio.to_thread(scenario)
        # kgc refused it itself: the upstream never saw it to close on it.
        assert f"{ApiKey(api_key).name} v0 is not served (we serve no version)" in caplog.text
        still = await _ask(("127.0.0.1", app.port), ApiVersionsRequest[3](client_software_name="t",
                                                                            client_software_version="1"),
                           ApiVersionsResponse)
        assert still.error_code == ErrorCode.NONE


def test_the_table_follows_what_kgc_serves():
    # TxnOffsetCommit is served only with an upstream (the app adds it); standalone refuses it.
    assert ApiKey.TxnOffsetCommit in UNSERVED_GROUP_APIS
    assert ApiKey.JoinGroup not in UNSERVED_GROUP_APIS
    assert ApiKey.AddOffsetsToTxn not in UNSERVED_GROUP_APIS        # the transaction coordinator's
