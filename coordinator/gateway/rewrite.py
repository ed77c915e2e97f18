"""Address rewriting of upstream responses: every broker a client learns of is a kgc listener.

Clients send FindCoordinator to any broker they know, so no upstream address may reach
them (docs/ARCHITECTURE.md, "Why kgc is a gateway"); node ids are kept so partition leadership stays true. Each rewriter
takes a whole response payload (response header + body, no size prefix), walks it only
as far as the addresses go and copies everything else byte for byte, so unknown tagged
fields survive (kafka-python's decode-then-encode would drop them).

| API | versions | what is rewritten |
|---|---|---|
| Metadata | 0-13 | every broker; kgc's coordinator nodes appended (hosting nothing) |
| DescribeCluster | 0-2 | every broker |
| FindCoordinator | 0-6 | v0-3 the top-level node, v4+ each coordinator; node id < 0 untouched |
| Produce | 10-13 | NodeEndpoints, top-level tag 0 (KIP-951) |
| Fetch | 16-18 | NodeEndpoints, top-level tag 0 (KIP-951) |

Response header v1 (a tagged-field section after the correlation id) goes with the
flexible versions of each API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafka.protocol.api_key import ApiKey

from protocol import wire
from protocol.wire import MalformedResponse, Reader

AddressFor = Callable[[int], tuple[str, int]]

# The newest version of each rewritten API whose layout this module knows. ApiVersions
# never advertises more: a newer layout could carry an address we would pass through.
REWRITE_MAX_VERSIONS: dict[int, int] = {
    ApiKey.Metadata: 13,
    ApiKey.DescribeCluster: 2,
    ApiKey.FindCoordinator: 6,
    ApiKey.Produce: 13,
    ApiKey.Fetch: 18,
}

_NODE_ENDPOINTS_TAG = 0


@dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class _Splice:
    """Builds the output as the input with some byte ranges replaced, in order."""

    __slots__ = ("_buf", "_parts", "_copied")

    def __init__(self, buf: bytes):
        self._buf = buf
        self._parts: list[bytes] = []
        self._copied = 0

    def replace(self, start: int, end: int, data: bytes) -> None:
        self._parts.append(self._buf[self._copied:start])
        self._parts.append(data)
        self._copied = end

    def result(self) -> bytes:
        if not self._parts:
            return self._buf
        self._parts.append(self._buf[self._copied:])
        return b"".join(self._parts)


def _body_reader(payload: bytes, flexible: bool) -> Reader:
    r = Reader(payload, 4)  # correlation id
    if flexible:
        r.skip_tagged()
    return r


def _check_version(api_key: int, version: int, low: int = 0) -> None:
    if not low <= version <= REWRITE_MAX_VERSIONS[api_key]:
        raise MalformedResponse(f"cannot rewrite {ApiKey(api_key).name} v{version}")


def _address(host_port: tuple[str, int], flexible: bool) -> bytes:
    host, port = host_port
    return wire.string(host, flexible) + wire.int32(port)


def rewrite_metadata(payload: bytes, version: int, address_for: AddressFor,
                     coordinators: Sequence[Broker]) -> tuple[bytes, list[Broker]]:
    """Returns the rewritten payload and the upstream brokers as upstream listed them.
    `coordinators`: every node a FindCoordinator may name (one per kgc instance)."""
    _check_version(ApiKey.Metadata, version)
    flexible = version >= 9
    r = _body_reader(payload, flexible)
    if version >= 3:
        r.skip(4)  # throttle_time_ms
    count_start = r.pos
    n = r.count(flexible)
    if n < 0:
        raise MalformedResponse("Metadata brokers is null")
    count_end = r.pos
    seen: list[Broker] = []
    addresses: list[tuple[int, int, int]] = []
    for _ in range(n):
        node_id = r.int32()
        host_start = r.pos
        host = r.string(flexible)
        port = r.int32()
        address_end = r.pos
        if host is None:
            raise MalformedResponse(f"Metadata broker {node_id} has a null host")
        rack = r.string(flexible) if version >= 1 else None
        if flexible:
            r.skip_tagged()
        seen.append(Broker(node_id, host, port, rack))
        addresses.append((host_start, address_end, node_id))
    # kafkajs looks the coordinator up among these brokers, and librdkafka forgets
    # brokers that metadata stops listing: the group coordinator too, which it then finds
    # again and forgets again at the next Metadata, until its session times out.
    listed = {b.node_id for b in seen}
    missing = [c for c in coordinators if c.node_id not in listed]
    out = _Splice(payload)
    out.replace(count_start, count_end, wire.count(n + len(missing), flexible))
    for start, end, node_id in addresses:
        out.replace(start, end, _address(address_for(node_id), flexible))
    if missing:
        out.replace(r.pos, r.pos, b"".join(_metadata_broker(c, version, flexible) for c in missing))
    return out.result(), seen


def _metadata_broker(node: Broker, version: int, flexible: bool) -> bytes:
    entry = wire.int32(node.node_id) + _address((node.host, node.port), flexible)
    if version >= 1:
        entry += wire.string(node.rack, flexible)
    if flexible:
        entry += wire.tagged([])
    return entry


def rewrite_describe_cluster(payload: bytes, version: int, address_for: AddressFor) -> bytes:
    _check_version(ApiKey.DescribeCluster, version)
    r = _body_reader(payload, True)  # flexible from v0
    r.skip(6)  # throttle_time_ms, error_code
    r.skip_string(True)  # error_message
    if version >= 1:
        r.skip(1)  # endpoint_type
    r.skip_string(True)  # cluster_id
    r.skip(4)  # controller_id
    out = _Splice(payload)
    for _ in range(r.count(True)):
        _rewrite_node_address(r, out, address_for, True)
        r.skip_string(True)  # rack
        if version >= 2:
            r.skip(1)  # is_fenced
        r.skip_tagged()
    return out.result()


def rewrite_find_coordinator(payload: bytes, version: int, address_for: AddressFor) -> bytes:
    """Rewrites answers that name a node; errors (node id -1) keep what upstream sent."""
    _check_version(ApiKey.FindCoordinator, version)
    flexible = version >= 3
    r = _body_reader(payload, flexible)
    if version >= 1:
        r.skip(4)  # throttle_time_ms
    out = _Splice(payload)
    if version <= 3:
        r.skip(2)  # error_code
        if version >= 1:
            r.skip_string(flexible)  # error_message
        _rewrite_node_address(r, out, address_for, flexible)
        return out.result()
    # v4+ (KIP-699): one entry per coordinator key
    for _ in range(r.count(True)):
        r.skip_string(True)  # key
        _rewrite_node_address(r, out, address_for, True)
        r.skip(2)  # error_code
        r.skip_string(True)  # error_message
        r.skip_tagged()
    return out.result()


def _rewrite_node_address(r: Reader, out: _Splice, address_for: AddressFor, flexible: bool) -> None:
    """`node_id int32, host string, port int32`: host and port become kgc's listener for
    that node. A negative id names no node (e.g. FindCoordinator's error answer): untouched."""
    node_id = r.int32()
    start = r.pos
    r.skip_string(flexible)
    r.skip(4)
    if node_id >= 0:
        out.replace(start, r.pos, _address(address_for(node_id), flexible))


def rewrite_produce(payload: bytes, version: int, address_for: AddressFor) -> bytes:
    """KIP-951, Version 10: NodeEndpoints names the new leaders of NOT_LEADER partitions."""
    if version < 10:
        return payload
    _check_version(ApiKey.Produce, version)
    r = _body_reader(payload, True)
    for _ in range(r.count(True)):
        if version >= 13:
            r.skip(16)  # topic_id
        else:
            r.skip_string(True)  # name
        for _ in range(r.count(True)):
            r.skip(30)  # index, error_code, base_offset, log_append_time_ms, log_start_offset
            for _ in range(r.count(True)):  # record_errors
                r.skip(4)
                r.skip_string(True)
                r.skip_tagged()
            r.skip_string(True)  # error_message
            r.skip_tagged()  # current_leader lives here
        r.skip_tagged()
    r.skip(4)  # throttle_time_ms
    return _rewrite_node_endpoints(payload, r, address_for)


# KIP-951: from this version a Fetch response's NodeEndpoints name the new leaders of
# NOT_LEADER partitions.
FETCH_NODE_ENDPOINTS_VERSION = 16


def rewrites_fetch(version: int) -> bool:
    return version >= FETCH_NODE_ENDPOINTS_VERSION


def rewrite_fetch(payload: bytes, version: int, address_for: AddressFor) -> bytes:
    if not rewrites_fetch(version):
        return payload
    _check_version(ApiKey.Fetch, version)
    r = _body_reader(payload, True)
    r.skip(10)  # throttle_time_ms, error_code, session_id
    for _ in range(r.count(True)):
        r.skip(16)  # topic_id
        for _ in range(r.count(True)):
            r.skip(30)  # partition_index, error_code, high_watermark, last_stable_offset, log_start_offset
            for _ in range(r.count(True)):  # aborted_transactions (nullable: -1 runs no loop)
                r.skip(16)
                r.skip_tagged()
            r.skip(4)  # preferred_read_replica
            r.skip_bytes(True)  # records
            r.skip_tagged()  # diverging_epoch, current_leader, snapshot_id live here
        r.skip_tagged()
    return _rewrite_node_endpoints(payload, r, address_for)


def _rewrite_node_endpoints(payload: bytes, r: Reader, address_for: AddressFor) -> bytes:
    section_start = r.pos
    fields = r.tagged()
    if not r.at_end():
        raise MalformedResponse(f"{len(payload) - r.pos} bytes after the last field")
    if not any(tag == _NODE_ENDPOINTS_TAG for tag, _ in fields):
        return payload
    rewritten = [(tag, _node_endpoints(data, address_for) if tag == _NODE_ENDPOINTS_TAG else data)
                 for tag, data in fields]
    # One copy of what comes before (a Fetch response's records: megabytes), not two.
    return b"".join((memoryview(payload)[:section_start], wire.tagged(rewritten)))


def _node_endpoints(data: bytes, address_for: AddressFor) -> bytes:
    r = Reader(data)
    out = _Splice(data)
    for _ in range(r.count(True)):
        _rewrite_node_address(r, out, address_for, True)
        r.skip_string(True)  # rack
        r.skip_tagged()
    if not r.at_end():
        raise MalformedResponse("trailing bytes in NodeEndpoints")
    return out.result()
