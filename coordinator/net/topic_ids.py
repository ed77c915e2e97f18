"""OffsetCommit and OffsetFetch v10, TxnOffsetCommit v6: topics named by id, resolved to
names at the edge.

From v10 (KIP-848; TxnOffsetCommit from v6, KIP-1319) these APIs name topics by the
cluster's topic id instead of by name.
Offsets stay keyed by topic name, in the records as in Kafka (`OffsetCommitKey`), so, as
Kafka's `KafkaApis` does before its coordinator sees the request, kgc resolves every id
against the upstream's topics (`TopicImage`, the same the KIP-848 assignor uses) before
authorization (ACLs name topics) and before the service:

- OffsetCommit and TxnOffsetCommit: a topic whose id the upstream does not know is answered UNKNOWN_TOPIC_ID
  for each of its partitions and taken out of the request; when none is left the request
  is answered here, without touching its group.
- OffsetFetch, topics asked for: an unknown id is answered UNKNOWN_TOPIC_ID for each
  partition asked (offset -1), unless the group itself is refused (its error alone).
- OffsetFetch, all topics: topics the upstream does not know (deleted since the commit)
  are left out, since they cannot be named by id.
- The answer names every topic by the id it was asked by (all topics: by the upstream's id).

An id unknown to kgc may only be too new for it: kgc asks the upstream again at once, and
the error is retriable for the client. Until kgc has read the upstream's topics once (just
started), nothing is known yet, and the request is answered COORDINATOR_LOAD_IN_PROGRESS,
which clients retry, as the KIP-848 heartbeats are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.api_key import ApiKey

from coordinator.group.topics import TopicImage
from coordinator.net.authorization import Guarded, without_topics
from protocol.answers.offsets import offset_fetch_topic_error
from protocol.api_keys import NEVER_VERSION
from protocol.error_responses import error_response
from protocol.errors import ErrorCode

# The first version of each API that names topics by id.
TOPIC_IDS_SINCE = {ApiKey.OffsetCommit: 10, ApiKey.OffsetFetch: 10, ApiKey.TxnOffsetCommit: 6}
_UNKNOWN_TOPIC_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)


class TopicIds:
    """Resolves v10 requests against `image()`; `unknown()` is told of an id it lacks.

    Two steps, with authorization between them as in Kafka (the group first, then each
    named topic): `name` gives every topic whose id is known its name (an unknown one keeps
    the empty name, which no real topic has, and ACLs skip it); `resolve` then answers the
    unknown ones."""

    def __init__(self, image: Callable[[], TopicImage], unknown: Callable[[], None] = lambda: None):
        self._image = image
        self._unknown = unknown

    def name(self, api_key: int, version: int, request: Any) -> None:
        if version < TOPIC_IDS_SINCE.get(api_key, NEVER_VERSION):
            return
        by_id = self._image().by_id
        if api_key in (ApiKey.OffsetCommit, ApiKey.TxnOffsetCommit):
            holders = [request.topics]
        elif api_key == ApiKey.OffsetFetch:
            holders = [g.topics for g in request.groups if g.topics is not None]
        else:
            return
        for topics in holders:
            for topic in topics:
                meta = by_id.get(topic.topic_id)
                if meta is not None:
                    topic.name = meta.name

    def resolve(self, api_key: int, version: int, request: Any) -> Guarded:
        """The request without the topics `name` could not name, and how to finish its
        answer; or the whole answer when nothing is left to ask."""
        if version < TOPIC_IDS_SINCE.get(api_key, NEVER_VERSION):
            return Guarded(request)
        image = self._image()
        if image.version == 0:
            return Guarded(refusal=error_response(api_key, version, request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        if api_key in (ApiKey.OffsetCommit, ApiKey.TxnOffsetCommit):
            guarded, unknown = _commit(api_key, version, request)
        else:
            guarded, unknown = _fetch(version, request, image)
        if unknown:
            self._unknown()
        return guarded


def _named(topics: list) -> tuple[list, list]:
    """(the topics `TopicIds.name` named, the others)."""
    known: list = []
    unknown: list = []
    for topic in topics:
        (known if topic.name else unknown).append(topic)
    return known, unknown


def _commit(api_key: int, version: int, request: Any) -> tuple[Guarded, bool]:
    known, unknown = _named(request.topics)
    if not unknown:
        return Guarded(request), False
    return without_topics(api_key, version, request, known, unknown, _UNKNOWN_TOPIC_ID), True


def _fetch(version: int, request: Any, image: TopicImage) -> tuple[Guarded, bool]:
    # Per group id, in request order: the entries for the ids nobody knows.
    refused: dict[str, list[list]] = {}
    any_unknown = False
    for group in request.groups:
        unknown: list = []
        if group.topics is not None:
            group.topics, unknown = _named(group.topics)
            any_unknown = any_unknown or bool(unknown)
        refused.setdefault(group.group_id, []).append([offset_fetch_topic_error(version, t, _UNKNOWN_TOPIC_ID) for t in unknown])

    def finish(response: Any) -> Any:
        for group in response.groups:
            # Every topic answered was named from this image (a topic asked for) or is
            # named by it (all topics); one it does not know cannot be named by id.
            topics = []
            for topic in group.topics:
                meta = image.by_name.get(topic.name)
                if meta is not None:
                    topic.topic_id = meta.topic_id
                    topics.append(topic)
            queue = refused.get(group.group_id)
            unknown = queue.pop(0) if queue else []
            if group.error_code == ErrorCode.NONE:      # a refused group answers its error alone
                topics += unknown
            group.topics = topics
        return response
    return Guarded(request, finish), any_unknown
