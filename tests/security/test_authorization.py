"""Authorization of the group APIs kgc answers: each thing an outsider could do to another
team's group is refused with Kafka's error and changes nothing; topics are checked on
commits and fetches; ListGroups shows only what may be described; mTLS principals count.

alice may do anything with groups named `alice-*` and READ topic `alice-topic`; bob owns
`bob-*` and may READ every topic; `ops` may DESCRIBE the cluster. Standalone kgc: group
state needs no upstream."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import (
    LeaveGroupRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from coordinator.app import KgcApp
from coordinator.group.topics import TopicImage, TopicMetadata
from coordinator.settings import ServerConfig
from protocol.errors import ErrorCode
from tests.support import topic_id_offsets as by_id
from tests.support.authorization_requests import commit, fetch, join, partition_errors
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.security import KafkaSocket, TestPki, acl_file, allow, credentials_file

PASSWORDS = {"alice": "a-pw", "bob": "b-pw", "ops": "o-pw"}
DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
ACLS = (allow("User:alice", "all", "group", "alice-", "prefixed"), allow("User:alice", "read", "topic", "alice-topic"),
        allow("User:bob", "all", "group", "bob-", "prefixed"), allow("User:bob", "read", "topic", "*"),
        allow("User:ops", "describe", "cluster", "kafka-cluster"))


@contextlib.asynccontextmanager
async def guarded_kgc(tmp_path, **settings):
    acl_file(tmp_path / "acls.toml", *ACLS)
    base = dict(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, authorizer="file",
                acl_file=str(tmp_path / "acls.toml"))
    if "security_protocol" not in settings:
        base.update(security_protocol="sasl_plaintext", sasl_failure_delay_ms=0,
                    sasl_credentials_file=credentials_file(tmp_path / "users.toml", PASSWORDS))
    async with running_kgc(ServerConfig(**base, **settings)) as app:
        yield app


def login(port: int, user: str) -> KafkaSocket:
    s = KafkaSocket(port)
    assert s.login_scram(user, PASSWORDS[user]).error_code == ErrorCode.NONE
    return s


def bob_owns_a_stable_group(port: int) -> tuple[KafkaSocket, str]:
    """bob's static member `bob-1` in `bob-g`, stable, with offset 42 committed on bob-topic."""
    bob = login(port, "bob")
    joined = bob.call(join("bob-g", "bob-1"))
    assert joined.error_code == ErrorCode.NONE, joined
    member = joined.member_id
    sync = SyncGroupRequest[3](group_id="bob-g", generation_id=joined.generation_id, member_id=member,
                               group_instance_id="bob-1", assignments=[
                                   SyncGroupRequest[3].SyncGroupRequestAssignment(member_id=member,
                                                                                  assignment=b"bob's")])
    assert bob.call(sync).assignment == b"bob's"
    assert partition_errors(bob.call(commit("bob-g", {"bob-topic": 42}, joined.generation_id, member))) == {
        "bob-topic": ErrorCode.NONE}
    return bob, member


