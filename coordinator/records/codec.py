"""The bytes of `__consumer_offsets` keys and values, byte-compatible with Apache Kafka.

Every key starts with an int16 *record type*; every value with an int16 *version*; a
null value is a tombstone. Non-flexible versions use int16-length strings (-1 = null),
int32-length bytes and int32-count arrays; flexible versions (v4) use unsigned-varint
lengths of n+1 (0 = null) and end every struct with a tagged-field section.

Keys (record type, fields):

    0  OffsetCommitKey (legacy)   group string, topic string, partition int32
    1  OffsetCommitKey            group string, topic string, partition int32
    2  GroupMetadataKey           group string
    3  ConsumerGroupMetadataKey                  group string
    5  ConsumerGroupMemberMetadataKey            group string, member_id string
    6  ConsumerGroupTargetAssignmentMetadataKey  group string
    7  ConsumerGroupTargetAssignmentMemberKey    group string, member_id string
    8  ConsumerGroupCurrentMemberAssignmentKey   group string, member_id string
    16 ConsumerGroupRegularExpressionKey         group string, regex string
    4, 9+ legacy KIP-848 / share / streams records: not decoded (`deserialize` returns None)

The KIP-848 values (types 3-8 and 16) are all version 0 and flexible (compact strings
and arrays, a tagged-field section closing every struct); topic ids are 16-byte uuids:

    3  epoch int32; tagged 0: metadata_hash int64
    5  instance_id nullable string, rack_id nullable string, client_id string,
       client_host string, subscribed_topic_names []string, subscribed_topic_regex
       nullable string, rebalance_timeout_ms int32, server_assignor nullable string;
       tagged 0: classic member metadata, a nullable struct (presence byte 1, then
       session_timeout_ms int32, supported_protocols [] {name string, metadata bytes});
       set for members that speak the classic protocol inside a consumer group
    6  assignment_epoch int32
    7  topic_partitions [] {topic_id uuid, partitions []int32}
    8  member_epoch int32, previous_member_epoch int32, state int8,
       assigned_partitions [] {topic_id, partitions; tagged 0: assignment_epochs
       nullable []int32, one per partition (Kafka 4.3+, KIP-1251)},
       partitions_pending_revocation [] {...}
    16 topics []string, version int64, timestamp int64

OffsetCommitValue by version:

    0  offset int64, metadata string, commit_timestamp int64
    1  offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
    2  offset int64, metadata string, commit_timestamp int64
    3  offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    4  v3, flexible; tagged 0: topic_id uuid (Kafka 4.1+ writes it when the commit
       named the topic by id: OffsetCommit v10+)

GroupMetadataValue by version:

    protocol_type string, generation int32, protocol nullable string,
    leader nullable string, [v2+] current_state_timestamp int64, members []:
        member_id string, [v3+] group_instance_id nullable string, client_id string,
        client_host string, [v1+] rebalance_timeout int32, session_timeout int32,
        subscription bytes, assignment bytes
    v4 is v3, flexible.

We write OffsetCommitValue v3 (v1 when the commit carried an explicit retention, so that
the expire timestamp survives; v4 with the topic id when the commit named its topic by
id, as Kafka 4.1+ does) and GroupMetadataValue v3. Kafka 4.1+ writes v4 for every commit
without a retention (its tagged fields empty when there is no id); kgc keeps v3 there,
which every Kafka reads, and reads both.
Absent fields decode to Kafka's defaults: leader_epoch -1, expire_timestamp -1,
current_state_timestamp -1, group_instance_id None and rebalance_timeout -1 (replay
reads -1 as "use the session timeout").
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Iterable
from typing import Any, Literal, TypeVar, cast, overload

from coordinator.records.types import (
    ADOPTED_GROUP_KEY_TYPE,
    ADOPTED_GROUP_VALUE_VERSION,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_TYPE,
    CONSUMER_GROUP_MEMBER_METADATA_KEY_TYPE,
    CONSUMER_GROUP_METADATA_KEY_TYPE,
    CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_TYPE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_TYPE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_TYPE,
    CONSUMER_GROUP_VALUE_VERSION,
    FLEXIBLE_VERSION,
    GROUP_METADATA_KEY_TYPE,
    GROUP_METADATA_VALUE_VERSION,
    OFFSET_COMMIT_KEY_TYPE,
    OFFSET_COMMIT_LEGACY_KEY_TYPE,
    OFFSET_COMMIT_VALUE_VERSION,
    OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY,
    OFFSET_COMMIT_VALUE_VERSION_WITH_TOPIC_ID,
    AdoptedGroupKey,
    AdoptedGroupValue,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    Headers,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    RecordKey,
    RecordValue,
    TopicPartitionEpochs,
    TopicPartitions,
)
from protocol import wire

_CONSUMER_KEY_TYPES: dict[type, int] = {
    ConsumerGroupMetadataKey: CONSUMER_GROUP_METADATA_KEY_TYPE,
    ConsumerGroupMemberMetadataKey: CONSUMER_GROUP_MEMBER_METADATA_KEY_TYPE,
    ConsumerGroupTargetAssignmentMetadataKey: CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_TYPE,
    ConsumerGroupTargetAssignmentMemberKey: CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_TYPE,
    ConsumerGroupCurrentMemberAssignmentKey: CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_TYPE,
    ConsumerGroupRegularExpressionKey: CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_TYPE,
}
_CONSUMER_KEY_CLASSES = {record_type: cls for cls, record_type in _CONSUMER_KEY_TYPES.items()}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I64_I32 = struct.Struct(">qi")
_I8 = struct.Struct(">b")
_UUID = struct.Struct(">16s")
_new_tuple = tuple.__new__    # skips a NamedTuple's Python-level __new__
R = TypeVar("R", bound=tuple)
_V3_NO_METADATA = struct.Struct(">hqihq")    # an OffsetCommitValue v3 with empty metadata
_V4_HEAD = struct.Struct(">hqi")             # v4: version, offset, leader epoch (then metadata...)
# v4's tagged fields when it has the topic id: one field, tag 0, 16 bytes (then the uuid).
_TOPIC_ID_TAG = b"\x01\x00\x10"


# ---------------------------------------------------------------- encoding


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _nullable_string(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _string(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


@functools.lru_cache(maxsize=4096)
def _offset_commit_key_prefix(group: str, topic: str) -> bytes:
    # One commit writes many partitions of the same group and topic.
    return _I16.pack(OFFSET_COMMIT_KEY_TYPE) + _string(group) + _string(topic)


def serialize_key(key: RecordKey) -> bytes:
    if type(key) is OffsetCommitKey:
        return _offset_commit_key_prefix(key.group, key.topic) + _I32.pack(key.partition)
    if isinstance(key, GroupMetadataKey):
        return _I16.pack(GROUP_METADATA_KEY_TYPE) + _string(key.group)
    if isinstance(key, AdoptedGroupKey):
        return _I16.pack(ADOPTED_GROUP_KEY_TYPE) + _string(key.group)
    record_type = _CONSUMER_KEY_TYPES.get(type(key))
    if record_type is not None:
        # Keys are never flexible: int16-length strings, like the classic keys.
        second = getattr(key, "member_id", None) or getattr(key, "regex", None)
        tail = b"" if second is None else _string(second)
        return _I16.pack(record_type) + _string(key.group) + tail
    raise TypeError(f"not a record key: {key!r}")


def serialize_records(records: Iterable[CoordinatorRecord], into: type[R]) -> list[R]:
    """(key bytes, value bytes, headers) of each record, each built as an `into` (a
    NamedTuple of those three). `serialize_key` and `serialize_value` inlined for an
    OffsetCommit run's common record, an offset with no metadata, no expiry and no topic
    id: an OffsetCommit is a run of one group's and topic's records, one per partition,
    so the key prefix is built once per run."""
    out: list[R] = []
    group = topic = None
    prefix = b""
    pack_partition = _I32.pack
    pack_value = _V3_NO_METADATA.pack
    for key, value, headers in records:
        if type(key) is OffsetCommitKey and type(value) is OffsetCommitValue:
            offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms, topic_id = value
            if not metadata and expire_timestamp_ms == -1 and topic_id is None:
                if key.group is not group or key.topic is not topic:
                    group, topic = key.group, key.topic
                    prefix = _offset_commit_key_prefix(group, topic)
                out.append(_new_tuple(into, (prefix + pack_partition(key.partition), pack_value(
                    OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch, 0, commit_timestamp_ms), headers)))
                continue
        out.append(_new_tuple(into, (serialize_key(key), serialize_value(value), headers)))
    return out


def serialize_value(value: RecordValue | None) -> bytes | None:
    if value is None:
        return None
    if type(value) is OffsetCommitValue:
        offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms, topic_id = value
        if expire_timestamp_ms != -1:
            # v1 has no topic id (Kafka drops it there too: the field is ignorable).
            return (_I16.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY) + _I64.pack(offset)
                    + _string(metadata) + _I64.pack(commit_timestamp_ms) + _I64.pack(expire_timestamp_ms))
        if topic_id is not None and topic_id.int:
            return (_V4_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_TOPIC_ID, offset, leader_epoch)
                    + wire.string(metadata, True) + _I64.pack(commit_timestamp_ms) + _TOPIC_ID_TAG + topic_id.bytes)
        if not metadata:
            return _V3_NO_METADATA.pack(OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch, 0, commit_timestamp_ms)
        return (_I16.pack(OFFSET_COMMIT_VALUE_VERSION) + _I64_I32.pack(offset, leader_epoch)
                + _string(metadata) + _I64.pack(commit_timestamp_ms))
    if isinstance(value, GroupMetadataValue):
        parts = [
            _I16.pack(GROUP_METADATA_VALUE_VERSION),
            _string(value.protocol_type),
            _I32.pack(value.generation),
            _nullable_string(value.protocol),
            _nullable_string(value.leader),
            _I64.pack(value.current_state_timestamp_ms),
            _I32.pack(len(value.members)),
        ]
        for m in value.members:
            parts += (
                _string(m.member_id),
                _nullable_string(m.group_instance_id),
                _string(m.client_id),
                _string(m.client_host),
                _I32.pack(m.rebalance_timeout_ms),
                _I32.pack(m.session_timeout_ms),
                _bytes(m.subscription),
                _bytes(m.assignment),
            )
        return b"".join(parts)
    if isinstance(value, ConsumerGroupValue):
        return _I16.pack(CONSUMER_GROUP_VALUE_VERSION) + _serialize_consumer_value(value)
    if isinstance(value, AdoptedGroupValue):
        return _I16.pack(ADOPTED_GROUP_VALUE_VERSION) + _string(value.source) + _I64.pack(value.adopted_at_ms)
    raise TypeError(f"not a record value: {value!r}")


def _compact_strings(items: tuple[str, ...]) -> bytes:
    return wire.count(len(items), True) + b"".join(wire.string(item, True) for item in items)


def _topic_partitions(topics: TopicPartitions) -> bytes:
    parts = [wire.count(len(topics), True)]
    for topic_id, partitions in topics:
        parts += (topic_id.bytes, _int32s(partitions), _NO_TAGS)
    return b"".join(parts)


def _topic_partition_epochs(topics: TopicPartitionEpochs) -> bytes:
    parts = [wire.count(len(topics), True)]
    for topic_id, partitions, epochs in topics:
        parts += (topic_id.bytes, _int32s(partitions),
                  _NO_TAGS if epochs is None else wire.tagged([(0, _int32s(epochs))]))
    return b"".join(parts)


def _int32s(values: tuple[int, ...]) -> bytes:
    return wire.count(len(values), True) + struct.pack(f">{len(values)}i", *values)


_NO_TAGS = b"\x00"


def _int64_tag0(value: int) -> bytes:
    """A tagged-field section holding `value` as tag 0, an int64 whose default is 0 (written
    only when set, as Kafka writes it)."""
    return wire.tagged([(0, _I64.pack(value))]) if value else _NO_TAGS


def _read_int64_tag0(tags: dict[int, bytes]) -> int:
    """`_int64_tag0`'s value from a record's tagged fields: 0 when absent."""
    return _I64.unpack(tags[0])[0] if len(tags.get(0, b"")) == 8 else 0


def _classic_member_tags(classic: ClassicMemberMetadata | None) -> bytes:
    if classic is None:
        return _NO_TAGS
    # A nullable struct in a tagged field: a presence byte (1), then the struct.
    parts = [b"\x01", _I32.pack(classic.session_timeout_ms), wire.count(len(classic.supported_protocols), True)]
    for name, metadata in classic.supported_protocols:
        parts += (wire.string(name, True), wire.count(len(metadata), True), metadata, _NO_TAGS)
    parts.append(_NO_TAGS)
    return wire.tagged([(0, b"".join(parts))])


def _decode_classic_member(data: bytes) -> ClassicMemberMetadata | None:
    r = _Reader(data, flexible=True)
    # Kafka's presence marker is an unsigned varint, 0 for null (which Kafka 4 writes for
    # every consumer-protocol member) and 1 for a struct; a byte above 1 is not Kafka's.
    marker = r.int8()
    if marker == 0:
        return None
    if marker != 1:
        raise RecordDecodeError(f"ClassicMemberMetadata presence marker {marker}, not 0 or 1")
    session_timeout_ms = r.int32()
    protocols = []
    for _ in range(r.array_count()):
        name = r.string()
        metadata = r.bytes_()
        r.skip_tagged_fields()
        protocols.append((name, metadata))
    r.skip_tagged_fields()
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


def _serialize_consumer_value(value: ConsumerGroupValue) -> bytes:
    match value:
        case ConsumerGroupMetadataValue(epoch, metadata_hash):
            return _I32.pack(epoch) + _int64_tag0(metadata_hash)
        case ConsumerGroupMemberMetadataValue():
            return b"".join((
                wire.string(value.instance_id, True), wire.string(value.rack_id, True),
                wire.string(value.client_id, True), wire.string(value.client_host, True),
                _compact_strings(value.subscribed_topic_names), wire.string(value.subscribed_topic_regex, True),
                _I32.pack(value.rebalance_timeout_ms), wire.string(value.server_assignor, True),
                _classic_member_tags(value.classic_member_metadata)))
        case ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch, assignment_timestamp):
            return _I32.pack(assignment_epoch) + _int64_tag0(assignment_timestamp)
        case ConsumerGroupTargetAssignmentMemberValue(topic_partitions):
            return _topic_partitions(topic_partitions) + _NO_TAGS
        case ConsumerGroupCurrentMemberAssignmentValue():
            return b"".join((_I32.pack(value.member_epoch), _I32.pack(value.previous_member_epoch),
                             _I8.pack(value.state), _topic_partition_epochs(value.assigned_partitions),
                             _topic_partition_epochs(value.partitions_pending_revocation), _NO_TAGS))
        case ConsumerGroupRegularExpressionValue(topics, version, timestamp_ms):
            return _compact_strings(topics) + _I64.pack(version) + _I64.pack(timestamp_ms) + _NO_TAGS
    raise TypeError(f"not a consumer group value: {value!r}")


# ---------------------------------------------------------------- decoding


class _Reader:
    """A cursor over one key or value; every read checks bounds."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False):
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise RecordDecodeError(f"need {n} bytes at {self.pos}, have {len(self.buf) - self.pos}")
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def _fixed(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise RecordDecodeError(f"need {s.size} bytes at {self.pos}, have {len(self.buf) - self.pos}")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def tagged_fields(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self._take(self.uvarint())
        return fields

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.buf):
                raise RecordDecodeError("truncated varint")
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise RecordDecodeError("varint longer than 5 bytes")

    def _length(self, wide: bool) -> int:
        # Returns -1 for null in both encodings.
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        n = self._length(wide=False)
        if n < -1:
            raise RecordDecodeError(f"bad string length {n}")
        if n == -1:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordDecodeError(f"string is not UTF-8: {e}") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordDecodeError("null in a non-nullable string")
        return s

    def bytes_(self) -> bytes:
        n = self._length(wide=True)
        if n < 0:
            raise RecordDecodeError(f"bad bytes length {n}")
        return bytes(self._take(n))

    def array_count(self) -> int:
        n = self._length(wide=True)
        if n < 0:
            raise RecordDecodeError(f"bad array length {n}")
        return n

    def skip_tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise RecordDecodeError(f"{len(self.buf) - self.pos} trailing bytes")


def _decode_offset_commit_value(r: _Reader, version: int) -> OffsetCommitValue:
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp_ms = r.int64()
    expire_timestamp_ms = r.int64() if version == 1 else -1
    topic_id = None
    if r.flexible:
        tags = r.tagged_fields()
        raw_id = tags.get(_TOPIC_ID_FIELD)
        if raw_id is not None:
            if len(raw_id) != 16:
                raise RecordDecodeError(f"OffsetCommitValue topic id of {len(raw_id)} bytes, not 16")
            topic_id = _topic_id(bytes(raw_id))
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms, topic_id)


