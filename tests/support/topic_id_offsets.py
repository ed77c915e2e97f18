"""OffsetCommit and OffsetFetch requests at v10 (topics by id) or v9 (by name), and their
answers read back as dicts, for tests that send them over a socket."""

from __future__ import annotations

from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest


def commit(epoch: int, offsets, member_id: str = "a", version: int = 10, group_id: str = "g") -> OffsetCommitRequest:
    """`offsets`: {topic id (v10) or name: {partition: offset}}."""
    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    part_cls = topic_cls.OffsetCommitRequestPartition
    key = "topic_id" if version >= 10 else "name"
    return OffsetCommitRequest(
        version=version, group_id=group_id, generation_id_or_member_epoch=epoch, member_id=member_id,
        group_instance_id=None, topics=[topic_cls(**{key: topic}, partitions=[
            part_cls(partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
            for p, o in parts.items()]) for topic, parts in offsets.items()])


def fetch(epoch: int, topics, member_id: str | None = "a", version: int = 10, group_id: str = "g") -> OffsetFetchRequest:
    """`topics`: {topic id (v10) or name: [partitions]}, or None for all."""
    group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
    topic_cls = group_cls.OffsetFetchRequestTopics
    key = "topic_id" if version >= 10 else "name"
    asked = None if topics is None else [topic_cls(**{key: t}, partition_indexes=ps) for t, ps in topics.items()]
    return OffsetFetchRequest(version=version, groups=[
        group_cls(group_id=group_id, member_id=member_id, member_epoch=epoch, topics=asked)], require_stable=False)


def committed(response) -> dict:
    """{(topic id or name, partition): error} from an OffsetCommit answer."""
    return {(t.topic_id if response.API_VERSION >= 10 else t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


def fetched(response) -> dict:
    """{(topic id or name, partition): (offset, error)} from an OffsetFetch v8+ answer's one group."""
    group = response.groups[0]
    return {(t.topic_id if response.API_VERSION >= 10 else t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in group.topics for p in t.partitions}
