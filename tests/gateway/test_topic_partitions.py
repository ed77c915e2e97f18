"""`TopicPartitions`: what kgc knows of the upstream's topics for the commits it checks,
and how it asks by name (one question per name at a time, answers kept briefly, nothing
created, nothing told when the upstream cannot say)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest
from kafka.protocol.api_key import ApiKey

from coordinator.gateway import topic_partitions
from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.topic_partitions import ABSENT_FOR_S, PRESENT_FOR_S, TopicPartitions
from coordinator.gateway.upstream import UpstreamUnavailable
from coordinator.group.topics import NO_TOPICS, TopicImage, TopicMetadata
from protocol.errors import ErrorCode


class FakeCluster:
    """Answers Metadata by name from `upstream` (name -> partitions, or an error code)."""

    def __init__(self, upstream: dict, image: TopicImage = NO_TOPICS):
        self.upstream = upstream
        self.topics = image
        self.asked: list[list[str]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.unreachable = False

    async def topics_by_name(self, names):
        self.asked.append(list(names))
        await self.release.wait()
        if self.unreachable:
            raise UpstreamUnavailable("upstream unreachable")
        topics = []
        for name in names:
            known = self.upstream.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if isinstance(known, ErrorCode):
                topics.append(SimpleNamespace(name=name, error_code=int(known), partitions=[]))
            else:
                topics.append(SimpleNamespace(name=name, error_code=0, partitions=[object()] * known))
        return topics


def image(version: int, **topics: int) -> TopicImage:
    return TopicImage.of(version, (TopicMetadata(uuid.uuid4(), name, n) for name, n in topics.items()))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_what_kgc_has_read_is_known_at_once_and_not_asked():
    cluster = FakeCluster({}, image(3, orders=4))
    partitions = TopicPartitions(cluster)
    assert partitions.known("orders") == (4, False)
    assert partitions.known("payments") is None
    assert cluster.asked == []


async def test_an_answer_by_name_is_kept_briefly_and_only_while_the_read_is_the_latest():
    clock = Clock()
    cluster = FakeCluster({"fresh": 2}, image(3))
    partitions = TopicPartitions(cluster, clock)
    assert await partitions.ask(["fresh", "gone"]) == {"fresh": 2, "gone": 0}
    assert cluster.asked == [["fresh", "gone"]]
    assert partitions.known("fresh") == (2, True)
    assert partitions.known("gone") == (0, True)
    clock.now += ABSENT_FOR_S
    assert partitions.known("gone") is None                       # asked again next time
    assert partitions.known("fresh") == (2, True)
    clock.now += PRESENT_FOR_S
    assert partitions.known("fresh") is None
    await partitions.ask(["fresh"])
    cluster.topics = image(4, fresh=5)                             # a newer read knows better
    assert partitions.known("fresh") == (5, False)


async def test_one_question_per_name_at_a_time():
    cluster = FakeCluster({"a": 1, "b": 2})
    cluster.release.clear()
    partitions = TopicPartitions(cluster)
    first = asyncio.ensure_future(partitions.ask(["a"]))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(partitions.ask(["a", "b"]))
    await asyncio.sleep(0)
    cluster.release.set()
    assert await first == {"a": 1}
    assert await second == {"a": 1, "b": 2}
    assert cluster.asked == [["a"], ["b"]]


@pytest.mark.parametrize("why", ["unreachable", "no access"])
async def test_what_the_upstream_does_not_answer_plainly_is_left_out(why):
    cluster = FakeCluster({"secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
    cluster.unreachable = why == "unreachable"
    partitions = TopicPartitions(cluster)
    assert await partitions.ask(["secret"]) == {}
    assert partitions.known("secret") is None


async def test_an_upstream_that_would_create_the_topics_asked_for_is_not_asked():
    # Metadata below v4 has no allow_auto_topic_creation: a question could create the topic.
    cluster = UpstreamCluster([("127.0.0.1", 9)])
    cluster._api_versions = {ApiKey.Metadata: (0, 3)}
    with pytest.raises(UpstreamUnavailable, match="would create topics"):
        await cluster.topics_by_name(["orders"])


async def test_the_answers_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(topic_partitions, "MAX_ANSWERS", 10)
    clock = Clock()
    partitions = TopicPartitions(FakeCluster({}), clock)
    for i in range(25):
        await partitions.ask([f"t{i}"])
        clock.now += 0.01
    assert len(partitions._answers) <= 10
    assert partitions.known("t24") == (0, True)