_TOPIC_ID_FIELD = 0       # OffsetCommitValue's tagged field 0 (v4+): topicId


@functools.lru_cache(maxsize=4096)
def _topic_id(raw: bytes) -> uuid.UUID | None:
    # A log holds few topics and many commits to each: one UUID per topic. Kafka's zero
    # uuid (its default, never written by Kafka) is no id.
    topic_id = uuid.UUID(bytes=raw)
    return topic_id if topic_id.int else None


def _decode_member(r: _Reader, version: int) -> MemberMetadata:
    member_id = r.string()
    group_instance_id = r.nullable_string() if version >= 3 else None
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout_ms = r.int32() if version >= 1 else -1
    session_timeout_ms = r.int32()
    subscription = r.bytes_()
    assignment = r.bytes_()
    r.skip_tagged_fields()
    return MemberMetadata(member_id, group_instance_id, client_id, client_host,
                          rebalance_timeout_ms, session_timeout_ms, subscription, assignment)


def _decode_group_metadata_value(r: _Reader, version: int) -> GroupMetadataValue:
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp_ms = r.int64() if version >= 2 else -1
    members = tuple(_decode_member(r, version) for _ in range(r.array_count()))
    r.skip_tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp_ms, members)


def _strings(r: _Reader) -> tuple[str, ...]:
    return tuple(r.string() for _ in range(r.array_count()))


