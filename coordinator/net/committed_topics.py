"""OffsetCommit and TxnOffsetCommit may only name topics and partitions the upstream has.

Kafka's `KafkaApis` checks both against its broker's metadata before its coordinator sees
them: every partition of a topic it does not have, and every partition past a topic's
count, is answered UNKNOWN_TOPIC_OR_PARTITION, and the rest is committed (nothing at all
when nothing is left). kgc does the same, after the ACLs, against the upstream's topics
(`gateway/topic_partitions.py`). Beyond matching Kafka's answer, this keeps a deleted
topic's offsets deleted: a consumer still committing them would otherwise write them back
after kgc deleted them with the topic (`service/deleted_topics.py`), and the topic, created
again under its name, would start from them.

Most commits name topics kgc has read and partitions within their count: they are checked
at once. A name kgc does not know, or a partition past the count of its last read, is asked
of the upstream first; the connection's later requests wait meanwhile (`net/dispatch.py`),
so that they are still served in order. A topic the upstream does not answer plainly
(kgc's own user may not describe it, or the upstream cannot be reached) is committed, as it
was before this check: kgc cannot tell.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from types import SimpleNamespace
from typing import Any

from kafka.protocol.api_key import ApiKey

from coordinator.net.authorization import Guarded, without_topics
from protocol.errors import ErrorCode

CHECKED_APIS = frozenset({int(ApiKey.OffsetCommit), int(ApiKey.TxnOffsetCommit)})
_UNKNOWN = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class CommittedTopics:
    """`known(name)`: (partitions, whether the upstream said so just now) or None;
    `ask(names)`: the upstream's partition counts, by name (0: no such topic)."""

    def __init__(self, known: Callable[[str], tuple[int, bool] | None],
                 ask: Callable[[Collection[str]], Awaitable[Mapping[str, int]]]):
        self._known = known
        self.ask = ask

    def to_ask(self, request: Any) -> list[str] | None:
        """The topics of `request` to ask the upstream about before it is checked; None
        when kgc knows every partition it names exists (nothing to check: the common case)."""
        names = []
        sure = True
        for topic in request.topics:
            known = self._known(topic.name)
            if known is None:
                names.append(topic.name)
                continue
            partitions, fresh = known
            if not all(0 <= p.partition_index < partitions for p in topic.partitions):
                sure = False
                if not fresh:
                    names.append(topic.name)        # the read may predate partitions added since
        return None if sure and not names else names

    def check(self, api_key: int, version: int, request: Any, asked: Mapping[str, int]) -> Guarded:
        """`request` without the partitions the upstream does not have, by `asked` or else
        what kgc knows; its answer refuses them."""
        kept, refused = [], []
        for topic in request.topics:
            partitions = asked.get(topic.name)
            if partitions is None:
                known = self._known(topic.name)
                if known is None:           # not answered plainly: kgc cannot tell
                    kept.append(topic)
                    continue
                partitions = known[0]
            missing = [p for p in topic.partitions if not 0 <= p.partition_index < partitions]
            if not missing:
                kept.append(topic)
                continue
            refused.append(SimpleNamespace(name=topic.name, topic_id=getattr(topic, "topic_id", None),
                                           partitions=missing))
            if len(missing) < len(topic.partitions):
                topic.partitions = [p for p in topic.partitions if 0 <= p.partition_index < partitions]
                kept.append(topic)
        if not refused:
            return Guarded(request)
        return without_topics(api_key, version, request, kept, refused, _UNKNOWN)
