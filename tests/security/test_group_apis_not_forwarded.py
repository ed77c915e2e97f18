"""A group API kgc does not serve is refused by kgc, never forwarded: upstream it would act
on a group kgc holds (a TxnOffsetCommit would plant offsets kgc later adopts; a streams or
share group would live half upstream). Kafka answers an API it does not serve
UNSUPPORTED_VERSION; where kgc has no codec to shape that answer, it closes the
connection, as Kafka does for an API its listener does not serve."""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
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
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.security import KafkaSocket
from tests.support.tansu import request_response

pytestmark = pytest.mark.integration


async def _ask(address: tuple[str, int], request, response_class):
    return await asyncio.to_thread(request_response, address, request, response_class)


def _txn_offset_commit(transactional_id: str, group: str, producer_id: int, epoch: int) -> TxnOffsetCommitRequest:
    cls = TxnOffsetCommitRequest[3]
    topic = cls.TxnOffsetCommitRequestTopic
    return cls(transactional_id=transactional_id, group_id=group, producer_id=producer_id, producer_epoch=epoch,
               generation_id=-1, member_id="", group_instance_id=None, topics=[
                   topic(name="payments", partitions=[topic.TxnOffsetCommitRequestPartition(
                       partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                       committed_metadata="")])])


@pytest.fixture
def upstream_config(tansu):
    return ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, upstream=(tansu.address,),
                        broker_ports=((tansu.node_id, free_port()),))


async def _begin_transaction(address: tuple[str, int], transactional_id: str, group: str) -> tuple[int, int]:
    """InitProducerId and AddOffsetsToTxn: the transaction coordinator's part, which stays upstream's."""
    init = await _ask(address, InitProducerIdRequest[3](transactional_id=transactional_id,
                                                        transaction_timeout_ms=60_000, producer_id=-1,
                                                        producer_epoch=-1), InitProducerIdResponse)
    assert init.error_code == ErrorCode.NONE
    added = await _ask(address, AddOffsetsToTxnRequest[3](transactional_id=transactional_id,
                                                          producer_id=init.producer_id,
                                                          producer_epoch=init.producer_epoch, group_id=group),
                       AddOffsetsToTxnResponse)
    assert added.error_code == ErrorCode.NONE
    return init.producer_id, init.producer_epoch


async def test_txn_offset_commit_is_answered_unsupported_version_not_forwarded(tansu, upstream_config):
    # The upstream takes this commit from anyone who started a transaction...
    producer_id, epoch = await _begin_transaction(tansu.address, "direct-tx", "direct-group")
    direct = await _ask(tansu.address, _txn_offset_commit("direct-tx", "direct-group", producer_id, epoch),
                        TxnOffsetCommitResponse)
    assert direct.topics[0].partitions[0].error_code == ErrorCode.NONE

    async with running_kgc(upstream_config) as app:
        await asyncio.wait_for(app.cluster.wait_reachable(), 10)
        kgc = ("127.0.0.1", app.port)
        # ...and through kgc the transaction's own APIs still reach it (forwarded)...
        producer_id, epoch = await _begin_transaction(kgc, "via-kgc-tx", "victim-group")
        # ...but the group's part of it is kgc's, which does not serve it.
        refused = await _ask(kgc, _txn_offset_commit("via-kgc-tx", "victim-group", producer_id, epoch),
                             TxnOffsetCommitResponse)
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in refused.topics] == [
            ("payments", [(0, ErrorCode.UNSUPPORTED_VERSION)])]


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
    # TxnOffsetCommit leaves the refused set by being served (LOCAL_VERSIONS), nothing else.
    assert ApiKey.TxnOffsetCommit in UNSERVED_GROUP_APIS
    assert ApiKey.JoinGroup not in UNSERVED_GROUP_APIS
    assert ApiKey.AddOffsetsToTxn not in UNSERVED_GROUP_APIS        # the transaction coordinator's