def _decode_topic_partitions(r: _Reader) -> TopicPartitions:
    return tuple((topic_id, partitions) for topic_id, partitions, _ in _decode_topic_partition_epochs(r))


def _decode_topic_partition_epochs(r: _Reader) -> TopicPartitionEpochs:
    topics = []
    for _ in range(r.array_count()):
        topic_id = r.uuid()
        partitions = _decode_int32s(r)
        epochs = None
        raw = r.tagged_fields().get(0)
        if raw is not None:
            inner = _Reader(raw, flexible=True)
            n = inner.uvarint() - 1
            if n >= 0:
                epochs = tuple(inner.int32() for _ in range(n))
            inner.done()
        topics.append((topic_id, partitions, epochs))
    return tuple(topics)


def _decode_int32s(r: _Reader) -> tuple[int, ...]:
    return tuple(r.int32() for _ in range(r.array_count()))


def _decode_consumer_value(key: ConsumerGroupKey, r: _Reader) -> ConsumerGroupValue:
    value: ConsumerGroupValue
    match key:
        case ConsumerGroupMetadataKey():
            epoch = r.int32()
            return ConsumerGroupMetadataValue(epoch, _read_int64_tag0(r.tagged_fields()))
        case ConsumerGroupMemberMetadataKey():
            fields: dict[str, Any] = dict(
                instance_id=r.nullable_string(), rack_id=r.nullable_string(), client_id=r.string(),
                client_host=r.string(), subscribed_topic_names=_strings(r),
                subscribed_topic_regex=r.nullable_string(), rebalance_timeout_ms=r.int32(),
                server_assignor=r.nullable_string())
            tags = r.tagged_fields()
            return ConsumerGroupMemberMetadataValue(
                **fields, classic_member_metadata=_decode_classic_member(tags[0]) if 0 in tags else None)
        case ConsumerGroupTargetAssignmentMetadataKey():
            epoch = r.int32()
            return ConsumerGroupTargetAssignmentMetadataValue(epoch, _read_int64_tag0(r.tagged_fields()))
        case ConsumerGroupTargetAssignmentMemberKey():
            value = ConsumerGroupTargetAssignmentMemberValue(_decode_topic_partitions(r))
        case ConsumerGroupCurrentMemberAssignmentKey():
            value = ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=r.int32(), previous_member_epoch=r.int32(), state=r.int8(),
                assigned_partitions=_decode_topic_partition_epochs(r),
                partitions_pending_revocation=_decode_topic_partition_epochs(r))
        case ConsumerGroupRegularExpressionKey():
            value = ConsumerGroupRegularExpressionValue(_strings(r), r.int64(), r.int64())
    r.skip_tagged_fields()
    return value


