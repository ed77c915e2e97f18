"""KIP-848 groups never show a member a topic it may not describe (Kafka 4, KAFKA-18813):
a regex subscription resolves to the matching topics the member may describe, and
ConsumerGroupDescribe of a group holding a topic the caller may not describe answers
TOPIC_AUTHORIZATION_FAILED for it, with no members.

carol owns the groups `carol-*` and may describe `payments-public` only; bob may read
the group `team-g` and the topic `payments-ledger`; alice may describe the groups
`team-g` and `carol-*` and no topic."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from coordinator.app import KgcApp
from coordinator.group.topics import TopicImage, TopicMetadata
from coordinator.settings import ServerConfig
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from protocol.errors import ErrorCode
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.security import KafkaSocket, acl_file, allow, credentials_file

PASSWORDS = {"alice": "a-pw", "bob": "b-pw", "carol": "c-pw"}
ACLS = (allow("User:carol", "all", "group", "carol-", "prefixed"),
        allow("User:carol", "describe", "topic", "payments-public"),
        allow("User:bob", "read", "group", "team-g"), allow("User:bob", "read", "topic", "payments-ledger"),
        allow("User:alice", "describe", "group", "team-g"), allow("User:alice", "describe", "group", "carol-", "prefixed"))
TOPICS = {name: uuid.uuid5(uuid.NAMESPACE_URL, name) for name in ("payments-ledger", "payments-public", "other")}
IMAGE = TopicImage.of(1, [TopicMetadata(topic_id, name, 2) for name, topic_id in TOPICS.items()])
NAMES = {topic_id: name for name, topic_id in TOPICS.items()}


@contextlib.asynccontextmanager
async def acl_kgc(tmp_path, monkeypatch):
    monkeypatch.setattr(KgcApp, "_topics", lambda self: IMAGE)
    config = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, authorizer="file",
                          acl_file=acl_file(tmp_path / "acls.toml", *ACLS), security_protocol="sasl_plaintext",
                          sasl_failure_delay_ms=0,
                          sasl_credentials_file=credentials_file(tmp_path / "users.toml", PASSWORDS))
    async with running_kgc(config) as app:
        yield app


def login(port: int, user: str) -> KafkaSocket:
    s = KafkaSocket(port)
    assert s.login_plain(user, PASSWORDS[user]).error_code == ErrorCode.NONE
    return s


def join(group: str, member: str, *, names: list[str] | None = None, regex: str | None = None):
    return ConsumerGroupHeartbeatRequest[1](
        group_id=group, member_id=member, member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30_000, subscribed_topic_names=names, subscribed_topic_regex=regex,
        server_assignor=None, topic_partitions=[])


def assigned(answer) -> set[str]:
    return {NAMES[tp.topic_id] for tp in answer.assignment.topic_partitions}


def describe(group: str) -> ConsumerGroupDescribeRequest:
    return ConsumerGroupDescribeRequest[1](group_ids=[group], include_authorized_operations=False)


async def test_a_regex_subscription_is_assigned_only_topics_the_member_may_describe(tmp_path, monkeypatch):
    async with acl_kgc(tmp_path, monkeypatch) as app:
        def scenario():
            with login(app.port, "carol") as carol:
                joined = carol.call(join("carol-cg", "carol-1", regex="payments-.*"))
                assert joined.error_code == ErrorCode.NONE, joined
                assert assigned(joined) == {"payments-public"}          # not payments-ledger
                [group] = carol.call(describe("carol-cg")).groups
                assert group.error_code == ErrorCode.NONE
                [member] = group.members
                seen = {tp.topic_name for a in (member.assignment, member.target_assignment)
                        for tp in a.topic_partitions}
                assert seen == {"payments-public"}

        await asyncio.to_thread(scenario)


async def test_describe_hides_a_group_holding_a_topic_the_caller_may_not_describe(tmp_path, monkeypatch):
    async with acl_kgc(tmp_path, monkeypatch) as app:
        def scenario():
            with login(app.port, "bob") as bob, login(app.port, "alice") as alice:
                joined = bob.call(join("team-g", "bob-1", names=["payments-ledger"]))
                assert assigned(joined) == {"payments-ledger"}
                [mine] = bob.call(describe("team-g")).groups        # bob may see his topic
                assert (mine.error_code, [m.member_id for m in mine.members]) == (ErrorCode.NONE, ["bob-1"])
                [hidden] = alice.call(describe("team-g")).groups    # alice may see the group, not the topic
                assert (hidden.group_id, hidden.error_code, hidden.members, hidden.error_message) == (
                    "team-g", ErrorCode.TOPIC_AUTHORIZATION_FAILED, [],
                    "The group has described topic(s) that the client is not authorized to describe.")
                [empty] = alice.call(describe("carol-none")).groups   # nothing to hide: answered as ever
                assert empty.error_code == ErrorCode.GROUP_ID_NOT_FOUND

        await asyncio.to_thread(scenario)
