"""A partition whose leader is moving keeps its known log end, as an unreachable one does;
a lasting error replaces it with the reason. `refresh` says False until every end is new."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from coordinator.gateway.log_ends import LogEnds
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

TOPIC = "orders"
LEADER = 1


class Upstream:
    """The cluster LogEnds asks for Metadata, with partition 0 led by `LEADER` and partition 1
    leaderless while `leaderless` is set."""

    def __init__(self) -> None:
        self.api_versions = {ApiKey.Metadata: (0, 12), ApiKey.ListOffsets: (0, 8)}
        self.leaderless = False

    async def request(self, request, response_class):
        partitions = [SimpleNamespace(partition_index=0, leader_id=LEADER),
                      SimpleNamespace(partition_index=1, leader_id=-1 if self.leaderless else LEADER)]
        return SimpleNamespace(brokers=[SimpleNamespace(node_id=LEADER, host="127.0.0.1", port=9)],
                               topics=[SimpleNamespace(name=TOPIC, error_code=0, partitions=partitions)])


def answering(log_ends: LogEnds, answers: dict[int, tuple[int, int]]) -> None:
    """ListOffsets answers, partition -> (error code, offset)."""
    async def send(node, address, request):
        return SimpleNamespace(topics=[SimpleNamespace(name=TOPIC, partitions=[
            SimpleNamespace(partition_index=p, error_code=code, offset=offset)
            for p, (code, offset) in answers.items() if p in {q.partition_index for q in request.topics[0].partitions}])])
    log_ends._send = send      # type: ignore[method-assign]


def test_a_moving_or_missing_leader_keeps_the_known_end_and_a_lasting_error_replaces_it():
    upstream, now = Upstream(), [1_000]
    log_ends = LogEnds(upstream, clock=lambda: now[0])   # type: ignore[arg-type]
    wanted = [(TOPIC, 0), (TOPIC, 1)]
    answering(log_ends, {0: (0, 40), 1: (0, 50)})
    assert asyncio.run(log_ends.refresh(wanted)) is True
    now[0] = 2_000
    answering(log_ends, {0: (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1), 1: (0, 55)})
    upstream.leaderless = True
    assert asyncio.run(log_ends.refresh(wanted)) is False
    assert log_ends.end_of((TOPIC, 0)) == (40, None, 1_000)
    assert log_ends.end_of((TOPIC, 1)) == (50, None, 1_000)
    upstream.leaderless = False
    answering(log_ends, {0: (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1), 1: (0, 55)})
    assert asyncio.run(log_ends.refresh(wanted)) is True
    assert log_ends.end_of((TOPIC, 0)) == (None, "upstream answered TOPIC_AUTHORIZATION_FAILED", None)
    assert log_ends.end_of((TOPIC, 1)) == (55, None, 2_000)
