"""The response frame the hand-written OffsetCommit and OffsetFetch (v0-7) codecs share:
size, correlation id, [flexible] empty header tags, then a body of [throttle_time_ms
int32], topics []: name string, partitions [] (packed by the codec), [error_code int16].

Answers None, for kafka-python to encode (or refuse) instead, when a flexible struct
carries tagged fields or a value is not one the field can hold.

A topic's partitions are either kafka-python's objects or, as kgc builds its own answers,
`PartitionTuples` (plain tuples in the order of the partition's fields on the wire) or
`OffsetColumns` (an OffsetFetch's offsets as columns). A large answer is packed straight
from those; kafka-python's objects are made from them only when kafka-python must encode
the answer after all.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from protocol.wire import count, encode_uvarint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_FRAME_HEAD = struct.Struct(">ii")
_TAGS = attrgetter("tags")
_UNKNOWN_TAGS = attrgetter("unknown_tags")


class PartitionTuples(list):
    """A topic's partition answers as tuples of the partition's fields, in wire order
    (each codec names its order). They carry no tagged fields."""

    __slots__ = ()


class OffsetColumns:
    """One topic's OffsetFetch answers as two columns: `indexes`, the partitions asked, and
    `values`, for each a tuple whose first three items are its committed offset, leader
    epoch and metadata (kgc's stored record value, or one standing for "none"). Every
    error code is NONE. A consumer fetches every partition it owns at once, so the answer
    is built from a dict lookup per partition in C (`map`) and packed column by column,
    each column one C-level pass, with no answer object per partition. Read as a sequence,
    the partitions are tuples in wire order (`row`); they carry no tagged fields."""

    __slots__ = ("indexes", "values")

    def __init__(self, indexes: list[int], values: list[tuple]):
        self.indexes = indexes
        self.values = values

    @staticmethod
    def row(index: int, value: tuple) -> tuple:
        return index, value[0], value[1], value[2], 0

    def __len__(self) -> int:
        return len(self.indexes)

    def __iter__(self):
        return map(self.row, self.indexes, self.values)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(map(self.row, self.indexes[i], self.values[i]))
        return self.row(self.indexes[i], self.values[i])

    def __eq__(self, other: object) -> bool:
        try:
            return tuple(self) == tuple(other)      # type: ignore[arg-type]
        except TypeError:
            return NotImplemented

    __hash__ = None     # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


# Partitions kgc built itself: no tagged fields to look for.
BUILT_PARTITIONS = (PartitionTuples, OffsetColumns)


# Appends the encoding of a topic's partitions (for flexible versions, each closed by
# its empty tagged-field section) to the frame's parts.
PackPartitions = Callable[[list[bytes], int, list[Any]], None]


def topics_response_frame(correlation_id: int, version: int, response: Any, *, flexible: bool,
                          throttle_since: int, error_code_since: int | None,
                          pack_partitions: PackPartitions, by_id: bool = False) -> bytes | None:
    """`response`'s whole frame at `version`: throttle_time_ms from `throttle_since`, a
    top-level error_code from `error_code_since` (None: never); topics named by id when
    `by_id`."""
    if flexible and (response.tags or response.unknown_tags):
        return None
    try:
        parts = [b"", b"\x00" if flexible else b""]    # size and correlation id; header tags
        if version >= throttle_since:
            parts.append(_INT32.pack(response.throttle_time_ms))
        if not append_topics(parts, version, response.topics, flexible=flexible, pack_partitions=pack_partitions,
                             by_id=by_id):
            return None
        if error_code_since is not None and version >= error_code_since:
            parts.append(_INT16.pack(response.error_code))
        if flexible:
            parts.append(b"\x00")
    except FRAME_ERRORS:
        return None
    return finish_frame(parts, correlation_id)


# What a value no field can hold raises while a frame is packed: the frame is then left
# to kafka-python, which encodes or refuses it.
FRAME_ERRORS = (struct.error, AttributeError, TypeError, UnicodeEncodeError)


def finish_frame(parts: list[bytes], correlation_id: int) -> bytes:
    """`parts`, whose first is a placeholder for the size and correlation id, as one frame."""
    parts[0] = _FRAME_HEAD.pack(4 + sum(map(len, parts)), correlation_id)
    return b"".join(parts)


def append_topics(parts: list[bytes], version: int, topics: list[Any], *, flexible: bool,
                  pack_partitions: PackPartitions, by_id: bool = False) -> bool:
    """Appends `topics` (an array of name or, `by_id`, topic id; then partitions); False,
    with nothing to use in `parts`, when a flexible struct carries tagged fields."""
    parts.append(count(len(topics), flexible))
    for topic in topics:
        partitions = topic.partitions
        if flexible and (topic.tags or topic.unknown_tags or (
                not isinstance(partitions, BUILT_PARTITIONS)
                and (any(map(_TAGS, partitions)) or any(map(_UNKNOWN_TAGS, partitions))))):
            return False     # only flexible versions carry tagged fields
        parts += (topic.topic_id.bytes if by_id else string(topic.name, flexible), count(len(partitions), flexible))
        pack_partitions(parts, version, partitions)
        if flexible:
            parts.append(b"\x00")
    return True


def string(s: str, flexible: bool) -> bytes:
    """A string that is not nullable: int16 length, or (flexible) uvarint length+1."""
    if not isinstance(s, str):
        raise TypeError("not a str")
    data = s.encode("utf-8")
    return (encode_uvarint(len(data) + 1) if flexible else _INT16.pack(len(data))) + data