async def test_an_outsider_cannot_touch_another_teams_group(tmp_path):
    async with guarded_kgc(tmp_path) as app:
        def scenario():
            bob, member = bob_owns_a_stable_group(app.port)
            with bob, login(app.port, "alice") as alice:
                # Take over bob's static member and receive its assignment.
                assert alice.call(join("bob-g", "bob-1")).error_code == DENIED
                # Rewind bob's committed offsets, or delete them.
                assert partition_errors(alice.call(commit("bob-g", {"bob-topic": 0}))) == {"bob-topic": DENIED}
                delete_offsets = OffsetDeleteRequest[0](group_id="bob-g", topics=[
                    OffsetDeleteRequest[0].OffsetDeleteRequestTopic(name="bob-topic", partitions=[
                        OffsetDeleteRequest[0].OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                            partition_index=0)])])
                assert alice.call(delete_offsets).error_code == DENIED
                # Delete the group.
                deleted = alice.call(DeleteGroupsRequest[2](groups_names=["bob-g", "alice-none"]))
                assert {r.group_id: r.error_code for r in deleted.results} == {
                    "bob-g": DENIED, "alice-none": ErrorCode.GROUP_ID_NOT_FOUND}
                # Read members, client ids and hosts.
                [described] = alice.call(DescribeGroupsRequest[5](groups=["bob-g"],
                                                                  include_authorized_operations=True)).groups
                assert (described.error_code, described.members, described.group_state) == (DENIED, [], "")
                # Kick bob's member out with its (disclosed) member id.
                leave = LeaveGroupRequest[3](group_id="bob-g", members=[
                    LeaveGroupRequest[3].MemberIdentity(member_id=member, group_instance_id="bob-1")])
                assert alice.call(leave).error_code == DENIED
                # Find its coordinator, fetch its offsets.
                assert alice.call(FindCoordinatorRequest[3](key="bob-g", key_type=0)).error_code == DENIED
                batch = alice.call(FindCoordinatorRequest[4](key_type=0, coordinator_keys=["bob-g", "alice-g"]))
                assert {c.key: c.error_code for c in batch.coordinators} == {"bob-g": DENIED,
                                                                              "alice-g": ErrorCode.NONE}
                assert alice.call(fetch("bob-g", None)).error_code == DENIED
                # List every group: alice sees hers only.
                assert partition_errors(alice.call(commit("alice-g", {"alice-topic": 7}))) == {
                    "alice-topic": ErrorCode.NONE}
                listed = alice.call(ListGroupsRequest[4](states_filter=[]))
                assert [g.group_id for g in listed.groups] == ["alice-g"]

                # Nothing changed for bob.
                assert bob.call(fetch("bob-g", ["bob-topic"])).topics[0].partitions[0].committed_offset == 42
                [mine] = bob.call(DescribeGroupsRequest[5](groups=["bob-g"],
                                                           include_authorized_operations=True)).groups
                assert mine.group_state == "Stable" and [m.member_id for m in mine.members] == [member]
                assert sum(1 << op for op in mine.authorized_operations) == 3400
            with login(app.port, "ops") as ops:
                listed = ops.call(ListGroupsRequest[4](states_filter=[]))
                assert sorted(g.group_id for g in listed.groups) == ["alice-g", "bob-g"]

        await asyncio.to_thread(scenario)


