"""The ConsumerProtocolSubscription a classic consumer puts in its JoinGroup, read in one
place with kafka-python's codec: the classic group reads its topics (what the group is
subscribed to), and where the two protocols meet (a classic member inside a consumer
group, converting a group) read the whole of it. Both protocols' packages use it, so it
lives beside them.
"""

from __future__ import annotations

import struct

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

MALFORMED_ERRORS = (struct.error, ValueError, UnicodeDecodeError, IndexError, TypeError, EOFError)
_VERSION = struct.Struct(">h")


class MalformedProtocol(ValueError):
    """Embedded consumer protocol bytes that do not decode."""


def decode_subscription(metadata: bytes) -> ConsumerProtocolSubscription:
    try:
        return ConsumerProtocolSubscription.decode(metadata)
    except MALFORMED_ERRORS as exc:
        raise MalformedProtocol(f"malformed consumer protocol subscription: {exc}") from None


def subscribed_topics(metadata: bytes) -> list[str] | None:
    """The topics a member subscribes to, or None when its subscription does not decode."""
    try:
        return list(decode_subscription(metadata).topics)
    except MalformedProtocol:
        return None


def subscription_version(metadata: bytes) -> int:
    """The version the member writes, which its assignment is written back in (Kafka's
    `ConsumerProtocol.deserializeVersion`), capped at the versions the codec knows."""
    try:
        (version,) = _VERSION.unpack_from(metadata, 0)
    except struct.error:
        raise MalformedProtocol("consumer protocol subscription without a version") from None
    return max(0, min(version, ConsumerProtocolAssignment.max_version))
