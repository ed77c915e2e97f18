"""sarama (Go) consumer groups through kgc in front of Kafka, driven by the programs in
tests/e2e/go: `sarama_group` (members of one group), `sarama_member` (one member that reports
each session, claim and revocation) and `sarama_eos` (an exactly-once copier).

Two sarama builds. sarama 1.22 (Debian's golang-github-shopify-sarama-dev, built offline in
GOPATH mode with the import renamed to Shopify's) speaks the group APIs at the versions Kafka
4.0 dropped or kept from long ago: FindCoordinator v0, JoinGroup v1, SyncGroup v0, Heartbeat
v0, LeaveGroup v0, OffsetFetch v1, and, with its default `Consumer.Offsets.Retention` of 0,
OffsetCommit v1. IBM/sarama 1.61, the current line (go.mod, from the Go module proxy; `.ci/run`
downloads it), told the cluster is Kafka 4.0, speaks their current versions and has
transactions. A test is skipped, saying why, when Go, a sarama or its build is unavailable.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
import uuid

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from coordinator.probe import request_response
from tests.support.admin import (
    UNKNOWN_AT_KAFKA,
    committed_offsets,
    create_topic,
    describe_group,
    group_at_broker,
    new_name,
    produce_sequenced,
)
from tests.support.clients import Member, MemberSettings, wait_until
from tests.support.eos import assert_exactly_once, seed, topics
from tests.support.kgc import KgcProcess, kgc_before, kgc_command
from tests.support.kgc_http import metrics_of
from tests.support.sarama import Sarama, SaramaMember, run_members

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 3
FIRST, SECOND = 20, 15
EOS_RECORDS = 600
# The version of each group API a sarama build sends (`Sarama.kafka_version` decides 1.61's).
GROUP_REQUESTS = {
    "1.22": {"FindCoordinator": "0", "JoinGroup": "1", "SyncGroup": "0", "Heartbeat": "0", "OffsetFetch": "1",
             "OffsetCommit": "1", "LeaveGroup": "0"},
    "1.61": {"FindCoordinator": "3", "JoinGroup": "8", "SyncGroup": "5", "Heartbeat": "4", "OffsetFetch": "8",
             "OffsetCommit": "8", "LeaveGroup": "5"},
}


@pytest.fixture(params=["1.22", "1.61"])
def sarama(request) -> Sarama:
    return request.getfixturevalue(f"sarama_{request.param.replace('.', '_')}")


def advertised(kgc: KgcProcess, api_key: ApiKey) -> tuple[int, int]:
    """The range kgc's ApiVersions gives `api_key` in front of the upstream."""
    response = request_response(("127.0.0.1", kgc.port), ApiVersionsRequest(version=0), ApiVersionsResponse)
    return next((k.min_version, k.max_version) for k in response.api_keys if k.api_key == api_key)


def first_offsets(report: dict) -> dict[int, int]:
    firsts: dict[int, int] = {}
    for r in report["received"]:
        firsts[r["partition"]] = min(r["offset"], firsts.get(r["partition"], r["offset"]))
    return firsts


def values(report: dict) -> list[str]:
    return sorted(r["value"] for r in report["received"])


def expected_values(first_sequence: int, count: int) -> list[str]:
    return sorted(f"{p}:{s}" for p in range(PARTITIONS) for s in range(first_sequence, first_sequence + count))


def assert_read_from(report: dict, offset: int, count: int) -> None:
    """The run read each partition from `offset` on, `count` records each, every one once."""
    assert first_offsets(report) == dict.fromkeys(range(PARTITIONS), offset)
    assert values(report) == expected_values(offset, count)


def test_a_default_sarama_group_commits_through_kgc_and_resumes_at_its_offsets_after_a_restart(
        sarama, kafka):
    with kgc_before(kafka) as (kgc, http_port):
        assert (advertised(kgc, ApiKey.OffsetCommit), advertised(kgc, ApiKey.OffsetFetch)) == ((0, 10), (0, 10))
        topic = create_topic(kgc.bootstrap, PARTITIONS)
        group = new_name("sarama")
        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, FIRST)

        # Two members: the second's arrival rebalances the group (a Heartbeat answered
        # REBALANCE_IN_PROGRESS, both rejoin, the leader's SyncGroup hands out the
        # partitions), then they share the partitions and both commit.
        first = run_members(sarama, kgc.bootstrap, topic, group, PARTITIONS * FIRST, members=2)
        held = list(first["held"].values())
        assert len(held) == 2 and all(held) and sorted(held[0] + held[1]) == list(range(PARTITIONS)), held
        assert values(first) == expected_values(0, FIRST)     # each record once: no loss, no duplicate
        assert {r["member"] for r in first["received"]} == set(first["held"])
        assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), FIRST)

        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, SECOND, first_sequence=FIRST)
        second = run_members(sarama, kgc.bootstrap, topic, group, PARTITIONS * SECOND)
        # The restarted member starts where the first one committed: nothing read twice.
        assert_read_from(second, FIRST, SECOND)
        assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), FIRST + SECOND)
        assert "not supported" not in first["log"] + second["log"]
        metrics = metrics_of(http_port)
    # kgc answered the group: Kafka's own coordinator never heard of it.
    assert group_at_broker(kafka.host, kafka.port, group) == UNKNOWN_AT_KAFKA
    # Every group request this sarama sends, at the versions it sends them, was answered.
    versions = GROUP_REQUESTS[sarama.name]
    seen = {api: metrics.total("kgc_requests_total", api=api, version=v) for api, v in versions.items()}
    log.info("sarama %s's group requests through kgc: %s", sarama.name, seen)
    assert all(seen.values()), seen
    assert seen["LeaveGroup"] == 3 and seen["JoinGroup"] >= 4
    assert metrics.total("kgc_response_errors_total", api="Heartbeat", error="REBALANCE_IN_PROGRESS") >= 1
    assert metrics.total("kgc_response_errors_total", api="OffsetCommit", error="UNSUPPORTED_VERSION") == 0


def test_with_kafka_4s_cut_the_same_group_commits_nothing_and_a_restart_reads_everything_again(
        sarama_1_22, kafka):
    """What kgc did before it served OffsetCommit v1, and what `min_group_api_versions =
    "kafka4"` restores: every commit refused with UNSUPPORTED_VERSION, which sarama reports
    only in its log, and the restarted member starts over."""
    with kgc_before(kafka, "--min-group-api-versions", "kafka4") as (kgc, http_port):
        assert (advertised(kgc, ApiKey.OffsetCommit), advertised(kgc, ApiKey.OffsetFetch)) == ((2, 10), (1, 10))
        topic = create_topic(kgc.bootstrap, PARTITIONS)
        group = new_name("sarama-cut")
        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, FIRST)
        first = run_members(sarama_1_22, kgc.bootstrap, topic, group, PARTITIONS * FIRST)
        second = run_members(sarama_1_22, kgc.bootstrap, topic, group, PARTITIONS * FIRST)
        assert committed_offsets(kgc.bootstrap, group) == {}
        metrics = metrics_of(http_port)
        assert metrics.total("kgc_requests_total", api="OffsetCommit", version="1") >= 2
        assert metrics.total("kgc_response_errors_total", api="OffsetCommit", error="UNSUPPORTED_VERSION") >= 2
    assert values(first) == expected_values(0, FIRST)
    assert_read_from(second, 0, FIRST)     # nothing was committed: the restart reads it all again
    assert "The version of API is not supported" in first["log"]


def test_a_sarama_member_and_a_java_member_share_one_group(sarama, kgc):
    """sarama's default strategy and the Java client's RangeAssignor speak one protocol
    ("range"): in one group through kgc each holds half the partitions, and between them every
    record is read once; when sarama leaves, the Java member takes its partitions over at
    sarama's commits and reads nothing again."""
    partitions = 2 * PARTITIONS
    topic, group = create_topic(kgc.bootstrap, partitions), new_name("sarama-java")
    java = Member("java", MemberSettings(kgc.bootstrap, group, topic, "java-member", assignor="range")).start()
    try:
        wait_until(lambda: len(java.assignment) == partitions, 60, lambda: str(java.assignment), [java])
        member = subprocess.Popen([sarama.program("sarama_group"), kgc.bootstrap, topic, group, str(PARTITIONS * FIRST),
                                   "1", sarama.kafka_version], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: len(java.assignment) == PARTITIONS, 60, lambda: str(java.assignment), [java])
            java_half = java.assignment
            produce_sequenced(kgc.bootstrap, topic, partitions, FIRST)
            out, err = member.communicate(timeout=120)
        finally:
            if member.poll() is None:
                member.kill()
        assert member.returncode == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        [sarama_half] = [set(held) for held in report["held"].values()]
        assert sorted([*sarama_half, *java_half]) == list(range(partitions))
        wait_until(lambda: len(java.assignment) == partitions and len(java.consumed) >= PARTITIONS * FIRST, 60,
                   lambda: f"{sorted(java.assignment)}, {len(java.consumed)} consumed", [java])
        java.commit()
    finally:
        java.close()
    read = sorted([r["value"] for r in report["received"]] + [c.value.decode() for c in java.consumed])
    assert read == sorted(f"{p}:{s}" for p in range(partitions) for s in range(FIRST))
    assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(partitions), FIRST)


