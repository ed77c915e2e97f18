"""sarama (Go) consumer groups through kgc in front of Kafka, driven by tests/e2e/go/sarama_group.go.

sarama 1.22 (Debian's golang-github-shopify-sarama-dev) speaks the group APIs at the
versions Kafka 4.0 dropped or kept from long ago: FindCoordinator v0, JoinGroup v1,
SyncGroup v0, Heartbeat v0, LeaveGroup v0, OffsetFetch v1, and, with its default
`Consumer.Offsets.Retention` of 0, OffsetCommit v1. The program is built offline in GOPATH
mode; the test is skipped, saying why, when Go, sarama or the build is unavailable
(`.ci/run` installs both from Debian's packages).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import shutil
import subprocess

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from coordinator.probe import request_response
from tests.support.admin import (
    UNKNOWN_AT_KAFKA,
    committed_offsets,
    create_topic,
    group_at_broker,
    new_name,
    produce_sequenced,
)
from tests.support.clients import Member, MemberSettings, wait_until
from tests.support.kgc import KgcProcess, kgc_before
from tests.support.kgc_http import metrics_of

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SOURCE = pathlib.Path(__file__).parent / "go" / "sarama_group.go"
GOPATH = pathlib.Path("/usr/share/gocode")       # where Debian's golang-*-dev packages put Go sources
SARAMA = GOPATH / "src" / "github.com" / "Shopify" / "sarama"
KAFKA_VERSION = "2.1.0"     # sarama's Config.Version: any from 0.10.2 (groups) gives the same group requests
PARTITIONS = 3
FIRST, SECOND = 20, 15


@pytest.fixture(scope="module")
def sarama_group(tmp_path_factory) -> str:
    """The program, built offline: Go in GOPATH mode against Debian's packaged sarama."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("the sarama test needs Go (Debian: golang-go) on PATH")
    if not SARAMA.is_dir():
        pytest.skip(f"the sarama test needs sarama's sources in {SARAMA} (Debian: golang-github-shopify-sarama-dev)")
    out = tmp_path_factory.mktemp("sarama")
    binary = out / "sarama_group"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOPROXY": "off", "GOFLAGS": "",
           "GOCACHE": str(out / "cache"), "HOME": str(out)}
    try:
        subprocess.run([go, "build", "-o", str(binary), str(SOURCE)], env=env, check=True, timeout=300,
                       capture_output=True, text=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot build {SOURCE.name} against Debian's sarama: {exc} {(exc.stderr or '')[-1000:]}")
    return str(binary)


def advertised(kgc: KgcProcess, api_key: ApiKey) -> tuple[int, int]:
    """The range kgc's ApiVersions gives `api_key` in front of the upstream."""
    response = request_response(("127.0.0.1", kgc.port), ApiVersionsRequest(version=0), ApiVersionsResponse)
    return next((k.min_version, k.max_version) for k in response.api_keys if k.api_key == api_key)


def run_members(binary: str, bootstrap: str, topic: str, group: str, expect: int, members: int = 1) -> dict:
    """`members` sarama members, the second joining once the first holds partitions: they
    consume only once every member holds some, until `expect` records arrived between them."""
    run = subprocess.run([binary, bootstrap, topic, group, str(expect), str(members), KAFKA_VERSION],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    report["log"] = run.stderr
    return report


def first_offsets(report: dict) -> dict[int, int]:
    firsts: dict[int, int] = {}
    for r in report["received"]:
        firsts[r["partition"]] = min(r["offset"], firsts.get(r["partition"], r["offset"]))
    return firsts


def values(report: dict) -> list[str]:
    return sorted(r["value"] for r in report["received"])


def expected_values(first_sequence: int, count: int) -> list[str]:
    return sorted(f"{p}:{s}" for p in range(PARTITIONS) for s in range(first_sequence, first_sequence + count))


def test_a_default_sarama_group_commits_through_kgc_and_resumes_at_its_offsets_after_a_restart(
        sarama_group, kafka):
    with kgc_before(kafka) as (kgc, http_port):
        assert (advertised(kgc, ApiKey.OffsetCommit), advertised(kgc, ApiKey.OffsetFetch)) == ((0, 10), (0, 10))
        topic = create_topic(kgc.bootstrap, PARTITIONS)
        group = new_name("sarama")
        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, FIRST)

        # Two members: the second's arrival rebalances the group (Heartbeat v0 answered
        # REBALANCE_IN_PROGRESS, both rejoin with JoinGroup v1, the leader's SyncGroup v0
        # hands out the partitions), then they share the partitions and both commit.
        first = run_members(sarama_group, kgc.bootstrap, topic, group, PARTITIONS * FIRST, members=2)
        held = list(first["held"].values())
        assert len(held) == 2 and all(held) and sorted(held[0] + held[1]) == list(range(PARTITIONS)), held
        assert values(first) == expected_values(0, FIRST)     # each record once: no loss, no duplicate
        assert {r["member"] for r in first["received"]} == set(first["held"])
        assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), FIRST)

        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, SECOND, first_sequence=FIRST)
        second = run_members(sarama_group, kgc.bootstrap, topic, group, PARTITIONS * SECOND)
        # The restarted member starts where the first one committed: nothing read twice.
        assert first_offsets(second) == dict.fromkeys(range(PARTITIONS), FIRST)
        assert values(second) == expected_values(FIRST, SECOND)
        assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), FIRST + SECOND)
        assert "not supported" not in first["log"] + second["log"]
        metrics = metrics_of(http_port)
    # kgc answered the group: Kafka's own coordinator never heard of it.
    assert group_at_broker(kafka.host, kafka.port, group) == UNKNOWN_AT_KAFKA
    # Every group request sarama 1.22 sends, at the versions it sends them, was answered.
    sarama_paths = [("FindCoordinator", "0"), ("JoinGroup", "1"), ("SyncGroup", "0"), ("Heartbeat", "0"),
                    ("OffsetFetch", "1"), ("OffsetCommit", "1"), ("LeaveGroup", "0")]
    seen = {(api, v): metrics.total("kgc_requests_total", api=api, version=v) for api, v in sarama_paths}
    log.info("sarama's group requests through kgc: %s", seen)
    assert all(seen.values()), seen
    assert seen["LeaveGroup", "0"] == 3 and seen["JoinGroup", "1"] >= 4
    assert metrics.total("kgc_response_errors_total", api="Heartbeat", error="REBALANCE_IN_PROGRESS") >= 1
    assert metrics.total("kgc_response_errors_total", api="OffsetCommit", error="UNSUPPORTED_VERSION") == 0


