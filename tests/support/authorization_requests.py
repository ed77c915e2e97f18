"""The group requests the authorization tests send as a logged-in user (JoinGroup, OffsetCommit and
OffsetFetch at v5), and the error per topic of an OffsetCommit or OffsetFetch answer."""

from __future__ import annotations

from kafka.protocol.consumer.group import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest


def join(group: str, instance: str | None = None, member: str = "") -> JoinGroupRequest:
    return JoinGroupRequest[5](group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                               member_id=member, group_instance_id=instance, protocol_type="consumer",
                               protocols=[JoinGroupRequest[5].JoinGroupRequestProtocol(name="range", metadata=b"m")])


def commit(group: str, offsets: dict[str, int], generation: int = -1, member: str = "") -> OffsetCommitRequest:
    topic = OffsetCommitRequest[5].OffsetCommitRequestTopic
    return OffsetCommitRequest[5](group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                                  topics=[topic(name=name, partitions=[topic.OffsetCommitRequestPartition(
                                      partition_index=0, committed_offset=offset, committed_metadata="")])
                                      for name, offset in offsets.items()])


def fetch(group: str, topics: list[str] | None) -> OffsetFetchRequest:
    topic = OffsetFetchRequest[5].OffsetFetchRequestTopic
    return OffsetFetchRequest[5](group_id=group, topics=None if topics is None else [
        topic(name=name, partition_indexes=[0]) for name in topics])


def partition_errors(response) -> dict[str, int]:
    return {t.name: t.partitions[0].error_code for t in response.topics}
