"""KIP-848 consumer groups (librdkafka with `group.protocol=consumer`) through kgc in front
of Kafka: kgc coordinates the group, whatever the upstream's own KIP-848 support.

The coordinator assigns (uniform, server-side) and members reconcile incrementally. While
the group changes, the coordinator's own view (ConsumerGroupDescribe, which lists every
partition a member holds, the ones it is still revoking included) is sampled: no
partition ever has two owners. Records carry `partition:sequence`, so loss and
duplicates show.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections import Counter

import pytest
from kafka.protocol.consumer.group import OffsetCommitResponse, OffsetFetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from coordinator.probe import request_response
from protocol.consumer_group_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.errors import ErrorCode
from tests.support.admin import (
    committed_offsets,
    create_topic,
    new_name,
    produce_sequenced,
    sequences_by_partition,
)
from tests.support.clients import (
    CONSUMER_PROTOCOL,
    JAVA_CONSUMER_PROTOCOL,
    Consumed,
    Member,
    MemberSettings,
    wait_until,
)
from tests.support.consumer_group_describe import describe, held
from tests.support.kgc_http import get_json, scrape
from tests.support.topic_id_offsets import commit, committed, fetch, fetched

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 8
TIMEOUT_S = 45
def assert_one_owner(group) -> None:
    counts = Counter(p for partitions in held(group).values() for p in partitions)
    assert all(n == 1 for n in counts.values()), f"a partition with two owners: {held(group)}"


def settled(bootstrap: str, group_id: str, members: int) -> bool:
    group = describe(bootstrap, group_id)
    assert_one_owner(group)
    return (group.group_state == "Stable" and len(group.members) == members
            and sum(len(p) for p in held(group).values()) == PARTITIONS)


def consumer(bootstrap: str, group: str, topic: str, name: str, library: str = CONSUMER_PROTOCOL) -> Member:
    return Member(library, MemberSettings(bootstrap, group, topic, name)).start()


# The unmodified KIP-848 members: librdkafka's, the Java client's, and both in one group.
GROUPS_OF_FOUR = {
    "librdkafka": (CONSUMER_PROTOCOL,) * 4,
    "java": (JAVA_CONSUMER_PROTOCOL,) * 4,
    "mixed": (JAVA_CONSUMER_PROTOCOL, CONSUMER_PROTOCOL) * 2,
}


RETRIABLE_JOIN_ERRORS = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE)


def first_heartbeat(address: tuple[str, int], group: str, member_id: str, topic: str):
    """A member's joining heartbeat, sent again, as a client would, while the answer is
    COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE: on a new group kgc first asks
    the upstream's coordinator whether the group lives there, and a Kafka just started
    answers so until its own `__consumer_offsets` is ready."""
    answers = []

    def joined() -> bool:
        answers.append(request_response(address, ConsumerGroupHeartbeatRequest[1](
            group_id=group, member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30_000, subscribed_topic_names=[topic], subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[]), ConsumerGroupHeartbeatResponse, timeout_s=10))
        return answers[-1].error_code not in RETRIABLE_JOIN_ERRORS

    wait_until(joined, TIMEOUT_S, lambda: f"answers {[a.error_code for a in answers]}")
    return answers[-1]


def all_consumed(members: list[Member], extra: list[Consumed] = ()) -> list[Consumed]:
    return [r for m in members for r in m.consumed] + list(extra)


def test_one_member_consumes_commits_and_new_members_resume_with_either_protocol(kgc848):
    bootstrap = kgc848.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("kip848-one")
    produce_sequenced(bootstrap, topic, PARTITIONS, 5)
    first = consumer(bootstrap, group, topic, "one")
    wait_until(lambda: len(first.consumed) == PARTITIONS * 5, TIMEOUT_S, lambda: f"{len(first.consumed)} consumed",
               [first])
    assert first.assignment == frozenset(range(PARTITIONS))
    before = asyncio.run(scrape(kgc848.http_port))
    first.commit()
    # librdkafka commits with OffsetCommit v9 (its ceiling) although kgc offers v10.
    after = asyncio.run(scrape(kgc848.http_port))
    assert after.total("kgc_requests_total", api="OffsetCommit", version="9") > before.total(
        "kgc_requests_total", api="OffsetCommit", version="9")
    assert after.total("kgc_requests_total", api="OffsetCommit", version="10") == before.total(
        "kgc_requests_total", api="OffsetCommit", version="10")
    first.close()
    assert committed_offsets(bootstrap, group) == {p: 5 for p in range(PARTITIONS)}

    produce_sequenced(bootstrap, topic, PARTITIONS, 3, first_sequence=5)
    second = consumer(bootstrap, group, topic, "two")
    try:
        wait_until(lambda: len(second.consumed) >= PARTITIONS * 3, TIMEOUT_S,
                   lambda: f"{len(second.consumed)} consumed", [second])
        time.sleep(1)   # anything more would be a replay of committed records
        assert sequences_by_partition(second.consumed) == {p: [5, 6, 7] for p in range(PARTITIONS)}
        second.commit()
    finally:
        second.close()

    # The group is empty again: a classic member turns it into a classic group and
    # resumes at the offsets the KIP-848 members committed.
    produce_sequenced(bootstrap, topic, PARTITIONS, 2, first_sequence=8)
    classic = Member("confluent-kafka", MemberSettings(bootstrap, group, topic, "classic")).start()
    try:
        wait_until(lambda: len(classic.consumed) >= PARTITIONS * 2, TIMEOUT_S,
                   lambda: f"{len(classic.consumed)} consumed", [classic])
        time.sleep(1)
        assert sequences_by_partition(classic.consumed) == {p: [8, 9] for p in range(PARTITIONS)}
    finally:
        classic.close()


def test_http_and_metrics_show_consumer_groups(kgc848):
    bootstrap = kgc848.bootstrap
    topic, group_id = create_topic(bootstrap, PARTITIONS), new_name("kip848-ops")
    member = consumer(bootstrap, group_id, topic, "ops")
    try:
        wait_until(lambda: settled(bootstrap, group_id, 1), TIMEOUT_S,
                   lambda: str(held(describe(bootstrap, group_id))), [member])
        status, view = asyncio.run(get_json(kgc848.http_port, f"/v1/groups/{group_id}"))
        assert status == 200 and (view["type"], view["state"]) == ("consumer", "Stable")
        [shown] = view["members"]
        assert (shown["client_id"], shown["member_epoch"], shown["state"]) == ("ops", view["group_epoch"], "STABLE")
        assert shown["assignment"] == {topic: list(range(PARTITIONS))} == shown["target"]
        status, listing = asyncio.run(get_json(kgc848.http_port, "/v1/groups"))
        assert {"group_id": group_id, "type": "consumer", "members": 1}.items() <= next(
            g for g in listing["groups"] if g["group_id"] == group_id).items()
        time.sleep(1.5)   # one metrics sample
        samples = asyncio.run(scrape(kgc848.http_port))
        assert samples.total("kgc_consumer_groups", state="Stable") >= 1
        assert samples.total("kgc_consumer_group_members") >= 1
        assert samples.total("kgc_consumer_group_reconciliation_duration_seconds_count") >= 1
        assert samples.total("kgc_consumer_group_assignor_duration_seconds_count", assignor="uniform") >= 1
    finally:
        member.close()


def test_the_java_clients_member_commits_by_topic_id_and_a_new_member_resumes_there(kgc848):
    # given a KIP-848 member of the Java client (4.2+ names topics by id when it can)
    bootstrap = kgc848.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("kip848-java-v10")
    produce_sequenced(bootstrap, topic, PARTITIONS, 4)
    first = consumer(bootstrap, group, topic, "one", JAVA_CONSUMER_PROTOCOL)
    try:
        wait_until(lambda: len(first.consumed) == PARTITIONS * 4, TIMEOUT_S,
                   lambda: f"{len(first.consumed)} consumed", [first])
        before = asyncio.run(scrape(kgc848.http_port))
        # when it commits what it consumed
        first.commit()
        after = asyncio.run(scrape(kgc848.http_port))
    finally:
        first.close()
    # then the commit came as OffsetCommit v10, was answered without an error, and holds
    def delta(name: str, **labels) -> float:
        return after.total(name, **labels) - before.total(name, **labels)

    assert delta("kgc_requests_total", api="OffsetCommit", version="10") >= 1
    assert delta("kgc_response_errors_total", api="OffsetCommit") == delta(
        "kgc_response_errors_total", api="OffsetCommit", error="NONE") >= 1
    assert committed_offsets(bootstrap, group) == {p: 4 for p in range(PARTITIONS)}
    # and a new member of the group starts where it committed
    produce_sequenced(bootstrap, topic, PARTITIONS, 2, first_sequence=4)
    second = consumer(bootstrap, group, topic, "two", JAVA_CONSUMER_PROTOCOL)
    try:
        wait_until(lambda: len(second.consumed) >= PARTITIONS * 2, TIMEOUT_S,
                   lambda: f"{len(second.consumed)} consumed", [second])
        time.sleep(1)   # anything more would be a replay of committed records
        assert sequences_by_partition(second.consumed) == {p: [4, 5] for p in range(PARTITIONS)}
    finally:
        second.close()


@pytest.mark.parametrize("libraries", GROUPS_OF_FOUR.values(), ids=GROUPS_OF_FOUR.keys())
def test_a_group_of_three_grows_to_four_and_back_with_every_record_once(kgc848, libraries):
    bootstrap = kgc848.bootstrap
    topic, group_id = create_topic(bootstrap, PARTITIONS), new_name("kip848-scale")
    produce_sequenced(bootstrap, topic, PARTITIONS, 20)
    members = [consumer(bootstrap, group_id, topic, f"m{i}", library) for i, library in enumerate(libraries[:3])]
    fourth = None
    try:
        wait_until(lambda: settled(bootstrap, group_id, 3), TIMEOUT_S, lambda: str(held(describe(bootstrap, group_id))),
                   members)
        produce_sequenced(bootstrap, topic, PARTITIONS, 20, first_sequence=20)
        fourth = consumer(bootstrap, group_id, topic, "m3", libraries[3])
        wait_until(lambda: settled(bootstrap, group_id, 4), TIMEOUT_S,
                   lambda: str(held(describe(bootstrap, group_id))), [*members, fourth])
        assert all(len(p) == 2 for p in held(describe(bootstrap, group_id)).values())   # uniform: balanced
        produce_sequenced(bootstrap, topic, PARTITIONS, 20, first_sequence=40)
        wait_until(lambda: len(fourth.consumed) > 0, TIMEOUT_S, lambda: "the fourth member consumed nothing",
                   [*members, fourth])
        fourth.close()
        wait_until(lambda: settled(bootstrap, group_id, 3), TIMEOUT_S,
                   lambda: str(held(describe(bootstrap, group_id))), members)
        produce_sequenced(bootstrap, topic, PARTITIONS, 20, first_sequence=60)
        wait_until(lambda: len(all_consumed(members, fourth.consumed)) >= PARTITIONS * 80, TIMEOUT_S,
                   lambda: f"{len(all_consumed(members, fourth.consumed))} of {PARTITIONS * 80} consumed", members)
        time.sleep(1)
        by_partition = sequences_by_partition(all_consumed(members, fourth.consumed))
        assert {p: sorted(s) for p, s in by_partition.items()} == {p: list(range(80)) for p in range(PARTITIONS)}
    finally:
        for m in members:
            m.close()


@pytest.mark.parametrize("library", [CONSUMER_PROTOCOL, JAVA_CONSUMER_PROTOCOL])
def test_a_static_member_returning_gets_its_partitions_back_without_a_rebalance(kgc848, library):
    bootstrap = kgc848.bootstrap
    topic, group_id = create_topic(bootstrap, PARTITIONS), new_name("kip848-static")

    def static(name: str) -> Member:
        return Member(library, MemberSettings(bootstrap, group_id, topic, name, instance_id=name)).start()

    members = [static("s0"), static("s1")]
    try:
        wait_until(lambda: settled(bootstrap, group_id, 2), TIMEOUT_S,
                   lambda: str(held(describe(bootstrap, group_id))), members)
        group = describe(bootstrap, group_id)
        before = {m.instance_id: held(group)[m.member_id] for m in group.members}
        members.pop().close()      # a static member leaves for a while: it keeps its partitions
        away = describe(bootstrap, group_id)
        assert {m.instance_id: m.member_epoch for m in away.members}["s1"] == -2
        members.append(static("s1"))
        wait_until(lambda: settled(bootstrap, group_id, 2) and all(
            m.member_epoch > 0 for m in describe(bootstrap, group_id).members), TIMEOUT_S,
            lambda: str(held(describe(bootstrap, group_id))), members)
        back = describe(bootstrap, group_id)
        assert {m.instance_id: held(back)[m.member_id] for m in back.members} == before
        assert back.group_epoch == group.group_epoch      # no new epoch: nothing moved
    finally:
        for m in members:
            m.close()


def test_a_regex_subscription_picks_up_a_topic_created_later(kgc848):
    bootstrap = kgc848.bootstrap
    prefix = new_name("kip848-regex")
    first = create_topic(bootstrap, 2, name=f"{prefix}-a")
    produce_sequenced(bootstrap, first, 2, 5)
    member = consumer(bootstrap, new_name("kip848-regex"), f"^{prefix}-.*", "regex")
    try:
        wait_until(lambda: len(member.consumed) == 10, TIMEOUT_S, lambda: f"{len(member.consumed)} consumed", [member])
        later = create_topic(bootstrap, 3, name=f"{prefix}-b")
        produce_sequenced(bootstrap, later, 3, 5)
        wait_until(lambda: len(member.consumed) == 25, TIMEOUT_S, lambda: f"{len(member.consumed)} consumed", [member])
    finally:
        member.close()


def test_a_crashed_member_loses_its_partitions_after_its_session(kgc848, tmp_path):
    bootstrap = kgc848.bootstrap
    topic, group_id = create_topic(bootstrap, PARTITIONS), new_name("kip848-crash")
    produce_sequenced(bootstrap, topic, PARTITIONS, 10)
    output = tmp_path / "crashing.out"
    crashing = subprocess.Popen([sys.executable, "-m", "tests.e2e.consumer_protocol_process", bootstrap, group_id,
                                 topic, str(output)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    survivor = None
    try:
        survivor = consumer(bootstrap, group_id, topic, "survivor")
        wait_until(lambda: settled(bootstrap, group_id, 2), TIMEOUT_S,
                   lambda: str(held(describe(bootstrap, group_id))), [survivor])
        os.kill(crashing.pid, 9)
        crashing.wait(10)
        produce_sequenced(bootstrap, topic, PARTITIONS, 10, first_sequence=10)
        wait_until(lambda: settled(bootstrap, group_id, 1), TIMEOUT_S,
                   lambda: str(held(describe(bootstrap, group_id))), [survivor])
        wait_until(lambda: survivor.assignment == frozenset(range(PARTITIONS)), TIMEOUT_S,
                   lambda: f"the survivor holds {sorted(survivor.assignment)}", [survivor])
        crashed = [Consumed(int(line.split(b":")[0]), -1, line) for line in output.read_bytes().splitlines()]
        wait_until(lambda: {(r.partition, r.value) for r in all_consumed([survivor], crashed)}
                   >= {(p, b"%d:%d" % (p, s)) for p in range(PARTITIONS) for s in range(20)}, TIMEOUT_S,
                   lambda: "records lost after the crash", [survivor])
    finally:
        if crashing.poll() is None:
            crashing.kill()
        if survivor is not None:
            survivor.close()


@pytest.mark.parametrize("stop", ["kill", "stop"])
def test_members_continue_with_their_epochs_after_kgc_restarts_mid_reconciliation(kgc848, stop):
    """kill -9, or a graceful stop (SIGTERM), while a fourth member is being absorbed."""
    bootstrap = kgc848.bootstrap
    topic, group_id = create_topic(bootstrap, PARTITIONS), new_name("kip848-restart")
    produce_sequenced(bootstrap, topic, PARTITIONS, 10)
    members = [consumer(bootstrap, group_id, topic, f"m{i}") for i in range(3)]
    try:
        wait_until(lambda: settled(bootstrap, group_id, 3), TIMEOUT_S,
                   lambda: str(held(describe(bootstrap, group_id))), members)
        members.append(consumer(bootstrap, group_id, topic, "m3"))
        wait_until(lambda: len(describe(bootstrap, group_id).members) == 4, TIMEOUT_S, lambda: "no fourth member",
                   members)
        group = describe(bootstrap, group_id)
        before = {m.member_id: m.member_epoch for m in group.members}
        getattr(kgc848, stop)()
        kgc848.start()
        after = describe(bootstrap, group_id)
        # Loaded from the log: the same members, at the epochs they had (or further on: a
        # graceful stop still answers the heartbeats in flight), in the same group epoch.
        assert after.group_epoch == group.group_epoch
        assert {m.member_id for m in after.members} == set(before)
        assert all(m.member_epoch >= before[m.member_id] for m in after.members), (before, after)
        wait_until(lambda: settled(bootstrap, group_id, 4), TIMEOUT_S,
                   lambda: str(held(describe(bootstrap, group_id))), members)
        # Nobody was fenced on the way: a member lost would have started a new group epoch.
        settled_group = describe(bootstrap, group_id)
        assert set(held(settled_group)) == set(before) and settled_group.group_epoch == group.group_epoch
        produce_sequenced(bootstrap, topic, PARTITIONS, 10, first_sequence=10)
        wait_until(lambda: {(r.partition, r.value) for r in all_consumed(members)}
                   >= {(p, b"%d:%d" % (p, s)) for p in range(PARTITIONS) for s in range(20)}, TIMEOUT_S,
                   lambda: "records lost across the restart", members)
    finally:
        for m in members:
            with contextlib.suppress(Exception):
                m.close()


def test_offset_commit_and_fetch_v10_name_topics_by_kafkas_own_ids(kgc848):
    """No client library sends v10 yet (librdkafka stops at v9, kafka-python at v8): raw
    requests, by the id Kafka gave the topic, read back by name by a real admin client."""
    bootstrap = kgc848.bootstrap
    host, port = bootstrap.rsplit(":", 1)
    address = (host, int(port))
    topic, group = create_topic(bootstrap, 2), new_name("kip848-v10")
    metadata = request_response(address, MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(
        topic_id=None, name=topic)], allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        MetadataResponse)
    topic_id = metadata.topics[0].topic_id
    joined = first_heartbeat(address, group, "raw-member", topic)
    assert joined.error_code == 0

    def commit_v10(epoch: int) -> dict:
        return committed(request_response(address, commit(epoch, {topic_id: {0: 4, 1: 5}}, "raw-member",
                                                          group_id=group), OffsetCommitResponse))

    # kgc learns a new topic's id from its next Metadata read of Kafka (asked for at once).
    wait_until(lambda: commit_v10(joined.member_epoch) == {(topic_id, 0): 0, (topic_id, 1): 0}, TIMEOUT_S,
               lambda: f"commit v10 answered {commit_v10(joined.member_epoch)}")
    assert commit_v10(joined.member_epoch - 1) == {(topic_id, 0): 113, (topic_id, 1): 113}   # STALE_MEMBER_EPOCH
    answer = request_response(address, fetch(joined.member_epoch, {topic_id: [0, 1]}, "raw-member", group_id=group),
                              OffsetFetchResponse)
    assert fetched(answer) == {(topic_id, 0): (4, 0), (topic_id, 1): (5, 0)}
    assert committed_offsets(bootstrap, group) == {0: 4, 1: 5}      # by name, OffsetFetch v8


def test_a_member_subscribing_to_a_topic_created_a_moment_ago_is_assigned_in_its_first_heartbeat(kgc848):
    """Kafka's coordinator hears of a new topic from the controller at once; kgc reads the
    upstream's topics every few seconds, and a member that named a topic kgc had not seen
    yet got nothing in its first heartbeat and waited a whole heartbeat interval (5 s by
    default) for its partitions. kgc now asks the upstream again before answering."""
    bootstrap = kgc848.bootstrap
    host, port = bootstrap.rsplit(":", 1)
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("kip848-new-topic")
    joined = first_heartbeat((host, int(port)), group, "first-heartbeat", topic)
    assert joined.error_code == 0 and joined.member_epoch > 0
    assert joined.assignment is not None
    assert sorted(p for t in joined.assignment.topic_partitions for p in t.partitions) == list(range(PARTITIONS))