async def test_topics_are_checked_on_commits_and_fetches(tmp_path):
    async with guarded_kgc(tmp_path) as app:
        def scenario():
            with login(app.port, "alice") as alice:
                committed = alice.call(commit("alice-g", {"alice-topic": 5, "payroll": 9}))
                assert partition_errors(committed) == {"alice-topic": ErrorCode.NONE,
                                                       "payroll": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
                asked = alice.call(fetch("alice-g", ["alice-topic", "payroll"]))
                assert {t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code)
                        for t in asked.topics} == {"alice-topic": (5, ErrorCode.NONE),
                                                   "payroll": (-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
                only_denied = alice.call(commit("alice-g", {"payroll": 1}))
                assert partition_errors(only_denied) == {"payroll": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            with login(app.port, "bob") as bob:
                # bob may read every topic: his commit to payroll in his own group lands...
                assert partition_errors(bob.call(commit("bob-g", {"payroll": 3}))) == {"payroll": ErrorCode.NONE}
            with login(app.port, "alice") as alice:
                # ...and alice never stored one: "all topics" leaves out what she may not describe.
                everything = alice.call(fetch("alice-g", None))
                assert [t.name for t in everything.topics] == ["alice-topic"]
                v8 = OffsetFetchRequest[8](require_stable=False, groups=[
                    OffsetFetchRequest[8].OffsetFetchRequestGroup(group_id=g, topics=None)
                    for g in ("alice-g", "bob-g")])
                groups = {g.group_id: g for g in alice.call(v8).groups}
                assert groups["bob-g"].error_code == DENIED and groups["bob-g"].topics == []
                assert [t.name for t in groups["alice-g"].topics] == ["alice-topic"]

        await asyncio.to_thread(scenario)


async def test_an_mtls_principal_is_authorized_by_its_mapped_name(tmp_path):
    pki = TestPki(tmp_path)
    async with guarded_kgc(tmp_path, security_protocol="ssl", tls_cert_file=pki.server_cert,
                           tls_key_file=pki.server_key, tls_client_ca_file=pki.ca_file, tls_client_auth="required",
                           ssl_principal_mapping_rules="RULE:^CN=([^,]+),.*$/$1/L,DEFAULT") as app:
        cert = pki.issue("alice", common_name="Alice", organization_unit="eng")

        def scenario():
            with KafkaSocket(app.port, context=pki.client_context(cert)) as alice:
                assert partition_errors(alice.call(commit("alice-g", {"alice-topic": 1}))) == {
                    "alice-topic": ErrorCode.NONE}
                assert partition_errors(alice.call(commit("bob-g", {"alice-topic": 1}))) == {"alice-topic": DENIED}

        await asyncio.to_thread(scenario)


@pytest.mark.parametrize("user, expected", [("alice", ErrorCode.NONE), ("bob", DENIED)])
async def test_join_is_allowed_to_the_owner_only(tmp_path, user, expected):
    async with guarded_kgc(tmp_path) as app:
        def scenario():
            with login(app.port, user) as s:
                return s.call(join("alice-solo", "solo-1")).error_code

        assert await asyncio.to_thread(scenario) == expected


async def test_kip848_groups_are_guarded_like_classic_ones(tmp_path):
    from protocol.consumer_group_messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest

    def heartbeat(group: str, member: str, epoch: int = 0, topics=("alice-topic",)):
        return ConsumerGroupHeartbeatRequest[1](
            group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30_000 if epoch == 0 else -1, subscribed_topic_names=list(topics) if epoch == 0 else None,
            subscribed_topic_regex=None, server_assignor=None, topic_partitions=[] if epoch == 0 else None)

    async with guarded_kgc(tmp_path) as app:
        def scenario():
            with login(app.port, "bob") as bob, login(app.port, "alice") as alice:
                assert bob.call(heartbeat("bob-cg", "bob-1", topics=("bob-topic",))).error_code == ErrorCode.NONE
                # alice can neither join bob's group, nor make bob's member leave, nor read it.
                assert alice.call(heartbeat("bob-cg", "alice-1")).error_code == DENIED
                assert alice.call(heartbeat("bob-cg", "bob-1", epoch=-1)).error_code == DENIED
                described = alice.call(ConsumerGroupDescribeRequest[1](group_ids=["bob-cg", "alice-cg"],
                                                                       include_authorized_operations=False))
                assert {g.group_id: (g.error_code, len(g.members)) for g in described.groups} == {
                    "bob-cg": (DENIED, 0), "alice-cg": (ErrorCode.GROUP_ID_NOT_FOUND, 0)}
                # Her own group, but subscribed to a topic she may not describe.
                assert alice.call(heartbeat("alice-cg", "alice-1", topics=("bob-topic",))).error_code == \
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED
                assert alice.call(heartbeat("alice-cg", "alice-1")).error_code == ErrorCode.NONE
                # bob's member is still there.
                [mine] = bob.call(ConsumerGroupDescribeRequest[1](group_ids=["bob-cg"],
                                                                  include_authorized_operations=True)).groups
                assert [m.member_id for m in mine.members] == ["bob-1"]
                assert mine.authorized_operations == 3400       # every group operation, as a bitfield

        await asyncio.to_thread(scenario)


async def test_topics_named_by_id_are_checked_by_the_name_the_id_has(tmp_path, monkeypatch):
    """OffsetCommit/OffsetFetch v10: the group is checked first (a denied group hides
    which ids exist), then each topic by its name; an unknown id is UNKNOWN_TOPIC_ID."""
    ids = {name: uuid.uuid5(uuid.NAMESPACE_URL, name) for name in ("alice-topic", "payroll", "nowhere")}
    image = TopicImage.of(1, [TopicMetadata(ids[n], n, 1) for n in ("alice-topic", "payroll")])
    monkeypatch.setattr(KgcApp, "_topics", lambda self: image)
    async with guarded_kgc(tmp_path) as app:
        def scenario():
            with login(app.port, "alice") as alice:
                asked = {ids[n]: {0: 5} for n in ids}
                assert by_id.committed(alice.call(by_id.commit(-1, asked, "", group_id="alice-g"))) == {
                    (ids["alice-topic"], 0): ErrorCode.NONE,
                    (ids["payroll"], 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    (ids["nowhere"], 0): ErrorCode.UNKNOWN_TOPIC_ID}
                assert set(by_id.committed(alice.call(by_id.commit(-1, asked, "", group_id="bob-g"))).values()) == {
                    DENIED}
                fetched = alice.call(by_id.fetch(-1, {i: [0] for i in ids.values()}, None, group_id="alice-g"))
                assert by_id.fetched(fetched) == {
                    (ids["alice-topic"], 0): (5, ErrorCode.NONE),
                    (ids["payroll"], 0): (-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    (ids["nowhere"], 0): (-1, ErrorCode.UNKNOWN_TOPIC_ID)}
                everything = alice.call(by_id.fetch(-1, None, None, group_id="alice-g"))
                assert by_id.fetched(everything) == {(ids["alice-topic"], 0): (5, ErrorCode.NONE)}

        await asyncio.to_thread(scenario)
