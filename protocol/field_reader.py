"""The reader the hand-written request decoders share (OffsetCommit, OffsetFetch v0-7):
a position in the body and one method per field type, for the well-formed common case.

Anything else raises `Malformed` (a null or negative length where none may be, a null in
a field that is not nullable, a length past the body, tagged fields), and the decoder
answers None so that `protocol.messages` falls back to kafka-python, which refuses or
logs exactly as it always has. Short bodies raise `struct.error` or `IndexError`, bytes
that are not UTF-8 `UnicodeDecodeError`, an overlong varint `WireError`: `MALFORMED`
names them all.
"""

from __future__ import annotations

import struct
from uuid import UUID

from protocol.wire import WireError, read_uvarint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class Malformed(Exception):
    """Anything but the common case: kafka-python must judge these bytes."""


# What a hand decoder catches to answer None.
MALFORMED = (Malformed, WireError, IndexError, struct.error, UnicodeDecodeError)


class ClassicReader:
    """Non-flexible fields: int16 string lengths, int32 array counts, no tagged fields."""

    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview):
        self.data = data
        self.pos = 0

    def _string_size(self) -> int:
        """A string's length, -1 for null."""
        size = _INT16.unpack_from(self.data, self.pos)[0]
        if size < -1:
            raise Malformed
        self.pos += 2
        return size

    def string(self, nullable: bool = False) -> str | None:
        size = self._string_size()
        if size == -1:
            if not nullable:
                raise Malformed
            return None
        data, pos = self.data, self.pos
        end = pos + size
        if end > len(data):
            raise Malformed
        self.pos = end
        return str(data[pos:end], "utf-8")

    def _count(self) -> int:
        """An array's length, -1 for null."""
        n = _INT32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return n

    def count(self) -> int:
        n = self._count()
        if n < 0:
            raise Malformed
        return n

    def nullable_count(self) -> int | None:
        n = self._count()
        if n < -1:
            raise Malformed
        return None if n == -1 else n

    def fixed(self, s: struct.Struct) -> tuple:
        values = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return values

    def uuid(self) -> UUID:
        """A uuid field (a topic id): 16 bytes."""
        end = self.pos + 16
        if end > len(self.data):
            raise Malformed
        value = UUID(bytes=bytes(self.data[self.pos:end]))
        self.pos = end
        return value

    def int32s(self, count: int) -> list[int]:
        """`count` int32s in one unpack."""
        end = self.pos + 4 * count
        if end > len(self.data):
            raise Malformed
        values = list(struct.unpack_from(f">{count}i", self.data, self.pos))
        self.pos = end
        return values

    def tags(self) -> None:
        pass

    def end(self) -> None:
        """Every byte read: trailing bytes are kafka-python's to log."""
        if self.pos != len(self.data):
            raise Malformed


class FlexibleReader(ClassicReader):
    """Flexible fields: unsigned-varint lengths of n+1 (0 = null), an empty tagged-field
    section closing every struct."""

    __slots__ = ()

    def _uvarint(self) -> int:
        value, self.pos = read_uvarint(self.data, self.pos)
        return value

    def _string_size(self) -> int:
        return self._uvarint() - 1      # a compact length: 0 is null

    def _count(self) -> int:
        return self._uvarint() - 1

    def tags(self) -> None:
        if self.data[self.pos] != 0:     # anything but an empty tagged-field section
            raise Malformed
        self.pos += 1