def test_a_sarama_group_moves_to_kgc_at_its_kafka_offsets_and_back_after_an_export(sarama_1_61, kafka, kgc):
    # sarama 1.61 only: 1.22 commits with OffsetCommit v1, which Kafka 4 no longer serves.
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("sarama-adopt")
    produce_sequenced(kafka.bootstrap, topic, PARTITIONS, FIRST)
    run_members(sarama_1_61, kafka.bootstrap, topic, group, PARTITIONS * FIRST)
    assert committed_offsets(kafka.bootstrap, group) == dict.fromkeys(range(PARTITIONS), FIRST)

    # Pointed at kgc, the group resumes at the offsets it committed at Kafka.
    produce_sequenced(kafka.bootstrap, topic, PARTITIONS, SECOND, first_sequence=FIRST)
    on_kgc = run_members(sarama_1_61, kgc.bootstrap, topic, group, PARTITIONS * SECOND)
    assert_read_from(on_kgc, FIRST, SECOND)
    assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), FIRST + SECOND)

    # And back: `kgc export --apply`, then the group at Kafka resumes at kgc's offsets.
    kgc_command("export", "--upstream", kafka.bootstrap, "--bootstrap-server", kgc.bootstrap, "--group", group,
                "--apply")
    produce_sequenced(kafka.bootstrap, topic, PARTITIONS, SECOND, first_sequence=FIRST + SECOND)
    back = run_members(sarama_1_61, kafka.bootstrap, topic, group, PARTITIONS * SECOND)
    assert_read_from(back, FIRST + SECOND, SECOND)


def test_a_sarama_copier_copies_exactly_once_with_aborted_transactions_rewound(sarama_1_61, kafka):
    # given input records and sarama's transactional copier (AddOffsetsToTxn, then
    # TxnOffsetCommit v3 naming its member and generation, as a session's metadata has them)
    with kgc_before(kafka) as (kgc, http_port):
        source, target = topics(kafka)
        inputs = seed(kafka.bootstrap, source, EOS_RECORDS)
        group = f"sarama-eos-{uuid.uuid4().hex[:6]}"
        # when it copies through kgc, aborting every third transaction and starting a new
        # session after each abort, at the offsets kgc gives back
        run = subprocess.run([sarama_1_61.program("sarama_eos"), kgc.bootstrap, source, target, group,
                              str(EOS_RECORDS), sarama_1_61.kafka_version], capture_output=True, text=True, timeout=100)
        assert run.returncode == 0, run.stderr[-3000:]
        done = json.loads(run.stdout.strip().splitlines()[-1])
        # then every input is in the output once, and the offsets are those of the committed transactions
        assert done["aborted"] > 0 and done["sessions"] > 1, done
        assert_exactly_once(kafka, kgc.bootstrap, group, source, target, inputs)
        metrics = metrics_of(http_port)
    # sarama sends a transaction's offsets when it commits it (AddOffsetsToTxn, TxnOffsetCommit
    # at CommitTxn): an aborted one never reaches kgc.
    committed_transactions = done["transactions"] - done["transactions"] // 3
    assert metrics.total("kgc_requests_total", api="TxnOffsetCommit", version="3") >= committed_transactions
    answered = metrics.total("kgc_response_errors_total", api="TxnOffsetCommit")
    assert answered == metrics.total("kgc_response_errors_total", api="TxnOffsetCommit", error="NONE")


# sarama heartbeats every 3 s by default: a member that a rebalance concerned would have
# heard of it within this, and ended its session.
REBALANCE_WINDOW_S = 7


def test_a_static_sarama_member_restarts_into_its_place_without_a_rebalance(sarama_1_61, kgc):
    """KIP-345 with IBM/sarama: a static member that closes sends no LeaveGroup, and a new
    process with its instance id joins into its place (a new member id, the same generation
    and partitions) while the other member's session goes on untouched."""
    topic, group = create_topic(kgc.bootstrap, 2 * PARTITIONS), new_name("sarama-static")
    members = [SaramaMember(sarama_1_61, kgc.bootstrap, topic, group, instance_id="static-a")]
    try:
        first = members[0]
        first.wait_sessions(1)
        members.append(SaramaMember(sarama_1_61, kgc.bootstrap, topic, group, instance_id="static-b"))
        before = members[1].wait_sessions(1)[-1]
        first.wait_sessions(2)            # the rebalance that the second member's arrival began
        assert first.sessions[-1]["generation"] == before["generation"]
        assert sorted(first.sessions[-1]["partitions"] + before["partitions"]) == list(range(2 * PARTITIONS))

        members[1].close()
        members.append(SaramaMember(sarama_1_61, kgc.bootstrap, topic, group, instance_id="static-b"))
        after = members[2].wait_sessions(1)[-1]
        assert (after["generation"], after["partitions"]) == (before["generation"], before["partitions"])
        assert after["member_id"] != before["member_id"]
        time.sleep(REBALANCE_WINDOW_S)
        assert len(first.sessions) == 2 and len(members[2].sessions) == 1, (first.events, members[2].events)
        assert [e["event"] for e in first.events if e["event"] in ("session", "end")] == ["session", "end", "session"]
    finally:
        for member in members:
            member.close()


