"""The `__consumer_offsets` codec, byte for byte against hand-computed layouts."""

import uuid

import pytest

from coordinator.records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    deserialize,
    new_group_metadata_tombstone,
    new_offset_commit_record,
    new_offset_commit_records,
    serialize_key,
    serialize_value,
)

H = bytes.fromhex


def s16(s: str) -> bytes:
    raw = s.encode()
    return len(raw).to_bytes(2, "big") + raw


def compact(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return bytes([len(raw) + 1]) + raw


MEMBER = MemberMetadata("m1", None, "c", "/h", 300, 100, b"S", b"A")
GROUP_VALUE = GroupMetadataValue("consumer", 1, "range", "m1", 5, (MEMBER,))

OFFSET_KEY_BYTES = H("0001") + s16("g") + s16("t") + H("00000000")
OFFSET_V3_BYTES = H("0003" "000000000000000a" "00000005") + s16("m") + H("00000000000003e8")
GROUP_V3_BYTES = (H("0003") + s16("consumer") + H("00000001") + s16("range") + s16("m1")
                  + H("0000000000000005" "00000001") + s16("m1") + H("ffff") + s16("c") + s16("/h")
                  + H("0000012c" "00000064" "00000001") + b"S" + H("00000001") + b"A")


def test_offset_commit_key_and_value_v3_are_kafka_bytes():
    assert serialize_key(OffsetCommitKey("g", "t", 0)) == OFFSET_KEY_BYTES
    assert serialize_value(OffsetCommitValue(10, 5, "m", 1000)) == OFFSET_V3_BYTES


def test_offset_commit_with_expire_timestamp_is_written_as_v1():
    value = OffsetCommitValue(10, -1, "m", 1000, 2000)
    expected = H("0001" "000000000000000a") + s16("m") + H("00000000000003e8" "00000000000007d0")
    assert serialize_value(value) == expected
    assert deserialize(OFFSET_KEY_BYTES, expected) == (OffsetCommitKey("g", "t", 0), value)


def test_group_metadata_key_and_value_v3_are_kafka_bytes():
    assert serialize_key(GroupMetadataKey("g")) == H("0002") + s16("g")
    assert serialize_value(GROUP_VALUE) == GROUP_V3_BYTES


def test_tombstones_serialize_to_null_and_decode_to_none():
    assert serialize_value(None) is None
    assert deserialize(H("0002") + s16("g"), None) == (GroupMetadataKey("g"), None)


@pytest.mark.parametrize("value", [
    OffsetCommitValue(0, -1, "", 0),
    OffsetCommitValue(2**63 - 1, 2**31 - 1, "ünïcode 😀", -1),
    OffsetCommitValue(-1, -1, "x", 3, 7),      # v1 has no leader epoch: only -1 survives it
    OffsetCommitValue(7, 2, "ünïcode 😀", 9, -1, uuid.UUID("7c9d5b1e-2f0a-4c3b-9e8d-1a2b3c4d5e6f")),
    GroupMetadataValue("", 0, None, None, -1, ()),
    GroupMetadataValue("consumer", 3, "range", "a", 9, (
        MemberMetadata("a", "inst", "cid", "/10.0.0.5", 1, 2, b"", b"\x00" * 300),
        MemberMetadata("b", None, "", "", -1, 2, b"x", b""))),
])
def test_values_round_trip(value):
    key = OffsetCommitKey("grp", "topic", 7) if isinstance(value, OffsetCommitValue) else GroupMetadataKey("grp")
    assert deserialize(serialize_key(key), serialize_value(value)) == (key, value)


def test_offset_commit_values_v0_and_v2_decode_with_defaults():
    v0 = H("0000" "000000000000002a") + s16("md") + H("0000000000000064")
    v2 = H("0002") + v0[2:]
    for raw in (v0, v2):
        assert deserialize(OFFSET_KEY_BYTES, raw)[1] == OffsetCommitValue(42, -1, "md", 100, -1)


def test_offset_commit_value_v4_is_flexible_and_skips_unknown_tags():
    raw = (H("0004" "000000000000002a" "00000003") + compact("md") + H("0000000000000064")
           + H("01" "05" "02" "beef"))
    assert deserialize(OFFSET_KEY_BYTES, raw)[1] == OffsetCommitValue(42, 3, "md", 100, -1)


# Kafka 4.4's generated OffsetCommitValue (kafka-group-coordinator-4.4.0.jar), written with
# MessageUtil.toVersionPrefixedBytes: offset 42, leader epoch 3, metadata "md", commit time
# 100, topicId AAECAwQFBgcICQoLDA0ODw (bytes 00..0f), at v4; and without the id (metadata "").
TOPIC_ID = uuid.UUID(bytes=bytes(range(16)))
KAFKA_V4_WITH_TOPIC_ID = H("0004000000000000002a00000003036d640000000000000064010010000102030405060708090a0b0c0d0e0f")
KAFKA_V4_WITHOUT_TOPIC_ID = H("0004000000000000002a0000000301000000000000006400")


def test_offset_commit_value_v4_carries_the_topic_id_in_tagged_field_0_as_kafka_writes_it():
    value = OffsetCommitValue(42, 3, "md", 100, -1, TOPIC_ID)
    assert serialize_value(value) == KAFKA_V4_WITH_TOPIC_ID
    assert deserialize(OFFSET_KEY_BYTES, KAFKA_V4_WITH_TOPIC_ID)[1] == value
    assert deserialize(OFFSET_KEY_BYTES, KAFKA_V4_WITHOUT_TOPIC_ID)[1] == OffsetCommitValue(42, 3, "", 100)


def test_a_topic_id_is_not_written_where_kafka_has_no_field_for_it():
    # v1 (a commit with a retention) has no topic id; Kafka drops it (the field is ignorable).
    with_expiry = OffsetCommitValue(10, -1, "m", 1000, 2000, TOPIC_ID)
    assert serialize_value(with_expiry) == serialize_value(with_expiry._replace(topic_id=None))
    # Kafka's zero uuid is its "no id": neither written nor read as one.
    zero = OffsetCommitValue(10, 5, "m", 1000, -1, uuid.UUID(int=0))
    assert serialize_value(zero) == OFFSET_V3_BYTES
    raw = KAFKA_V4_WITH_TOPIC_ID[:-16] + bytes(16)
    assert deserialize(OFFSET_KEY_BYTES, raw)[1].topic_id is None


def test_a_topic_id_field_of_the_wrong_size_is_refused():
    raw = KAFKA_V4_WITHOUT_TOPIC_ID[:-1] + H("01" "00" "02" "beef")
    with pytest.raises(RecordDecodeError, match="topic id of 2 bytes"):
        deserialize(OFFSET_KEY_BYTES, raw)


def test_legacy_offset_key_type_0_decodes_as_an_offset_commit():
    key = H("0000") + OFFSET_KEY_BYTES[2:]
    assert deserialize(key, OFFSET_V3_BYTES) == (OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, 5, "m", 1000))