def deserialize(key_bytes: bytes | None, value_bytes: bytes | None) -> tuple[RecordKey, RecordValue | None] | None:
    """Decode one record; None for record types this coordinator does not know (skip them)."""
    key = deserialize_key(key_bytes)
    if key is None:
        return None
    return key, None if value_bytes is None else deserialize_value(key, value_bytes)


def deserialize_key(key_bytes: bytes | None) -> RecordKey | None:
    """A record's key; None for record types this coordinator does not know."""
    if key_bytes is None:
        raise RecordDecodeError("record without a key")
    if key_bytes[:2] == _OFFSET_COMMIT_KEY_PREFIX:
        fast = _plain_offset_commit_key(key_bytes)
        if fast is not None:
            return fast
    kr = _Reader(key_bytes)
    record_type = kr.int16()
    key: RecordKey
    if record_type in (OFFSET_COMMIT_LEGACY_KEY_TYPE, OFFSET_COMMIT_KEY_TYPE):
        key = OffsetCommitKey(kr.string(), kr.string(), kr.int32())
    elif record_type == GROUP_METADATA_KEY_TYPE:
        key = GroupMetadataKey(kr.string())
    elif record_type == ADOPTED_GROUP_KEY_TYPE:
        key = AdoptedGroupKey(kr.string())
    elif record_type in _CONSUMER_KEY_CLASSES:
        cls = _CONSUMER_KEY_CLASSES[record_type]
        group = kr.string()
        key = cls(group) if cls in (ConsumerGroupMetadataKey, ConsumerGroupTargetAssignmentMetadataKey) \
            else cls(group, kr.string())
    elif record_type < 0:
        raise RecordDecodeError(f"negative record type {record_type}")
    else:
        return None
    kr.done()
    return key


