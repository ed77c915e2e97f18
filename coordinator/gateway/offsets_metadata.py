"""`__consumer_offsets` in Metadata answers: kgc's log, listed as the internal topic it is.

Upstream's Metadata answer passes through the gateway (`rewrite.py`); when the client
asked for every topic, or named `__consumer_offsets`, this module splices in one topic
entry: internal, one partition per leader given, each led by kgc's own node or, with
several instances, the instance that owns it (its only replica and ISR; none yet:
LEADER_NOT_AVAILABLE), leader epoch -1 (unknown: clients skip epoch validation). An entry
upstream gave for that name (an error, or a topic of its own) is dropped, so clients see
one `__consumer_offsets`, kgc's. Everything else is copied byte for byte.

Metadata response layout walked here (v0-13; flexible from v9):
throttle_time_ms (v3+), brokers [node_id, host, port, rack (v1+), tags], cluster_id (v2+),
controller_id (v1+), topics [error_code, name, topic_id (v10+), is_internal (v1+),
partitions [error_code, partition_index, leader_id, leader_epoch (v7+), replica_nodes [],
isr_nodes [], offline_replicas [] (v5+), tags], topic_authorized_operations (v8+), tags], ...
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from kafka.protocol.metadata import MetadataRequest

from protocol import wire
from protocol.answers.common import AUTHORIZED_OPERATIONS_OMITTED_INT32
from protocol.errors import ErrorCode
from protocol.wire import Reader

TOPIC = "__consumer_offsets"
# Kafka gives each topic a random id at creation; kgc's log is one topic that always
# exists, so its id is fixed (a v5 UUID of the name): the same across restarts.
TOPIC_ID = uuid.uuid5(uuid.NAMESPACE_URL, "kgc:" + TOPIC)
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def wants_offsets_topic(request_body: bytes, version: int) -> bool:
    """Whether a Metadata request asks for `__consumer_offsets`: by name, or all topics
    (v0: an empty list, v1+: null)."""
    try:
        request = MetadataRequest.decode(request_body, version=version)
    except Exception:  # upstream answered it, so it decodes; if not, leave the answer as it is
        return False
    topics = request.topics
    if topics is None or (version == 0 and not topics):
        return True
    return any(t.name == TOPIC for t in topics)


def add_offsets_topic(payload: bytes, version: int, leaders: Sequence[int | None]) -> bytes:
    """The Metadata response `payload` (header + body) with kgc's `__consumer_offsets`,
    partition p led by node `leaders[p]`."""
    flexible = version >= 9
    r = Reader(payload, 4)
    if flexible:
        r.skip_tagged()
    if version >= 3:
        r.skip(4)
    for _ in range(r.count(flexible)):
        r.skip(4)
        r.skip_string(flexible)
        r.skip(4)
        if version >= 1:
            r.skip_string(flexible)
        if flexible:
            r.skip_tagged()
    if version >= 2:
        r.skip_string(flexible)
    if version >= 1:
        r.skip(4)
    count_start = r.pos
    n = max(r.count(flexible), 0)
    kept: list[bytes] = []
    for _ in range(n):
        start = r.pos
        r.skip(2)
        name = r.string(flexible)
        _skip_topic_rest(r, version, flexible)
        if name != TOPIC:
            kept.append(payload[start:r.pos])
    kept.append(topic_entry(version, leaders))
    return (payload[:count_start] + wire.count(len(kept), flexible) + b"".join(kept)
            + payload[r.pos:])


def _skip_topic_rest(r: Reader, version: int, flexible: bool) -> None:
    if version >= 10:
        r.skip(16)
    if version >= 1:
        r.skip(1)
    for _ in range(r.count(flexible)):
        r.skip(10 + (4 if version >= 7 else 0))
        for _ in range(3 if version >= 5 else 2):
            r.skip(4 * max(r.count(flexible), 0))
        if flexible:
            r.skip_tagged()
    if version >= 8:
        r.skip(4)
    if flexible:
        r.skip_tagged()


def topic_entry(version: int, leaders: Sequence[int | None]) -> bytes:
    flexible = version >= 9
    out = [_INT16.pack(0), wire.string(TOPIC, flexible)]
    if version >= 10:
        out.append(TOPIC_ID.bytes)
    if version >= 1:
        out.append(b"\x01")  # is_internal
    out.append(wire.count(len(leaders), flexible))
    for p, node_id in enumerate(leaders):
        if node_id is None:
            nodes = wire.count(0, flexible)
            out += [_INT16.pack(ErrorCode.LEADER_NOT_AVAILABLE), _INT32.pack(p), _INT32.pack(-1)]
        else:
            nodes = wire.count(1, flexible) + _INT32.pack(node_id)
            out += [_INT16.pack(0), _INT32.pack(p), _INT32.pack(node_id)]
        if version >= 7:
            out.append(_INT32.pack(-1))  # leader epoch unknown
        out += [nodes, nodes]
        if version >= 5:
            out.append(wire.count(0, flexible))
        if flexible:
            out.append(wire.tagged([]))
    if version >= 8:
        out.append(_INT32.pack(AUTHORIZED_OPERATIONS_OMITTED_INT32))
    if flexible:
        out.append(wire.tagged([]))
    return b"".join(out)
