"""A decoded record's value as the type its key says.

`records.deserialize` decodes a value by its key's type, but types the two apart (any
key, any value): the readers here, which dispatch on the key, take the value back as
the key's own value type with these. A value of another type is a decoder bug, not
damage in the log, so it raises TypeError rather than becoming a finding.
"""

from __future__ import annotations

from typing import TypeVar, overload

from coordinator.records import ConsumerGroupValue, RecordValue

V = TypeVar("V")


@overload
def value_as(kind: type[V], value: RecordValue) -> V: ...
@overload
def value_as(kind: type[V], value: RecordValue | None) -> V | None: ...
def value_as(kind: type[V], value: RecordValue | None) -> V | None:
    """`value` (None: a tombstone) of a record whose key's values are `kind`s."""
    if value is None or isinstance(value, kind):
        return value
    raise TypeError(f"a record's value decoded as {type(value).__name__}, its key's is {kind.__name__}")


def consumer_group_value(value: RecordValue | None) -> ConsumerGroupValue | None:
    """`value_as` for the KIP-848 consumer group records (a union of value types)."""
    if value is None or isinstance(value, ConsumerGroupValue):
        return value
    raise TypeError(f"a consumer group record's value decoded as {type(value).__name__}")