# Kafka 4's other coordinator records (share and streams groups, legacy KIP-848 types)
# are not decoded, but every one of their keys starts with the group id.


def other_record_group(key_bytes: bytes) -> tuple[int, str] | None:
    """(record type, group id) of a record `deserialize_key` does not know; None if the
    key does not start that way."""
    try:
        kr = _Reader(key_bytes)
        record_type = kr.int16()
        return (record_type, kr.string()) if GROUP_METADATA_KEY_TYPE < record_type != ADOPTED_GROUP_KEY_TYPE \
            else None
    except RecordDecodeError:
        return None


def deserialize_value(key: RecordKey, value_bytes: bytes) -> RecordValue:
    """The value of a record whose key `deserialize_key` gave; a tombstone has none."""
    if isinstance(key, OffsetCommitKey):
        fast = _plain_offset_commit_value(value_bytes)
        if fast is not None:
            return fast
    elif type(key) is GroupMetadataKey:
        plain = _plain_group_metadata_value(value_bytes)
        if plain is not None:
            return plain
    vr = _Reader(value_bytes)
    version = vr.int16()
    if isinstance(key, AdoptedGroupKey):
        if version != ADOPTED_GROUP_VALUE_VERSION:
            raise RecordDecodeError(f"unknown value version {version} for record type {ADOPTED_GROUP_KEY_TYPE}")
        adopted = AdoptedGroupValue(vr.string(), vr.int64())
        vr.done()
        return adopted
    if type(key) in _CONSUMER_KEY_TYPES:
        if version != CONSUMER_GROUP_VALUE_VERSION:
            raise RecordDecodeError(f"unknown value version {version} for record type {_CONSUMER_KEY_TYPES[type(key)]}")
        vr.flexible = True
        consumer_value = _decode_consumer_value(cast(ConsumerGroupKey, key), vr)
        vr.done()
        return consumer_value
    if not 0 <= version <= FLEXIBLE_VERSION:
        record_type = OFFSET_COMMIT_KEY_TYPE if isinstance(key, OffsetCommitKey) else GROUP_METADATA_KEY_TYPE
        raise RecordDecodeError(f"unknown value version {version} for record type {record_type}")
    vr.flexible = version >= FLEXIBLE_VERSION
    value: RecordValue
    if isinstance(key, OffsetCommitKey):
        value = _decode_offset_commit_value(vr, version)
    else:
        value = _decode_group_metadata_value(vr, version)
    vr.done()
    return value


