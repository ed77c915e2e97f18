"""The bench sends each group's requests to the coordinator FindCoordinator names, as
Kafka's clients do: run directly against the suite's 3-node Kafka (`kafka3`, whose
`__consumer_offsets` leaders are spread over its brokers; none is moved here), with the
target's address on one broker and the run's groups chosen so that other brokers
coordinate some of them, every workload that sends group requests measures each figure
without an error. Sent to the target's address instead, those requests are answered
NOT_COORDINATOR (commits fail, groups never form)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Callable

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from coordinator.bench import compare as driver
from coordinator.bench import messages
from coordinator.bench.context import Context, Sizes
from coordinator.bench.member import Member
from coordinator.bench.router import Router
from coordinator.bench.targets import external
from coordinator.bench.wire import BenchConnection
from coordinator.partitioning import partition_for
from coordinator.probe import request_response
from protocol.errors import ErrorCode
from tests.support.kafka import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

# Several groups where a workload has several (each client in its own group, or one client
# over several groups); otherwise the sizes of `Sizes.tiny`, with a warm-up that outlasts a
# cold Kafka's first commits (0.1 s does not: the window would time none; 1 s once did not,
# on a busy machine, for pipelined commits).
SIZES = dataclasses.replace(Sizes.tiny(), commit_clients=4, fetch_groups=4, heartbeat_members=(8,),
                            heartbeat_group_size=2, warmup_s=2.0, duration_s=0.5, timeout_s=20.0)
ROUTED = ("commit", "sync-commit", "fetch-offsets", "heartbeat", "join", "rebalance")
READY_S = 60.0
CANDIDATES = 1_000


def _groups(run_id: str) -> dict[str, list[str]]:
    """The groups each workload uses at SIZES, as `Context.group_name` names them."""
    ctx = Context("external", lambda **kw: None, SIZES, None, run_id=run_id)
    s = SIZES
    return {
        "commit": [ctx.group_name("commit", i) for i in range(s.commit_clients)],
        "sync-commit": [ctx.group_name("sync-commit", f"None-{n}x{k}")
                        for n in s.sync_commit_clients for k in s.sync_commit_partitions],
        "fetch-offsets": [ctx.group_name("fetch", g) for g in range(s.fetch_groups)],
        "heartbeat": [ctx.group_name("heartbeat", g) for g in range(s.heartbeat_members[0] // s.heartbeat_group_size)],
        "join": [ctx.group_name("join", n) for n in s.join_members],
        "rebalance": [ctx.group_name("rebalance", s.rebalance_members)],
    }


def _coordinator(kafka: KafkaCluster, group: str) -> int:
    """The node id FindCoordinator names for `group`, asked of the first broker (bounded wait
    while Kafka creates `__consumer_offsets`)."""
    node = kafka.nodes[0]
    deadline = time.monotonic() + READY_S
    while True:
        found = request_response((node.host, node.port), FindCoordinatorRequest[2](key=group, key_type=0),
                                 FindCoordinatorResponse)
        if found.error_code == 0:
            return found.node_id
        assert time.monotonic() < deadline, f"no coordinator for {group} within {READY_S:.0f} s: {found}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def run_id(kafka3) -> str:
    """A run id whose groups make every workload cross brokers: each multi-group workload's
    groups have two coordinators or more, and the one-group workloads' group is coordinated
    by a broker other than the target's."""
    assert all(n.running for n in kafka3.nodes)
    bootstrap = kafka3.nodes[0].node_id
    partitions = int(kafka3.settings["offsets.topic.num.partitions"])
    probes: dict[int, str] = {}
    i = 0
    while len(probes) < partitions:
        probes.setdefault(partition_for(f"route-probe-{i}", partitions), f"route-probe-{i}")
        i += 1
    leader = {p: _coordinator(kafka3, group) for p, group in probes.items()}
    assert len(set(leader.values())) > 1, f"every __consumer_offsets partition is led by one node: {leader}"

    def node_of(group: str) -> int:
        return leader[partition_for(group, partitions)]

    def crosses(groups: list[str]) -> bool:
        nodes = {node_of(g) for g in groups}
        return len(nodes) > 1 if len(groups) > 1 else nodes != {bootstrap}

    chosen = next((f"route{c:04d}" for c in range(CANDIDATES)
                   if all(crosses(groups) for groups in _groups(f"route{c:04d}").values())), None)
    assert chosen is not None, f"no run id in {CANDIDATES} spreads the groups over {leader}"
    # What was computed from the partitions is what Kafka answers for the groups themselves.
    placed = {g: node_of(g) for groups in _groups(chosen).values() for g in groups}
    assert {g: _coordinator(kafka3, g) for g in placed} == placed
    return chosen


