"""kgc's participant partition (coordinator/txn/participant.py) against the suite's real Kafka
4.4 (transaction version 2): a TxnOffsetCommit v5+ stage has P's leader add P to the client's
transaction itself (no AddOffsetsToTxn), and the per-producer state it keeps stays bounded
however many producers come and go."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamUnavailable
from coordinator.settings import host_ports
from coordinator.txn.participant import ParticipantTopic
from protocol.errors import ApiError, ErrorCode

pytestmark = pytest.mark.integration

PARTITION = 7
RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
             ErrorCode.CONCURRENT_TRANSACTIONS}
REQUEST = {"group_id": "g", "member_id": "", "generation": -1, "topics": []}


@pytest.fixture
async def participant(kafka):
    cluster = UpstreamCluster(host_ports(kafka.bootstrap))
    cluster.start()
    await cluster.wait_reachable()
    topic = ParticipantTopic(cluster, 50, topic=f"txn-{uuid.uuid4().hex[:8]}", replication_factor=1)
    await topic.ensure()
    try:
        yield topic
    finally:
        await cluster.close()


async def init_producer(participant: ParticipantTopic, txn_id: str) -> tuple[int, int, int]:
    """A transactional producer's id and epoch, as InitProducerId gives them a client; and
    the node of its transaction coordinator."""
    for _ in range(100):        # a new cluster loads its transaction log first
        try:
            node = (await participant.cluster.find_coordinator(txn_id, 1)).node_id
        except UpstreamUnavailable:     # the transaction log's partitions not led yet
            await asyncio.sleep(0.2)
            continue
        conn = await participant.connection(node)
        answer = await participant.request(conn, InitProducerIdRequest[4](
            transactional_id=txn_id, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1),
            InitProducerIdResponse)
        if ErrorCode(answer.error_code) not in RETRIABLE:
            break
        await asyncio.sleep(0.2)
    assert answer.error_code == 0, ErrorCode(answer.error_code)
    return answer.producer_id, answer.producer_epoch, node


async def partitions_in_transaction(participant: ParticipantTopic, txn_id: str, node: int) -> list[tuple[str, int]]:
    conn = await participant.connection(node)
    answer = await participant.request(conn, DescribeTransactionsRequest[0](transactional_ids=[txn_id]),
                                       DescribeTransactionsResponse)
    return [(t.topic, p) for t in answer.transaction_states[0].topics for p in t.partitions]


async def test_a_v5_stage_adds_the_participant_partition_to_the_transaction(participant):
    txn_id = f"tv2-{uuid.uuid4().hex[:6]}"
    pid, epoch, node = await init_producer(participant, txn_id)
    # v4 (transaction version 1): P must already be in the transaction (AddOffsetsToTxn)
    with pytest.raises(ApiError) as refused:
        await participant.stage(txn_id, pid, epoch, PARTITION, REQUEST, 4)
    assert refused.value.code is ErrorCode.TRANSACTION_ABORTABLE
    assert await partitions_in_transaction(participant, txn_id, node) == []
    # v5 (transaction version 2): the write itself adds P
    offset = await participant.stage(txn_id, pid, epoch, PARTITION, REQUEST, 5)
    assert offset >= 0
    assert await partitions_in_transaction(participant, txn_id, node) == [(participant.topic, PARTITION)]


async def test_per_producer_state_stays_bounded_as_producers_come_and_go(participant):
    participant.sequences_kept = 3
    for i in range(5):
        txn_id = f"many-{uuid.uuid4().hex[:6]}-{i}"
        pid, epoch, _ = await init_producer(participant, txn_id)
        await participant.stage(txn_id, pid, epoch, PARTITION, REQUEST, 5)
        await participant.stage(txn_id, pid, epoch, PARTITION, REQUEST, 5)      # its next sequence, remembered
    assert len(participant._sequences) == 3
    assert participant._locks == {}