# Loading decodes millions of OffsetCommit records: the shapes this coordinator and Kafka
# write (key type 1, value v3, and v4 with or without the topic id) are read with a few
# struct calls and no cursor. Anything else,
# or anything that does not fit exactly, goes through `_Reader`, which words the error.
_OFFSET_COMMIT_KEY_PREFIX = _I16.pack(OFFSET_COMMIT_KEY_TYPE)
_OFFSET_COMMIT_V3_PREFIX = _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
_OFFSET_COMMIT_V4_PREFIX = _I16.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_TOPIC_ID)
_V3_HEAD = struct.Struct(">hqih")       # version, offset, leader_epoch, metadata length
_V3_MIN_SIZE = _V3_HEAD.size + _I64.size


def _plain_offset_commit_key(buf: bytes) -> OffsetCommitKey | None:
    size = len(buf)
    group_end = 4 + _I16.unpack_from(buf, 2)[0] if size >= 4 else -1
    if group_end < 4 or group_end + 6 > size:
        return None
    topic_end = group_end + 2 + _I16.unpack_from(buf, group_end)[0]
    if topic_end < group_end + 2 or topic_end + 4 != size:
        return None
    try:
        return OffsetCommitKey(buf[4:group_end].decode("utf-8"), buf[group_end + 2:topic_end].decode("utf-8"),
                               _I32.unpack_from(buf, topic_end)[0])
    except UnicodeDecodeError:
        return None


