"""ConsumerGroupDescribe's answer for one group (Kafka's `ConsumerGroup.asDescribedGroup`)."""

from __future__ import annotations

from coordinator.group.consumer.group import EMPTY_ASSIGNMENT, Assignment, ConsumerGroup, to_topic_partitions
from coordinator.group.topics import TopicImage
from protocol.answers.consumer import (
    described_assignment,
    described_consumer_group,
    described_consumer_group_error,
    described_consumer_member,
)
from protocol.errors import ErrorCode


def describe_consumer_group(group: ConsumerGroup | None, group_id: str, version: int, image: TopicImage,
                            default_assignor: str):
    """Kafka's `ConsumerGroup.asDescribedGroup`; a member's assignment includes the
    partitions it is still revoking (KAFKA-20431). Topics the cluster no longer has are left out."""
    if group is None:
        return described_consumer_group_error(version, group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                              f"Group {group_id} not found.", state="Dead")

    def shown(assignment: Assignment):
        return described_assignment(version, (
            (topic_id, image.by_id[topic_id].name, partitions)
            for topic_id, partitions in to_topic_partitions(assignment) if topic_id in image.by_id))

    members = []
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        held = dict(m.assigned)
        for topic_id, partitions in m.pending_revocation.items():
            held[topic_id] = held.get(topic_id, frozenset()) | partitions
        members.append(described_consumer_member(
            version, m, shown(held), shown(group.target.get(m.member_id, EMPTY_ASSIGNMENT))))
    return described_consumer_group(version, group_id, group.state, group.group_epoch, group.assignment_epoch,
                                    group.preferred_assignor(group.members.values(), default_assignor), members)