def test_a_cooperative_sarama_member_and_a_java_member_rebalance_incrementally(sarama_1_61, kgc):
    """KIP-429 with IBM/sarama's cooperative-sticky beside the Java client's: when sarama
    joins, the Java member gives up only what moves (never all it holds); when the Java
    member leaves, sarama only gains (no revocation, one session throughout); every record
    is read once and the commits are there."""
    partitions = 2 * PARTITIONS
    topic, group = create_topic(kgc.bootstrap, partitions), new_name("sarama-coop")
    java = Member("java", MemberSettings(kgc.bootstrap, group, topic, "java-coop",
                                         assignor="cooperative-sticky")).start()
    sarama = None
    try:
        wait_until(lambda: len(java.assignment) == partitions, 60, lambda: str(java.assignment), [java])
        produce_sequenced(kgc.bootstrap, topic, partitions, FIRST)
        sarama = SaramaMember(sarama_1_61, kgc.bootstrap, topic, group, strategy="cooperative-sticky")
        sarama.wait(lambda: len(sarama.assignment) == PARTITIONS and len(java.assignment) == PARTITIONS,
                    f"an even split, java holds {sorted(java.assignment)}")
        full = java.assignment_history.index(set(range(partitions)))
        assert all(java.assignment_history[full:]), java.assignment_history     # never left with nothing
        assert describe_group(kgc.bootstrap, group)["protocol_data"] == "cooperative-sticky"
        wait_until(lambda: len(java.consumed) + len(sarama.of("record")) >= partitions * FIRST, 60,
                   lambda: f"{len(java.consumed)} + {len(sarama.of('record'))} read", [java])

        java.commit()
        java.close()
        sarama.wait(lambda: len(sarama.assignment) == partitions, "every partition after the leave")
        produce_sequenced(kgc.bootstrap, topic, partitions, SECOND, first_sequence=FIRST)
        sarama.wait(lambda: len(sarama.of("record")) + len(java.consumed) >= partitions * (FIRST + SECOND),
                    "every record")
        assert not sarama.of("revoked") and len(sarama.sessions) == 1, sarama.events
    finally:
        if java.running:
            java.close()
        if sarama is not None:
            sarama.close()
    read = sorted([r["value"] for r in sarama.of("record")] + [c.value.decode() for c in java.consumed])
    assert read == sorted(f"{p}:{s}" for p in range(partitions) for s in range(FIRST + SECOND))
    assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(partitions), FIRST + SECOND)


def test_sarama_members_with_its_default_range_strategy_get_contiguous_ranges_and_setup_sees_them(sarama_1_61, kgc):
    """sarama's default strategy, range, through kgc: three members hold two neighbouring
    partitions each, and the session each one's Setup is given (its rebalance listener) names
    what it then claims."""
    partitions = 2 * PARTITIONS
    topic, group = create_topic(kgc.bootstrap, partitions), new_name("sarama-range")
    members: list[SaramaMember] = []

    def settled() -> bool:
        last = [m.sessions[-1] for m in members if m.sessions]
        return (len(last) == len(members) and len({s["generation"] for s in last}) == 1
                and sorted(p for s in last for p in s["partitions"]) == list(range(partitions))
                and all(m.assignment == set(s["partitions"]) for m, s in zip(members, last, strict=True)))

    try:
        for _ in range(3):
            members.append(SaramaMember(sarama_1_61, kgc.bootstrap, topic, group))
        members[0].wait(settled, f"one generation of three sessions: {[m.sessions[-1:] for m in members]}")
        assert sorted(sorted(m.sessions[-1]["partitions"]) for m in members) == [[0, 1], [2, 3], [4, 5]]
        description = describe_group(kgc.bootstrap, group)
        assert (description["group_state"], description["protocol_data"]) == ("Stable", "range")
    finally:
        for member in members:
            member.close()
