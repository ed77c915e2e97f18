"""ConsumerGroupDescribe's answer for one group (Kafka's `ConsumerGroup.asDescribedGroup`)."""

from __future__ import annotations

from coordinator.group.consumer.group import EMPTY_ASSIGNMENT, Assignment, ConsumerGroup, to_topic_partitions
from coordinator.group.topics import TopicImage
from protocol.consumer_group_messages import ConsumerGroupDescribeResponse
from protocol.errors import ErrorCode

_Described = ConsumerGroupDescribeResponse.DescribedGroup
_DescribedMember = _Described.Member
_CLASSIC_MEMBER_TYPE, _CONSUMER_MEMBER_TYPE = 0, 1


def describe_consumer_group(group: ConsumerGroup | None, group_id: str, version: int, image: TopicImage,
                            default_assignor: str):
    """Kafka's `ConsumerGroup.asDescribedGroup`; a member's assignment includes the
    partitions it is still revoking (KAFKA-20431). Topics the cluster no longer has are left out."""
    if group is None:
        return _Described(version=version, error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
                          error_message=f"Group {group_id} not found.", group_id=group_id, group_state="Dead",
                          group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                          authorized_operations=-2**31)

    def shown(assignment: Assignment):
        cls = _DescribedMember.Assignment
        return cls(version=version, topic_partitions=[
            cls.TopicPartitions(version=version, topic_id=topic_id, topic_name=image.by_id[topic_id].name,
                                partitions=list(partitions))
            for topic_id, partitions in to_topic_partitions(assignment) if topic_id in image.by_id])

    members = []
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        held = dict(m.assigned)
        for topic_id, partitions in m.pending_revocation.items():
            held[topic_id] = held.get(topic_id, frozenset()) | partitions
        members.append(_DescribedMember(
            version=version, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=shown(held), target_assignment=shown(group.target.get(m.member_id, EMPTY_ASSIGNMENT)),
            member_type=_CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else _CONSUMER_MEMBER_TYPE))
    return _Described(version=version, error_code=0, error_message=None, group_id=group_id, group_state=group.state,
                      group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                      assignor_name=group.preferred_assignor(group.members.values(), default_assignor),
                      members=members, authorized_operations=-2**31)