@pytest.mark.parametrize("workload", ROUTED)
def test_each_workload_follows_find_coordinator_to_groups_on_other_brokers(kafka3, run_id, workload, tmp_path):
    node = kafka3.nodes[0]
    launch: Callable = lambda **kw: external(node.host, node.port, node.proc.pid, "kafka3")  # noqa: E731
    ctx = Context("external", launch, SIZES, tmp_path, run_id=run_id)
    figures = asyncio.run(driver.WORKLOADS[workload](ctx))
    assert figures and all(f.value is not None for f in figures), [f for f in figures if f.value is None]
    rates = [f for f in figures if f.unit == "/s"]
    assert all(f.value > 0 for f in rates), rates
    if workload == "heartbeat":
        answered = [f for f in figures if f.unit != "µs"]      # the CPU figure's note says its seconds
        assert all(f.note.endswith(", 0 with an error") for f in answered), figures


def test_a_member_answered_not_coordinator_finds_its_coordinator_again_and_joins_there(kafka3, run_id):
    """A member whose JoinGroup reaches a broker that does not coordinate its group (as
    after a coordinator moved) asks FindCoordinator again and joins where it is told."""
    node = kafka3.nodes[0]
    [group] = _groups(run_id)["rebalance"]     # coordinated by another broker (the fixture)
    coordinator = kafka3.node(_coordinator(kafka3, group))

    async def scenario() -> None:
        member = Member(await BenchConnection.open(node.host, node.port), group, session_timeout_ms=6_000,
                        rebalance_timeout_ms=6_000, heartbeat_interval_ms=100)
        try:
            async with asyncio.timeout(30):
                await member.join_and_sync()    # no FindCoordinator first: the JoinGroup goes to `node`
            assert member.generation >= 1 and member.conn is not member.router.bootstrap
            assert member.conn.address == (coordinator.host, coordinator.port)
            assert await member.leave() == ErrorCode.NONE
        finally:
            member.close()

    asyncio.run(scenario())


def recording(codes: list[int], error_of: Callable[[bytes], int]) -> Callable[[bytes], int]:
    """`error_of`, keeping each error it reads in `codes`."""
    def recorded(payload: bytes) -> int:
        codes.append(error_of(payload))
        return codes[-1]
    return recorded


def test_a_set_up_request_answered_not_coordinator_is_sent_again_to_the_coordinator_found_anew(kafka3, run_id):
    """A router that still holds `node` as the coordinator of a group that moved: the
    request meets NOT_COORDINATOR there and is sent again where FindCoordinator now says."""
    node = kafka3.nodes[0]
    [group] = _groups(run_id)["rebalance"]     # coordinated by another broker (the fixture)

    async def scenario() -> list[int]:
        router = Router(await BenchConnection.open(node.host, node.port))
        codes: list[int] = []
        error_of = recording(codes, messages.offset_fetch_error)
        try:
            # As a router whose group's coordinator has moved since it was found: `node`.
            router._by_group[group] = router.bootstrap
            request = messages.offset_fetch_request(group, "t", 1)
            await router.request(group, functools.partial(messages.encode, request), error_of)
            assert len(router.connections) == 2 and await router.connection(group) is not router.bootstrap
        finally:
            router.close()
        return codes

    assert asyncio.run(scenario()) == [ErrorCode.NOT_COORDINATOR, ErrorCode.NONE]


def test_a_set_up_commit_to_a_topic_its_coordinator_does_not_know_yet_is_sent_again_until_it_does(kafka3, run_id):
    """A coordinator on another broker answers a commit to a topic it has not learned yet
    UNKNOWN_TOPIC_OR_PARTITION, as Kafka's brokers do for a moment after its controller
    created the topic; the set-up request is sent again until the commit is taken."""
    node = kafka3.nodes[0]
    [group] = _groups(run_id)["rebalance"]     # coordinated by another broker (the fixture)
    topic = f"late-{run_id}"

    def create_later() -> None:
        time.sleep(1.0)
        admin = KafkaAdminClient(bootstrap_servers=kafka3.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, 1, 3)])
        finally:
            admin.close()

    async def scenario() -> list[int]:
        router = Router(await BenchConnection.open(node.host, node.port))
        codes: list[int] = []
        error_of = recording(codes, messages.offset_commit_error)
        try:
            request = messages.offset_commit_request(group, topic, 1, 7)
            await asyncio.gather(asyncio.to_thread(create_later),
                                 router.request(group, functools.partial(messages.encode, request), error_of))
        finally:
            router.close()
        return codes

    codes = asyncio.run(scenario())
    assert codes[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and codes[-1] == ErrorCode.NONE, codes
