"""Which `__consumer_offsets` partition coordinates a group: exactly Kafka's choice.

Kafka computes `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`:
- `String.hashCode` is `h = 31*h + c` over UTF-16 code units (a character outside the
  BMP counts as two units), wrapping at 32 bits;
- `Utils.abs` maps Integer.MIN_VALUE to 0 (Math.abs would leave it negative), so
  "polygenelubricants", whose hash is MIN_VALUE, lands on partition 0.
Matching it keeps kgc's placement identical to what Kafka tools compute.
"""

from __future__ import annotations

import functools
import struct

_INT32_MIN = -(2**31)


def java_string_hash(s: str) -> int:
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for unit in struct.unpack(f">{len(units) // 2}H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


# Longer ids are hashed each time: the cache holds its ids, so it is bounded in bytes
# as well as in entries (65,536 ids of up to 32,767 bytes, which a client may send in a
# few DescribeGroups, would hold 2 GiB), and real group ids are far shorter.
CACHED_ID_CHARS = 256


def partition_for(group_id: str, num_partitions: int = 50) -> int:
    if len(group_id) > CACHED_ID_CHARS:
        return _partition_for(group_id, num_partitions)
    return _cached_partition_for(group_id, num_partitions)


def _partition_for(group_id: str, num_partitions: int) -> int:
    h = java_string_hash(group_id)
    return (0 if h == _INT32_MIN else abs(h)) % num_partitions


# Every request of a group hashes the same id, and the hash loop in Python showed in the
# heartbeat profile (docs/benchmarks/notes.md, "Heartbeat request path"). Bounded, since group ids come from clients.
_cached_partition_for = functools.lru_cache(maxsize=65_536)(_partition_for)
