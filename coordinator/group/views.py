"""Plain answers of the multi-group and read APIs; the service shapes them per version."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from protocol.errors import ErrorCode
from protocol.topics_frame import OffsetColumns


class OffsetFetchPartition(NamedTuple):
    """A tuple, not a frozen dataclass: an OffsetFetch makes one per partition, and a
    frozen dataclass's `__init__` sets each field with a call of its own. Its fields are in
    the order `protocol.offset_fetch_codec.offset_fetch_response` takes a partition's answer."""

    partition: int
    offset: int                  # -1: no committed offset
    leader_epoch: int            # -1: none
    metadata: str
    error: ErrorCode = ErrorCode.NONE


class FetchedOffsets(OffsetColumns):
    """A topic's fetched offsets as the codec packs them (`OffsetColumns`): the partitions
    asked and, for each, its stored `OffsetCommitValue`. Read one by one, they are
    `OffsetFetchPartition`s."""

    __slots__ = ()

    @staticmethod
    def row(index: int, value: tuple) -> OffsetFetchPartition:
        return OffsetFetchPartition(index, value[0], value[1], value[2])


# A topic's answers: as fetched (columns), or one by one.
FetchedPartitions = FetchedOffsets | Sequence[OffsetFetchPartition]


@dataclass(frozen=True, slots=True)
class OffsetFetchTopic:
    name: str
    partitions: FetchedPartitions


@dataclass(frozen=True, slots=True)
class OffsetFetchGroup:
    group_id: str
    error: ErrorCode
    topics: tuple[OffsetFetchTopic, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes       # b"" unless the group is Stable
    member_assignment: bytes     # b"" unless the group is Stable


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    error_message: str | None
    state: str                   # as Kafka prints it: "Empty", "PreparingRebalance", ..., "Dead"
    protocol_type: str
    protocol_data: str           # the selected protocol, only when Stable
    members: tuple[DescribedMember, ...]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"
