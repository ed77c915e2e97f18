"""The upstream cluster's topics as consumer groups see them: ids, names, partition counts.

KIP-848 assigns partitions by topic id, so the ids must be the cluster's own (clients
look them up with Metadata by id). The gateway builds a `TopicImage` from the upstream's
Metadata answers; the group layer only reads it. `version` changes whenever the content
does, so a group re-checks its subscriptions only after a change. Version 0 means not
known yet (kgc just started and has not heard from the upstream): consumer groups wait,
rather than take "no topics" for the truth and revoke every partition.

`metadata_hash` is Kafka's KIP-1101 hash of a group's subscribed topics (XXH3-64 over
Kafka's little-endian byte stream), so a new group epoch follows a topic being created,
deleted, recreated or gaining partitions. kgc sees no replica racks, so they do not enter
the hash; a Kafka that loads kgc's log would at worst bump the epoch once more.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import xxhash

_TOPIC_HEAD = struct.Struct("<bqq")
_I32 = struct.Struct("<i")
_MAGIC = 0


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class TopicImage:
    version: int = 0
    by_name: Mapping[str, TopicMetadata] = field(default_factory=lambda: MappingProxyType({}))
    by_id: Mapping[uuid.UUID, TopicMetadata] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, version: int, topics: Iterable[TopicMetadata]) -> TopicImage:
        topics = list(topics)
        return cls(version, MappingProxyType({t.name: t for t in topics}),
                   MappingProxyType({t.topic_id: t for t in topics}))

    def same_topics(self, other: TopicImage) -> bool:
        return dict(self.by_name) == dict(other.by_name)


EMPTY_TOPIC_IMAGE = TopicImage()                  # not known yet
NO_TOPICS = TopicImage(version=1)                 # known: a cluster without topics (standalone)


def gone_topics(old: TopicImage, new: TopicImage) -> dict[str, uuid.UUID]:
    """The topics of `old` whose id `new` lacks, by name: deleted, recreated under the same
    name, or only hidden from kgc (the caller tells these apart). Kafka's coordinator hears
    of deleted topic ids from the controller (`TopicsDelta.deletedTopicIds`); kgc compares
    two reads of the upstream's topics. Nothing is gone before the first read."""
    if old.version == 0:
        return {}
    return {t.name: t.topic_id for topic_id, t in old.by_id.items() if topic_id not in new.by_id}


def _java_string(s: str) -> bytes:
    # hash4j putString: the UTF-16 code units, then the length in code units.
    units = s.encode("utf-16-le")
    return units + _I32.pack(len(units) // 2)


@functools.lru_cache(maxsize=4096)
def topic_hash(topic: TopicMetadata) -> int:
    msb, lsb = struct.unpack(">qq", topic.topic_id.bytes)
    data = [_TOPIC_HEAD.pack(_MAGIC, msb, lsb), _java_string(topic.name), _I32.pack(topic.partitions)]
    data += [_I32.pack(p) for p in range(topic.partitions)]
    return xxhash.xxh3_64_intdigest(b"".join(data))


def metadata_hash(image: TopicImage, names: Iterable[str]) -> int:
    """The group's hash over the subscribed topics that exist; 0 when none does."""
    hashes = [topic_hash(image.by_name[n]) for n in sorted(set(names)) if n in image.by_name]
    if not hashes:
        return 0
    digest = xxhash.xxh3_64_intdigest(struct.pack(f"<{len(hashes)}Q", *hashes))
    return digest - (1 << 64) if digest >= 1 << 63 else digest
