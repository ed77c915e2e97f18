"""FindCoordinator: one key before v4, a batch of keys from v4 on (KIP-699)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import FindCoordinatorResponse

from protocol.answers.common import UNKNOWN_NODE_ID, UNKNOWN_PORT, requested


def find_coordinator_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    cls = FindCoordinatorResponse
    if version < 4:
        return cls(version=version, throttle_time_ms=0, error_code=code, error_message=message,
                   node_id=UNKNOWN_NODE_ID, host="", port=UNKNOWN_PORT)
    keys = requested(request, api, version, "coordinator key").coordinator_keys
    return cls(version=version, throttle_time_ms=0, coordinators=[
        cls.Coordinator(version=version, key=key, node_id=UNKNOWN_NODE_ID, host="", port=UNKNOWN_PORT,
                        error_code=code, error_message=message)
        for key in keys])
