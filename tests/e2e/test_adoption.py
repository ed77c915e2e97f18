"""Cut-over on first use: groups whose offsets live in Kafka's own coordinator move to kgc.

The consumers first run directly against Kafka (its coordinator holds the group and the
committed offsets), then the same consumers are pointed at kgc, which adopts the group
from Kafka on first use; after `kgc export` they go back to Kafka. Every record is checked
by its sequence number: none lost, none consumed twice, across both coordinators. Two
tests keep a Tansu of their own: one stops it mid-request (SIGSTOP), one shows the Tansu
defect docs/migrating.md warns about.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import time

import pytest

from coordinator.settings import ServerConfig
from protocol.errors import ErrorCode
from tests.support.admin import (
    committed_offsets,
    create_topic,
    group_ids,
    new_name,
    produce_sequenced,
)
from tests.support.builders import leave_request
from tests.support.clients import (
    CONSUMER_PROTOCOL,
    LIBRARIES,
    Consumed,
    wait_until,
)
from tests.support.cut_over import (
    AFTER,
    BEFORE,
    TIMEOUT_S,
    assert_exactly_once,
    commit_and_close,
    consumed,
    group_moves_to_kgc_and_back,
    members,
    settled_members,
    wait_consumed,
)
from tests.support.kafkajs import JS_DIR
from tests.support.kgc import (
    TEST_GROUP_CONFIG,
    free_port,
    kgc_command,
    kgc_process,
    running_kgc,
    wait_listening,
)
from tests.support.kgc_http import get_json
from tests.support.settled_members import owns_all_partitions
from tests.support.simple_group_offsets import PARTITIONS, offset_fetch, simple_commit
from tests.support.tansu import TansuBroker
from tests.support.wire_client import RawMember, WireClient

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

WAITING_S = 3.0    # how long members at kgc are watched waiting (several JoinGroup retries)

LIBRARY_GROUPS = {
    "confluent-kafka": ("confluent-kafka",) * 3,
    "kafka-python": ("kafka-python",) * 3,
    "aiokafka": ("aiokafka",) * 3,
    "java": ("java",) * 3,
}


@pytest.mark.parametrize("libraries", LIBRARY_GROUPS.values(), ids=LIBRARY_GROUPS.keys())
def test_group_resumes_on_kgc_at_upstream_offsets(kafka, kgc, libraries):
    group_moves_to_kgc_and_back(kafka.bootstrap, kgc.bootstrap, libraries)


def test_rolling_cut_over_forms_the_group_on_kgc_once_upstream_is_empty(kafka, kgc):
    """One member of a live upstream group moves to kgc first: it gets nothing while the
    other two consume at Kafka; when they move too, the group forms on kgc at their final
    offsets. Records are produced only while membership is steady, so every record is
    consumed exactly once overall whatever rebalances happen."""
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("rolling")
    mover_library, *rest_libraries = LIBRARIES
    upstream = settled_members(kafka.bootstrap, group, topic, LIBRARIES)
    produce_sequenced(kafka.bootstrap, topic, PARTITIONS, BEFORE)
    wait_consumed(upstream, PARTITIONS * BEFORE)
    for m in upstream:
        m.commit()

    upstream[0].close()
    staying = upstream[1:]
    mover = members(kgc.bootstrap, group, topic, [mover_library], first=3)
    try:
        wait_until(lambda: owns_all_partitions(staying), TIMEOUT_S, lambda: [m.assignment for m in staying], staying)
        produce_sequenced(kafka.bootstrap, topic, PARTITIONS, AFTER, first_sequence=BEFORE)
        wait_consumed(upstream, PARTITIONS * (BEFORE + AFTER))
        mover[0].check()
        assert mover[0].consumed == [] and mover[0].assignment == frozenset()
        commit_and_close(staying)

        moved = mover + members(kgc.bootstrap, group, topic, rest_libraries, first=4)
        wait_until(lambda: owns_all_partitions(moved), TIMEOUT_S, lambda: [m.assignment for m in moved], moved)
        produce_sequenced(kafka.bootstrap, topic, PARTITIONS, AFTER, first_sequence=BEFORE + AFTER)
        wait_consumed(moved, PARTITIONS * AFTER)
        commit_and_close(moved)
    finally:
        for m in mover + locals().get("moved", []):
            if m.running:
                m.close()
    assert_exactly_once(consumed(upstream) + consumed(moved), BEFORE + 2 * AFTER)
    assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), BEFORE + 2 * AFTER)


def test_upstream_unreachable_at_first_use_gives_retriable_errors_then_adopts(tmp_path):
    """A simple group's offsets live in Tansu; Tansu stops answering (SIGSTOP keeps its
    memory); kgc's first OffsetFetch of the group is refused with a retriable error, not
    answered empty; once Tansu answers again the group is adopted."""
    with TansuBroker() as broker:
        topic = create_topic(broker.bootstrap, PARTITIONS)
        group = new_name("simple")
        offsets = {p: 10 + p for p in range(PARTITIONS)}
        simple_commit(broker.bootstrap, group, topic, offsets)
        broker_port = free_port()
        with kgc_process("--upstream", broker.bootstrap, "--broker-port", f"{broker.node_id}={broker_port}",
                         log_path=str(tmp_path / "kgc.log")) as kgc_proc:
            wait_listening(broker_port)  # kgc has reached Tansu
            os.kill(broker.pid, signal.SIGSTOP)
            try:  # kgc's request to Tansu times out (10 s): the client hears a retriable error
                code, _ = offset_fetch(kgc_proc.port, group, topic)
                assert code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            outcome: list = []
            wait_until(lambda: outcome.append(offset_fetch(kgc_proc.port, group, topic)) or outcome[-1][0] == 0,
                       TIMEOUT_S, lambda: outcome[-1])
            assert outcome[-1] == (0, offsets)
        log_text = (tmp_path / "kgc.log").read_text()
        assert f"[group={group}] cannot adopt from upstream" in log_text
        assert f"[group={group}] adopted from upstream" in log_text


@pytest.mark.timeout(60)
async def test_v1_groups_says_which_offsets_were_adopted_and_which_committed_on_kgc_since(kafka, tmp_path):
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("origin")
    simple_commit(kafka.bootstrap, group, topic, {0: 3, 1: 4})
    config = ServerConfig(host="127.0.0.1", port=0, http_port=0, data_dir=str(tmp_path), upstream=((kafka.host, kafka.port),),
                          broker_ports=((kafka.node_id, free_port()),), group=TEST_GROUP_CONFIG)
    views = []
    for restart in range(2):   # and after a restart, from the log
        async with running_kgc(config) as app:
            await asyncio.wait_for(app.cluster.wait_reachable(), 10)
            if restart == 0:
                assert await asyncio.to_thread(offset_fetch, app.port, group, topic) == (
                    0, {0: 3, 1: 4, **{p: -1 for p in range(2, PARTITIONS)}})
                await asyncio.to_thread(simple_commit, f"127.0.0.1:{app.port}", group, topic, {0: 5})
            views.append(await get_json(app.http.port, f"/v1/groups/{group}"))
    for status, view in views:
        assert status == 200
        entries = view["offsets"][topic]
        assert (entries["0"]["offset"], entries["0"]["origin"]) == (5, {"source": "committed"})
        assert entries["1"]["offset"] == 4
        assert {k: v for k, v in entries["1"]["origin"].items() if k != "adopted_at_ms"} == {
            "source": "adopted", "adopted_from": "upstream"}


def test_bulk_import_adopts_named_groups_ahead_of_time_and_export_refuses_a_busy_group(kafka, kgc, tmp_path):
    """Groups listed by the upstream, or named in a file."""
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    idle, busy = new_name("import"), new_name("busy")
    simple_commit(kafka.bootstrap, idle, topic, {0: 2, 1: 3})
    produce_sequenced(kafka.bootstrap, topic, PARTITIONS, 1)
    upstream = members(kafka.bootstrap, busy, topic, ["kafka-python"])
    groups_file = tmp_path / "groups.txt"
    groups_file.write_text(f"{idle}\n{busy}\n")
    common = ("--upstream", kafka.bootstrap, "--bootstrap-server", kgc.bootstrap, "--groups-file", str(groups_file))
    try:
        wait_until(lambda: upstream[0].assignment, TIMEOUT_S, lambda: "no assignment at Kafka", upstream)
        # Unnamed: every group Kafka's ListGroups lists, the live one too (Tansu's leaves out a
        # live group that has committed nothing yet); named in a file, the same two.
        listed = kgc_command("import", "--upstream", kafka.bootstrap, "--bootstrap-server", kgc.bootstrap)
        assert f"{idle}: would adopt" in listed and f"{busy}: would adopt 'consumer' group" in listed
        dry = kgc_command("import", *common)
        assert f"{idle}: would adopt simple group in state Empty, 2 committed offset(s): {topic}-0=2 {topic}-1=3" in dry
        assert f"{busy}: would adopt 'consumer' group" in dry and "has live members upstream" in dry
        assert idle not in group_ids(kgc.bootstrap)

        applied = kgc_command("import", *common, "--apply", expect_status=1)
        assert f"{idle}: adopted; kgc holds simple group in state Empty, 2 committed offset(s)" in applied
        assert f"{busy}: not adopted: " in applied
        listed = group_ids(kgc.bootstrap)
        assert idle in listed and busy not in listed
    finally:
        upstream[0].close()

    on_kgc = members(kgc.bootstrap, idle, topic, ["kafka-python"], first=1)
    try:
        wait_until(lambda: on_kgc[0].assignment, TIMEOUT_S, lambda: "no assignment at kgc", on_kgc)
        refused = kgc_command("export", "--upstream", kafka.bootstrap, "--bootstrap-server", kgc.bootstrap,
                              "--group", idle, "--apply", expect_status=1)
        assert f"{idle}: refused, it has 1 member(s) on kgc (stop them, or --force)" in refused
    finally:
        on_kgc[0].close()
    assert committed_offsets(kafka.bootstrap, idle) == {0: 2, 1: 3}


def kafkajs_phase(node: str, bootstrap: str, topic: str, group: str, first: int) -> subprocess.Popen:
    """tests/e2e/js/cutover.mjs: three kafkajs consumers form `group`, then AFTER records per
    partition from sequence `first` are produced and consumed; `kafkajs_report` reads it."""
    return subprocess.Popen([node, "cutover.mjs", bootstrap, topic, group, str(PARTITIONS), str(first), str(AFTER)],
                            cwd=JS_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kafkajs_report(run: subprocess.Popen) -> tuple[float, list[Consumed]]:
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    return report["formedAtMs"], [Consumed(r["partition"], r["offset"], r["value"].encode())
                                  for r in report["consumed"]]


def test_kafkajs_group_resumes_on_kgc_at_upstream_offsets_and_back_on_kafka_after_export(node, kafka, kgc):
    """Three kafkajs consumers on Kafka's coordinator, then the same group through kgc, then
    (after kgc export) on Kafka again."""
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("adopt-js")
    _, upstream = kafkajs_report(kafkajs_phase(node, kafka.bootstrap, topic, group, 0))
    assert committed_offsets(kafka.bootstrap, group) == dict.fromkeys(range(PARTITIONS), AFTER)
    _, on_kgc = kafkajs_report(kafkajs_phase(node, kgc.bootstrap, topic, group, AFTER))
    assert_exactly_once(upstream + on_kgc, 2 * AFTER)
    assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), 2 * AFTER)

    # The way back: kgc export, then the same kafkajs consumers at Kafka resume at kgc's offsets.
    kgc_command("export", "--upstream", kafka.bootstrap, "--bootstrap-server", kgc.bootstrap, "--group", group,
                "--apply")
    assert committed_offsets(kafka.bootstrap, group) == dict.fromkeys(range(PARTITIONS), 2 * AFTER)
    _, back = kafkajs_report(kafkajs_phase(node, kafka.bootstrap, topic, group, 2 * AFTER))
    assert_exactly_once(upstream + on_kgc + back, 3 * AFTER)
    assert committed_offsets(kafka.bootstrap, group) == dict.fromkeys(range(PARTITIONS), 3 * AFTER)


def test_kafkajs_members_wait_on_kgc_while_the_group_lives_upstream(node, kafka, kgc):
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("waiting-js")
    produce_sequenced(kafka.bootstrap, topic, PARTITIONS, BEFORE)
    upstream = members(kafka.bootstrap, group, topic, ["kafka-python"])
    try:
        wait_consumed(upstream, PARTITIONS * BEFORE)
        upstream[0].commit()
        waiting = kafkajs_phase(node, kgc.bootstrap, topic, group, BEFORE)
        time.sleep(WAITING_S)
        assert waiting.poll() is None, waiting.communicate()[1][-3000:]   # still retrying, not failed
        upstream_left_ms = time.time() * 1000
    finally:
        upstream[0].close()
    formed_ms, on_kgc = kafkajs_report(waiting)
    assert formed_ms >= upstream_left_ms
    assert_exactly_once(consumed(upstream) + on_kgc, BEFORE + AFTER)


def test_members_of_every_library_wait_on_kgc_while_the_group_lives_upstream(kafka, kgc):
    """COORDINATOR_LOAD_IN_PROGRESS while the group has a member at Kafka: each library
    retries its JoinGroup, holds nothing, fails nothing, and joins once that member left."""
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("waiting")
    produce_sequenced(kafka.bootstrap, topic, PARTITIONS, BEFORE)
    upstream = members(kafka.bootstrap, group, topic, ["kafka-python"])
    wait_consumed(upstream, PARTITIONS * BEFORE)
    upstream[0].commit()
    waiting = members(kgc.bootstrap, group, topic, LIBRARIES, first=1)
    try:
        time.sleep(WAITING_S)
        for m in waiting:
            m.check()
            assert (m.assignment, m.consumed) == (frozenset(), []), m.name
        upstream[0].close()
        wait_until(lambda: owns_all_partitions(waiting), TIMEOUT_S, lambda: [m.assignment for m in waiting], waiting)
        produce_sequenced(kafka.bootstrap, topic, PARTITIONS, AFTER, first_sequence=BEFORE)
        wait_consumed(waiting, PARTITIONS * AFTER)
        commit_and_close(waiting)
    finally:
        for m in upstream + waiting:
            if m.running:
                m.close()
    assert_exactly_once(consumed(upstream) + consumed(waiting), BEFORE + AFTER)


def test_a_kip848_member_waits_on_kgc_while_the_consumer_group_lives_at_kafka(kafka, kgc):
    """A KIP-848 group live on Kafka's coordinator is one DescribeGroups calls Dead: kgc must see
    its members with ConsumerGroupDescribe and give a member at kgc nothing while they live,
    or both would consume the same partitions; once they left, the group moves to kgc at its
    committed offsets."""
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("waiting-848")
    upstream = settled_members(kafka.bootstrap, group, topic, [CONSUMER_PROTOCOL])
    waiting = []
    try:
        produce_sequenced(kafka.bootstrap, topic, PARTITIONS, BEFORE)
        wait_consumed(upstream, PARTITIONS * BEFORE)
        upstream[0].commit()
        waiting = members(kgc.bootstrap, group, topic, [CONSUMER_PROTOCOL], first=1)
        time.sleep(WAITING_S)
        produce_sequenced(kafka.bootstrap, topic, PARTITIONS, AFTER, first_sequence=BEFORE)
        wait_consumed(upstream, PARTITIONS * (BEFORE + AFTER))
        upstream[0].commit()
        time.sleep(WAITING_S)
        waiting[0].check()
        assert (waiting[0].assignment, waiting[0].consumed) == (frozenset(), [])
        upstream[0].close()
        wait_until(lambda: owns_all_partitions(waiting), TIMEOUT_S, lambda: str(waiting[0].assignment), waiting)
        produce_sequenced(kafka.bootstrap, topic, PARTITIONS, AFTER, first_sequence=BEFORE + AFTER)
        wait_consumed(waiting, PARTITIONS * AFTER)
        waiting[0].commit()
    finally:
        for m in upstream + waiting:
            if m.running:
                m.close()
    assert_exactly_once(consumed(upstream) + consumed(waiting), BEFORE + 2 * AFTER)
    assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), BEFORE + 2 * AFTER)


async def _leader_after_leaves(port: int, leader_leaves_first: bool) -> tuple[str, str, int]:
    """Two raw members form a group on Tansu and leave; a third joins. Returns the departed
    leader's id, the leader the third member is told of, and its SyncGroup's error code."""
    group = new_name("leader")
    formed = [RawMember(await WireClient.open(port, name), group, session_timeout_ms=2000) for name in "ab"]
    await asyncio.gather(*(m.join(15) for m in formed))
    leader = next(m for m in formed if m.member_id == m.leader)
    follower = next(m for m in formed if m is not leader)
    assert (await leader.sync([(m.member_id, b"x") for m in formed])).error_code == ErrorCode.NONE
    assert (await follower.sync()).error_code == ErrorCode.NONE
    for m in (leader, follower) if leader_leaves_first else (follower, leader):
        left = await m.client.call(leave_request(3, group, [(m.member_id, None)]))
        assert left.members[0].error_code == ErrorCode.NONE
    newcomer = RawMember(await WireClient.open(port, "c"), group, session_timeout_ms=2000)
    assert (await newcomer.join(15)).error_code == ErrorCode.NONE
    synced = await newcomer.sync([(newcomer.member_id, b"x")] if newcomer.leader == newcomer.member_id else ())
    for m in (*formed, newcomer):
        m.client.close()
    return leader.member_id, newcomer.leader, synced.error_code


@pytest.mark.timeout(60)
async def test_tansu_keeps_naming_a_leader_that_left_a_rebalancing_group(tansu):
    """The Tansu defect the tests above work around by stopping consumers on Tansu one at a
    time (docs/migrating.md): the group forgets its leader when the leader leaves a
    settled group, not when it leaves after another member's leave started a rebalance; a
    newcomer is then told of the departed leader and its SyncGroup never succeeds. If this
    test fails, Tansu was fixed and the workaround can go."""
    departed, named, code = await _leader_after_leaves(tansu.port, leader_leaves_first=True)
    assert named != departed and code == ErrorCode.NONE
    departed, named, code = await _leader_after_leaves(tansu.port, leader_leaves_first=False)
    assert (named, code) == (departed, ErrorCode.REBALANCE_IN_PROGRESS)
