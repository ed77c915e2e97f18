"""How many partitions each topic has upstream, for the commits kgc checks against it
(net/committed_topics.py), as Kafka's `KafkaApis` checks an OffsetCommit against its
broker's metadata.

kgc's own read of the upstream's topics (`UpstreamCluster.topics`, every few seconds)
answers most questions at once. A name it lacks (a topic created since, or one that never
existed or was deleted) is asked of the upstream by name: Metadata with
`allow_auto_topic_creation` off, so that the question creates nothing. An answer is kept a
short while, and only while the read it was asked against is the latest: a missing name
`ABSENT_FOR_S` (a client committing a deleted topic's offsets costs one request a second,
not one per commit), a present one `PRESENT_FOR_S` (the next read, which knows it, comes
sooner). One question per name is in flight at a time; others asking the same wait for it.

A name the upstream does not answer plainly is left out of the answer: kgc cannot tell. That
is a topic kgc's own user may not describe (TOPIC_AUTHORIZATION_FAILED), or any answer while
the upstream is unreachable or too old to ask without creating topics (Metadata below v4).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamUnavailable
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ABSENT_FOR_S = 1.0
PRESENT_FOR_S = 5.0
MAX_ANSWERS = 10_000        # names remembered at once (a client may name any number)


class TopicPartitions:
    def __init__(self, cluster: UpstreamCluster, clock: Callable[[], float] = time.monotonic):
        self._cluster = cluster
        self._clock = clock
        # name -> (partitions, 0 when it does not exist; kept until; the read it was asked against)
        self._answers: dict[str, tuple[int, float, int]] = {}
        self._asking: dict[str, asyncio.Future] = {}

    def known(self, name: str) -> tuple[int, bool] | None:
        """(the partitions kgc knows topic `name` has, 0 when it does not exist; whether the
        upstream said so by name just now), or None when kgc does not know the name."""
        image = self._cluster.topics
        answer = self._answers.get(name)
        if answer is not None:
            partitions, until, version = answer
            if until > self._clock() and version == image.version:
                return partitions, True
            del self._answers[name]
        meta = image.by_name.get(name)
        return None if meta is None else (meta.partitions, False)

    async def ask(self, names: Collection[str]) -> Mapping[str, int]:
        """The partitions of each of `names` as the upstream answers by name now (0: it
        does not have the topic); a name it does not answer plainly is left out."""
        asking = self._asking
        mine = [name for name in names if name not in asking]
        others = {asking[name] for name in names if name in asking}
        answers: dict[str, int] = {}
        if mine:
            question = asyncio.get_running_loop().create_future()
            for name in mine:
                asking[name] = question
            try:
                answers.update(await self._metadata(mine))
            finally:
                for name in mine:
                    del asking[name]
                question.set_result(dict(answers))
        for other in others:
            answers.update(await asyncio.shield(other))
        return {name: answers[name] for name in names if name in answers}

    async def _metadata(self, names: list[str]) -> dict[str, int]:
        image_version = self._cluster.topics.version
        try:
            topics = await self._cluster.topics_by_name(names)
        except (UpstreamUnavailable, TimeoutError) as exc:
            log.debug("cannot ask the upstream for topics %s: %s", names, exc)
            return {}
        found: dict[str, int] = {}
        for topic in topics:
            if topic.name not in names:
                continue
            if topic.error_code == ErrorCode.NONE:
                found[topic.name] = len(topic.partitions)
            elif topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                found[topic.name] = 0
        self._remember(found, image_version)
        return found

    def _remember(self, found: Mapping[str, int], image_version: int) -> None:
        now = self._clock()
        answers = self._answers
        if len(answers) + len(found) > MAX_ANSWERS:
            for name in [name for name, (_, until, _) in answers.items() if until <= now]:
                del answers[name]
            if len(answers) + len(found) > MAX_ANSWERS:
                answers.clear()
        for name, partitions in found.items():
            answers[name] = (partitions, now + (PRESENT_FOR_S if partitions else ABSENT_FOR_S), image_version)