def _plain_offset_commit_value(buf: bytes) -> OffsetCommitValue | None:
    if buf[:2] == _OFFSET_COMMIT_V4_PREFIX:
        return _plain_offset_commit_value_v4(buf)
    if len(buf) == _V3_MIN_SIZE and buf[:2] == _OFFSET_COMMIT_V3_PREFIX:
        # No metadata, the usual commit: one unpack.
        _version, offset, leader_epoch, n, commit_timestamp_ms = _V3_NO_METADATA.unpack(buf)
        if n == 0:
            return OffsetCommitValue(offset, leader_epoch, "", commit_timestamp_ms)
        return None
    if len(buf) < _V3_MIN_SIZE or buf[:2] != _OFFSET_COMMIT_V3_PREFIX:
        return None
    _version, offset, leader_epoch, n = _V3_HEAD.unpack_from(buf)
    end = _V3_HEAD.size + n
    if n < 0 or end + _I64.size != len(buf):
        return None
    try:
        metadata = buf[_V3_HEAD.size:end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return OffsetCommitValue(offset, leader_epoch, metadata, _I64.unpack_from(buf, end)[0])


def _plain_offset_commit_value_v4(buf: bytes) -> OffsetCommitValue | None:
    """v4 (Kafka 4.1+ writes it for every commit without a retention) with metadata under
    127 bytes (a one-byte length) and no tagged field but the topic id."""
    size = len(buf)
    n = buf[_V4_HEAD.size] - 1 if size > _V4_HEAD.size else -1
    end = _V4_HEAD.size + 1 + n
    if not 0 <= n < 0x7F or end + _I64.size >= size:
        return None
    tags = buf[end + _I64.size:]
    if tags == _NO_TAGS:
        topic_id = None
    elif len(tags) == len(_TOPIC_ID_TAG) + 16 and tags[:len(_TOPIC_ID_TAG)] == _TOPIC_ID_TAG:
        topic_id = _topic_id(bytes(tags[len(_TOPIC_ID_TAG):]))
    else:
        return None
    try:
        metadata = bytes(buf[_V4_HEAD.size + 1:end]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    _version, offset, leader_epoch = _V4_HEAD.unpack_from(buf)
    return OffsetCommitValue(offset, leader_epoch, metadata, _I64.unpack_from(buf, end)[0], -1, topic_id)


# GroupMetadata values (one per rebalance; an audit of a large log reads hundreds of
# thousands) of the versions that are not flexible, read straight with struct calls.
# None for anything that does not decode exactly: `_Reader` then words the error.
def _plain_group_metadata_value(buf: bytes) -> GroupMetadataValue | None:
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if not 0 <= version < FLEXIBLE_VERSION:
            return None
        protocol_type, pos = _plain_string(buf, 2)
        (generation,) = _I32.unpack_from(buf, pos)
        protocol, pos = _plain_string(buf, pos + 4, nullable=True)
        leader, pos = _plain_string(buf, pos, nullable=True)
        current_state_timestamp_ms = -1
        if version >= 2:
            (current_state_timestamp_ms,) = _I64.unpack_from(buf, pos)
            pos += 8
        (count,) = _I32.unpack_from(buf, pos)
        pos += 4
        if count < 0:
            return None
        members = []
        for _ in range(count):
            member_id, pos = _plain_string(buf, pos)
            group_instance_id = None
            if version >= 3:
                group_instance_id, pos = _plain_string(buf, pos, nullable=True)
            client_id, pos = _plain_string(buf, pos)
            client_host, pos = _plain_string(buf, pos)
            rebalance_timeout_ms = -1
            if version >= 1:
                (rebalance_timeout_ms,) = _I32.unpack_from(buf, pos)
                pos += 4
            (session_timeout_ms,) = _I32.unpack_from(buf, pos)
            subscription, pos = _plain_bytes(buf, pos + 4)
            assignment, pos = _plain_bytes(buf, pos)
            members.append(MemberMetadata(member_id, group_instance_id, client_id, client_host,
                                          rebalance_timeout_ms, session_timeout_ms, subscription, assignment))
    except (struct.error, UnicodeDecodeError, _NotPlain):
        return None
    if pos != len(buf):
        return None
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp_ms, tuple(members))


class _NotPlain(Exception):
    """A field `_Reader` would refuse: it decodes the value again and says why."""


@overload
def _plain_string(buf: bytes, pos: int, nullable: Literal[False] = False) -> tuple[str, int]: ...
@overload
def _plain_string(buf: bytes, pos: int, nullable: Literal[True]) -> tuple[str | None, int]: ...
def _plain_string(buf: bytes, pos: int, nullable: bool = False) -> tuple[str | None, int]:
    """The string (int16 length) at `pos` and the position after it; None for null if `nullable`."""
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise _NotPlain
    end = pos + n
    if end > len(buf):
        raise _NotPlain
    return buf[pos:end].decode("utf-8"), end


def _plain_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    """The bytes (int32 length, not null) at `pos` and the position after them."""
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    end = pos + n
    if n < 0 or end > len(buf):
        raise _NotPlain
    return bytes(buf[pos:end]), end


def deserialize_record(key_bytes: bytes | None, value_bytes: bytes | None, headers: Headers) -> CoordinatorRecord | None:
    """`deserialize` as a record carrying `headers`; None for record types this
    coordinator does not know."""
    decoded = deserialize(key_bytes, value_bytes)
    if decoded is None:
        return None
    key, value = decoded
    return CoordinatorRecord(key, value, headers)
