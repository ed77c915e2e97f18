"""A consumer group's target assignment (Kafka's `TargetAssignmentBuilder`): what the
server-side assignor is given, and the records that store what it decided."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from coordinator.group.consumer.assignors import AssignmentMember
from coordinator.group.consumer.group import (
    EMPTY_ASSIGNMENT,
    Assignment,
    ConsumerGroupMember,
    to_topic_partitions,
)
from coordinator.group.topics import TopicImage
from coordinator.records import (
    CoordinatorRecord,
    new_consumer_group_target_assignment_epoch_record,
    new_consumer_group_target_assignment_record,
)


def assignment_spec(members: Iterable[ConsumerGroupMember], image: TopicImage,
                    subscribed: Callable[[ConsumerGroupMember], frozenset[str]]
                    ) -> tuple[list[AssignmentMember], dict]:
    """The assignor's input: each member with the ids of the topics it subscribes to that
    the cluster has, and every topic's partition count."""
    partitions = {t.topic_id: t.partitions for t in image.by_id.values()}
    inputs = [AssignmentMember(m.member_id, m.instance_id,
                               frozenset(image.by_name[n].topic_id for n in subscribed(m) if n in image.by_name))
              for m in members]
    return inputs, partitions


def target_assignment_records(group_id: str, previous: dict[str, Assignment], targets: dict[str, Assignment],
                              epoch: int, now_ms: int) -> list[CoordinatorRecord]:
    """A record for every member whose target is new or changed, then the assignment epoch
    and when it was computed (`now_ms`)."""
    records = [target_record(group_id, mid, targets[mid]) for mid in sorted(targets)
               if targets[mid] != previous.get(mid, EMPTY_ASSIGNMENT) or mid not in previous]
    records.append(new_consumer_group_target_assignment_epoch_record(group_id, epoch, now_ms))
    return records


def target_record(group_id: str, member_id: str, assignment: Assignment) -> CoordinatorRecord:
    return new_consumer_group_target_assignment_record(group_id, member_id, to_topic_partitions(assignment))
