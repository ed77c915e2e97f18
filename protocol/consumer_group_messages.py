"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): the KIP-848 APIs that
kafka-python 3 does not ship, as kafka-python messages over schemas in Kafka's JSON
format (`protocol/schemas/`, written from the field lists of Kafka 4.x's
`ConsumerGroupHeartbeat*.json` / `ConsumerGroupDescribe*.json`).

Both are flexible from v0. Heartbeat v1 adds `SubscribedTopicRegex` (and client-generated
member ids); Describe v1 adds the member's `MemberType`.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from protocol import schemas


# `load_json` goes to kafka-python's metaclass, which mypy does not see.
class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass
