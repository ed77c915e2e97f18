"""FindCoordinator: one key before v4, a batch of keys from v4 on (KIP-699)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import FindCoordinatorResponse

from protocol.answers.common import UNKNOWN_NODE_ID, UNKNOWN_PORT, requested
from protocol.errors import ErrorCode


def find_coordinator_response(version: int, node: Any) -> ApiMessage:
    """v0-3: the coordinator of the one key asked about (`node`: a `CoordinatorNode`)."""
    return FindCoordinatorResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                   error_message=None, node_id=node.node_id, host=node.host, port=node.port)


def coordinator_entry(version: int, key: str, node: Any, code: int = ErrorCode.NONE,
                      message: str | None = None) -> Any:
    """v4+: one key's entry; `node` None (with a code) when it has no coordinator."""
    if node is None:
        return FindCoordinatorResponse.Coordinator(version=version, key=key, node_id=UNKNOWN_NODE_ID, host="",
                                                   port=UNKNOWN_PORT, error_code=code, error_message=message)
    return FindCoordinatorResponse.Coordinator(version=version, key=key, node_id=node.node_id, host=node.host,
                                               port=node.port, error_code=code, error_message=message)


def find_coordinators_response(version: int, coordinators: list[Any]) -> ApiMessage:
    """v4+ (KIP-699): one `coordinator_entry` per key asked about."""
    return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)


def find_coordinator_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    if version < 4:
        return FindCoordinatorResponse(version=version, throttle_time_ms=0, error_code=code, error_message=message,
                                       node_id=UNKNOWN_NODE_ID, host="", port=UNKNOWN_PORT)
    keys = requested(request, api, version, "coordinator key").coordinator_keys
    return find_coordinators_response(version, [coordinator_entry(version, key, None, code, message)
                                                for key in keys])
