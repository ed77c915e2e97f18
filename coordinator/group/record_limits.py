"""What the `__consumer_offsets` record schemas can hold, checked before a request is decided.

Every string a key or value carries (group id, member id, instance id, client id and
host, protocol type and name, topic, rack, assignor, regular expression) is written with
an int16 length: at most 32,767 bytes of UTF-8. Flexible request versions carry strings
with uvarint lengths, so a client can send longer ones; such a request is refused here,
before any state changes, and nothing is written. Kafka has no clean answer (its record
serializer throws, which answers UNKNOWN_SERVER_ERROR); kgc answers INVALID_GROUP_ID for
a group id (Kafka's code for a group id it cannot use) and INVALID_REQUEST for any other
field, with a message naming the field. Offset metadata keeps its own, smaller bound
(`offset_metadata_max_bytes`, OFFSET_METADATA_TOO_LARGE per partition), and byte fields
(subscriptions, assignments) have int32 lengths, as in the requests.

Member ids kgc makes are a prefix (the instance id or the client id) plus a 37-byte
suffix (`-` and a UUID), so a prefix must leave room for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.errors import ApiError, ErrorCode

MAX_STRING_BYTES = 0x7FFF
MEMBER_ID_SUFFIX_BYTES = 37
# A character is at most 4 bytes of UTF-8: a string this short fits without encoding it.
_SURELY_FITS = MAX_STRING_BYTES // 4


def fits(value: str | None, limit: int = MAX_STRING_BYTES) -> bool:
    return value is None or len(value) <= _SURELY_FITS or len(value.encode("utf-8", "surrogatepass")) <= limit


def check_group_id(group_id: str) -> None:
    if not fits(group_id):
        raise ApiError(ErrorCode.INVALID_GROUP_ID, f"group id is longer than {MAX_STRING_BYTES} bytes")


def check_fields(fields: Iterable[tuple[str, str | None]]) -> None:
    for name, value in fields:
        if not fits(value):
            raise ApiError(ErrorCode.INVALID_REQUEST, f"{name} is longer than {MAX_STRING_BYTES} bytes")


def check_member_id_prefix(name: str, prefix: str) -> None:
    if not fits(prefix, MAX_STRING_BYTES - MEMBER_ID_SUFFIX_BYTES):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{name} leaves no room for a member id suffix")


def check_join(client_id: str, request) -> None:
    """JoinGroup: every string its member and the group's snapshot records carry."""
    check_fields((("member id", request.member_id), ("group instance id", request.group_instance_id),
                  ("protocol type", request.protocol_type)))
    check_fields(("protocol name", p.name) for p in request.protocols)
    if request.member_id == "":
        if request.group_instance_id is not None:
            check_member_id_prefix("group instance id", request.group_instance_id)
        else:
            check_member_id_prefix("client id", client_id)


def check_commit_topics(names: Iterable[str | None]) -> None:
    """OffsetCommit: each topic is part of its offset's key."""
    check_fields(("topic", name) for name in names)


def check_consumer_heartbeat(client_id: str, request, regex: str | None) -> None:
    """ConsumerGroupHeartbeat: the member's metadata record and its subscription."""
    check_fields((("member id", request.member_id), ("instance id", request.instance_id),
                  ("rack id", request.rack_id), ("server assignor", request.server_assignor),
                  ("subscribed topic regex", regex)))
    check_fields(("subscribed topic name", name) for name in request.subscribed_topic_names or ())
    if not request.member_id:
        check_member_id_prefix("client id", client_id or "consumer")