def test_group_metadata_v0_has_no_rebalance_timeout_timestamp_or_instance_id():
    raw = (H("0000") + s16("consumer") + H("00000002") + H("ffff") + H("ffff") + H("00000001")
           + s16("m") + s16("c") + s16("/h") + H("00000064" "00000000" "00000000"))
    _, value = deserialize(H("0002") + s16("g"), raw)
    assert value == GroupMetadataValue("consumer", 2, None, None, -1,
                                       (MemberMetadata("m", None, "c", "/h", -1, 100, b"", b""),))


def test_group_metadata_v4_is_flexible():
    raw = (H("0004") + compact("consumer") + H("00000001") + compact("range") + compact("m1")
           + H("0000000000000005") + H("02")
           + compact("m1") + compact(None) + compact("c") + compact("/h") + H("0000012c" "00000064")
           + H("02") + b"S" + H("02") + b"A" + H("00") + H("00"))
    assert deserialize(H("0002") + s16("g"), raw)[1] == GROUP_VALUE


def test_unknown_record_types_are_skipped():
    assert deserialize(H("0009") + s16("g"), b"\x00\x00anything") is None   # removed from Kafka
    assert deserialize(H("0011"), None) is None   # 17: a streams group record


@pytest.mark.parametrize(("key", "value"), [
    (OFFSET_KEY_BYTES[:-1], None),                        # key cut short
    (OFFSET_KEY_BYTES + b"\x00", None),                   # trailing key bytes
    (OFFSET_KEY_BYTES, OFFSET_V3_BYTES[:-1]),             # value cut short
    (OFFSET_KEY_BYTES, OFFSET_V3_BYTES + b"\x00"),        # trailing value bytes
    (OFFSET_KEY_BYTES, H("0005") + OFFSET_V3_BYTES[2:]),  # unknown value version
    (H("ffff"), None),                                    # negative record type
    (H("0002") + H("ffff"), None),                        # null group name
    (H("0002") + H("0002") + b"\xff\xfe", None),          # not UTF-8
    (H("0002") + s16("g"), GROUP_V3_BYTES[:-3]),
])
def test_undecodable_bytes_raise(key, value):
    with pytest.raises(RecordDecodeError):
        deserialize(key, value)


def test_record_constructors_carry_audit_headers():
    record = new_offset_commit_record("g", "t", 1, OffsetCommitValue(5, -1, "", 1), member_id="m-1",
                                      generation=4, client_id="cid", client_host="/1.2.3.4")
    assert record.key == OffsetCommitKey("g", "t", 1)
    assert dict(record.headers) == {"member_id": b"m-1", "generation": b"4", "client_id": b"cid",
                                    "client_host": b"/1.2.3.4"}
    tombstone = new_group_metadata_tombstone("g", generation=2)
    assert tombstone.value is None and dict(tombstone.headers)["generation"] == b"2"


def test_one_commits_records_are_what_the_single_record_constructor_builds():
    audit = {"member_id": "m-1", "generation": 4, "client_id": "cid", "client_host": "/1.2.3.4"}
    many = new_offset_commit_records("g", "t", [(0, 5, -1, ""), (3, 9, 2, "meta")], 100, 200, **audit)
    assert many == [new_offset_commit_record("g", "t", 0, OffsetCommitValue(5, -1, "", 100, 200), **audit),
                    new_offset_commit_record("g", "t", 3, OffsetCommitValue(9, 2, "meta", 100, 200), **audit)]
    assert [(type(r.key), type(r.value)) for r in many] == [(OffsetCommitKey, OffsetCommitValue)] * 2
    assert [serialize_value(r.value) for r in many] == [
        serialize_value(OffsetCommitValue(5, -1, "", 100, 200)), serialize_value(OffsetCommitValue(9, 2, "meta", 100, 200))]


def test_a_classic_members_metadata_is_a_nullable_struct_in_tagged_field_0():
    # Kafka's generator writes a nullable struct in a tagged field as: tag, size, a
    # presence byte 1, then the struct (its own empty tagged-field sections included).
    classic = ClassicMemberMetadata(45_000, (("range", b"\x00\x01"), ("roundrobin", b"")))
    value = ConsumerGroupMemberMetadataValue(None, None, "c", "/h", ("t",), None, 5_000, None, classic)
    struct_bytes = (H("01" "0000afc8" "03") + compact("range") + H("03" "0001" "00")
                    + compact("roundrobin") + H("01" "00") + H("00"))
    expected = (H("0000") + compact(None) + compact(None) + compact("c") + compact("/h") + H("02") + compact("t")
                + compact(None) + H("00001388") + compact(None)
                + H("01" "00") + bytes([len(struct_bytes)]) + struct_bytes)
    assert serialize_value(value) == expected
    key = ConsumerGroupMemberMetadataKey("g", "m")
    assert deserialize(serialize_key(key), expected) == (key, value)
    plain = ConsumerGroupMemberMetadataValue(None, None, "c", "/h", ("t",), None, 5_000, None)
    assert serialize_value(plain) == expected[:len(expected) - len(struct_bytes) - 3] + H("00")


def test_a_null_classic_member_written_by_kafka_4_decodes_as_none():
    """Kafka 4.4 writes a consumer-protocol member's absent ClassicMemberMetadata as tag 0
    holding one unsigned varint 0 (null), since its generator's default is an empty struct:
    these bytes are a real broker's (a Java client's member). The presence marker is a
    varint: 0 null, 1 present."""
    written = H("0000" "00" "00") + compact("real-848") + compact("/127.0.0.1") + H("02") + compact("real-topic") \
        + compact("") + H("000493e0") + compact(None) + H("01" "00" "01" "00")
    key = ConsumerGroupMemberMetadataKey("real-848", "NGWbX05ITryOqeO1S5y37Q")
    assert deserialize(serialize_key(key), written) == (key, ConsumerGroupMemberMetadataValue(
        None, None, "real-848", "/127.0.0.1", ("real-topic",), "", 300_000, None, None))


def test_kgc_adopted_group_record_round_trips_as_its_own_key_type():
    from coordinator import records

    key, value = records.AdoptedGroupKey("g"), records.AdoptedGroupValue("upstream", 1_700_000_000_000)
    key_bytes, value_bytes = records.serialize_key(key), records.serialize_value(value)
    assert key_bytes[:2] == records.ADOPTED_GROUP_KEY_TYPE.to_bytes(2, "big")
    assert records.deserialize(key_bytes, value_bytes) == (key, value)
    assert records.other_record_group(key_bytes) is None   # kgc's own, not another protocol's group
    with pytest.raises(records.RecordDecodeError, match="unknown value version 1"):
        records.deserialize(key_bytes, b"\x00\x01" + value_bytes[2:])


def test_a_members_assignment_epochs_are_tagged_field_0_of_each_topic_as_kafka_4_3_writes_them():
    """ConsumerGroupCurrentMemberAssignmentValue (type 8, version 0, flexible): each topic's
    KIP-1251 `AssignmentEpochs`, a nullable int32 array of one epoch per partition, is tag 0
    of its TopicPartitions; a topic without it (a record of Kafka 4.2 or older kgc) reads
    as None."""
    topic = uuid.UUID("7c9d5b1e-2f0a-4c3b-9e8d-1a2b3c4d5e6f")
    value = ConsumerGroupCurrentMemberAssignmentValue(5, 4, 0, ((topic, (0, 2), (1, 5)),), ((topic, (3,), (4,)),))
    epochs_0_2 = H("03" "00000001" "00000005")       # compact count 2 + 1, then the epochs
    expected = (H("00000005" "00000004" "00")
                + H("02") + topic.bytes + H("03" "00000000" "00000002")
                + H("01" "00") + bytes([len(epochs_0_2)]) + epochs_0_2
                + H("02") + topic.bytes + H("02" "00000003") + H("01" "00" "05" "02" "00000004")
                + H("00"))
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    assert serialize_value(value) == H("0000") + expected
    assert deserialize(serialize_key(key), H("0000") + expected) == (key, value)
    older = (H("0000" "00000005" "00000004" "00") + H("02") + topic.bytes + H("03" "00000000" "00000002" "00")
             + H("01" "00"))
    assert deserialize(serialize_key(key), older)[1] == ConsumerGroupCurrentMemberAssignmentValue(
        5, 4, 0, ((topic, (0, 2), None),), ())


def test_assignment_epochs_written_by_kafka_4_4_decode():
    """Bytes Kafka 4.4's own generated `ConsumerGroupCurrentMemberAssignmentValue` wrote
    (`MessageUtil.toVersionPrefixedBytes`, in jshell over the broker's jars): member epoch
    7, partitions 1 and 4 given at epochs 3 and 7."""
    written = H("0000" "00000007" "00000006" "00" "02" "7c9d5b1e2f0a4c3b9e8d1a2b3c4d5e6f" "03" "00000001" "00000004"
                "01" "00" "09" "03" "00000003" "00000007" "01" "00")
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    topic = uuid.UUID("7c9d5b1e-2f0a-4c3b-9e8d-1a2b3c4d5e6f")
    value = ConsumerGroupCurrentMemberAssignmentValue(7, 6, 0, ((topic, (1, 4), (3, 7)),), ())
    assert deserialize(serialize_key(key), written) == (key, value)
    assert serialize_value(value) == written
