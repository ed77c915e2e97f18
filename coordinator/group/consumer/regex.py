"""Regular-expression subscriptions (KIP-848 v1; Kafka's `GroupRegexManager` and
`TopicRegexResolver`): RE2 full-match against the upstream's topic names the member may
describe, resolved again only when the topics the group last checked against have changed."""

from __future__ import annotations

import functools
from collections.abc import Callable

import re2

from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.topics import TopicImage
from coordinator.records import (
    CoordinatorRecord,
    new_consumer_group_regular_expression_record,
    new_consumer_group_regular_expression_tombstone,
)
from protocol.errors import ApiError, ErrorCode


@functools.lru_cache(maxsize=1024)
def compile_regex(regex: str):
    """RE2 (Kafka uses RE2/J): the same syntax, linear time; `re2.error` when invalid."""
    return re2.compile(regex)


def resolve_regex(regex: str, image: TopicImage,
                  may_describe: Callable[[str], bool] | None = None) -> tuple[str, ...]:
    """The topics `regex` matches, less those `may_describe` refuses: Kafka 4 resolves a
    group's regexes with the rights of the member whose heartbeat asked for it
    (KAFKA-18813), so no member is assigned a topic it may not even see."""
    pattern = compile_regex(regex)
    return tuple(sorted(name for name in image.by_name
                        if pattern.fullmatch(name) and (may_describe is None or may_describe(name))))


def refresh_regexes(group: ConsumerGroup, in_use: set[str], image: TopicImage, image_changed: bool,
                    clock: Callable[[], int], records: list[CoordinatorRecord],
                    may_describe: Callable[[str], bool] | None = None
                    ) -> tuple[dict[str, tuple[str, ...]], bool]:
    """Step 2 of a heartbeat: appends a tombstone for each regex nobody uses any more and a
    record for each one whose topics changed (resolved with `may_describe`, the heartbeating
    member's DESCRIBE right); returns every used regex's topics and whether any of them
    changed (which moves the group epoch)."""
    regex_topics = {rx: v.topics for rx, v in group.regexes.items()}
    changed = False
    for rx in sorted(group.regexes.keys() - in_use):
        records.append(new_consumer_group_regular_expression_tombstone(group.group_id, rx))
        del regex_topics[rx]
    for rx in sorted(in_use):
        if rx in group.regexes and not image_changed:
            continue
        try:
            topics = resolve_regex(rx, image, may_describe)
        except re2.error as exc:
            raise ApiError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                           f"SubscribedTopicRegex `{rx}` is not a valid regular expression: {exc}.") from None
        if regex_topics.get(rx) != topics:
            changed = True
            regex_topics[rx] = topics
            records.append(new_consumer_group_regular_expression_record(group.group_id, rx, topics, image.version,
                                                                        clock()))
    return regex_topics, changed
