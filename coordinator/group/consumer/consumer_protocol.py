"""The embedded consumer protocol (ConsumerProtocolSubscription / ConsumerProtocolAssignment)
that classic members put in JoinGroup and get back from SyncGroup, read and written with
kafka-python's codecs, by topic id as a consumer group keeps assignments.

Kafka's coordinator reads these only where the two protocols meet: a classic member
inside a consumer group, and converting a group between the two.
"""

from __future__ import annotations

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from coordinator.group.consumer.group import Assignment, from_topic_partitions
from coordinator.group.subscription import MALFORMED_ERRORS, MalformedProtocol
from coordinator.group.topics import TopicImage


def owned_partitions(subscription: ConsumerProtocolSubscription, image: TopicImage) -> Assignment:
    """The partitions a member says it holds (v1+; none before), by topic id; topics the
    cluster does not have are left out."""
    owned = getattr(subscription, "owned_partitions", None) or ()
    return from_topic_partitions((image.by_name[tp.topic].topic_id, tp.partitions)
                                 for tp in owned if tp.topic in image.by_name)


def decode_assignment(data: bytes, image: TopicImage) -> tuple[Assignment, bool]:
    """(the partitions by topic id, whether it carries user data); empty bytes (a member
    that never synced) are no partitions."""
    if not data:
        return {}, False
    try:
        decoded = ConsumerProtocolAssignment.decode(data)
    except MALFORMED_ERRORS as exc:
        raise MalformedProtocol(f"malformed consumer protocol assignment: {exc}") from None
    assignment = from_topic_partitions((image.by_name[tp.topic].topic_id, tp.partitions)
                                       for tp in decoded.assigned_partitions if tp.topic in image.by_name)
    return assignment, bool(decoded.user_data)


def encode_assignment(assignment: Assignment, image: TopicImage, version: int) -> bytes:
    """Topics the cluster no longer has are left out."""
    tp = ConsumerProtocolAssignment.TopicPartition
    topics = sorted((image.by_id[topic_id].name, sorted(partitions))
                    for topic_id, partitions in assignment.items() if topic_id in image.by_id and partitions)
    return ConsumerProtocolAssignment(
        version=version, assigned_partitions=[tp(topic=name, partitions=ps) for name, ps in topics],
        user_data=None).encode(version=version)
