"""The placeholder values Kafka writes in an answer that has nothing to say."""

from __future__ import annotations

from typing import Any

UNKNOWN_NODE_ID = -1
UNKNOWN_PORT = -1
UNKNOWN_GENERATION_ID = -1
UNKNOWN_OFFSET = -1
# kafka-python models the authorized-operations bitfield as a set of bits; None encodes
# Kafka's "omitted" value, INT32 MIN.
AUTHORIZED_OPERATIONS_OMITTED = None
# The same value where the codec reads the field as a plain int32 (ConsumerGroupDescribe,
# `protocol.consumer_group_messages`, and the gateway's hand-written Metadata answer).
AUTHORIZED_OPERATIONS_OMITTED_INT32 = -2**31


def requested(request: Any, api: Any, version: int, what: str) -> Any:
    """The request of an answer that carries its errors per `what`: without it there is
    nowhere to put the code (ValueError: the caller closes the connection)."""
    if request is None:
        raise ValueError(f"{api.response.name} v{version} carries errors per {what}: the request is needed")
    return request