def test_with_kafka_4s_cut_the_same_group_commits_nothing_and_a_restart_reads_everything_again(
        sarama_group, kafka):
    """What kgc did before it served OffsetCommit v1, and what `min_group_api_versions =
    "kafka4"` restores: every commit refused with UNSUPPORTED_VERSION, which sarama reports
    only in its log, and the restarted member starts over."""
    with kgc_before(kafka, "--min-group-api-versions", "kafka4") as (kgc, http_port):
        assert (advertised(kgc, ApiKey.OffsetCommit), advertised(kgc, ApiKey.OffsetFetch)) == ((2, 10), (1, 10))
        topic = create_topic(kgc.bootstrap, PARTITIONS)
        group = new_name("sarama-cut")
        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, FIRST)
        first = run_members(sarama_group, kgc.bootstrap, topic, group, PARTITIONS * FIRST)
        second = run_members(sarama_group, kgc.bootstrap, topic, group, PARTITIONS * FIRST)
        assert committed_offsets(kgc.bootstrap, group) == {}
        metrics = metrics_of(http_port)
        assert metrics.total("kgc_requests_total", api="OffsetCommit", version="1") >= 2
        assert metrics.total("kgc_response_errors_total", api="OffsetCommit", error="UNSUPPORTED_VERSION") >= 2
    assert values(first) == values(second) == expected_values(0, FIRST)
    assert first_offsets(second) == dict.fromkeys(range(PARTITIONS), 0)
    assert "The version of API is not supported" in first["log"]


def test_a_sarama_member_and_a_java_member_share_one_group(sarama_group, kgc):
    """sarama's default strategy and the Java client's RangeAssignor speak one protocol
    ("range"): in one group through kgc each holds half the partitions, and between them every
    record is read once; when sarama leaves, the Java member takes its partitions over at
    sarama's commits and reads nothing again."""
    partitions = 2 * PARTITIONS
    topic, group = create_topic(kgc.bootstrap, partitions), new_name("sarama-java")
    java = Member("java", MemberSettings(kgc.bootstrap, group, topic, "java-member", confluent_assignor="range")).start()
    try:
        wait_until(lambda: len(java.assignment) == partitions, 60, lambda: str(java.assignment), [java])
        sarama = subprocess.Popen([sarama_group, kgc.bootstrap, topic, group, str(PARTITIONS * FIRST), "1",
                                   KAFKA_VERSION], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: len(java.assignment) == PARTITIONS, 60, lambda: str(java.assignment), [java])
            java_half = java.assignment
            produce_sequenced(kgc.bootstrap, topic, partitions, FIRST)
            out, err = sarama.communicate(timeout=120)
        finally:
            if sarama.poll() is None:
                sarama.kill()
        assert sarama.returncode == 0, err[-3000:]
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
