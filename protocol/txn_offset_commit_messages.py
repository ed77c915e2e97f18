"""TxnOffsetCommit (28) to v6, which kafka-python 3 ships only to v5: v6 (KIP-1319, Kafka
4.4) names topics by id instead of by name, and its generation field carries a KIP-848
member's epoch. Schemas in Kafka's JSON format (`protocol/schemas/`), written from the field
lists of Kafka 4.4's `TxnOffsetCommit*.json`; the generation keeps its v0-5 name,
`generation_id`, since only its meaning for consumer groups changed."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from protocol import schemas


# `load_json` goes to kafka-python's metaclass, which mypy does not see.
class TxnOffsetCommitRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class TxnOffsetCommitResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass
