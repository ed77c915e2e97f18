"""Kafka wire primitives: unsigned varints, tagged-field sections, and a cursor over a message.

Non-flexible versions encode strings with an int16 length and arrays with an int32
count (-1 = null); flexible versions (KIP-482) use an unsigned varint of n+1 (0 = null)
and end every struct with a tagged-field section: a varint count, then (tag varint,
size varint, bytes) per field.

`read_uvarint`/`skip_tagged_fields` raise `WireError`; callers name the failure for their
own context (a bad request header, a malformed response). `Reader` is the cursor the
gateway's rewriters walk a response with: they read only as far as they must and copy
the rest as bytes, so they need a cursor, not a codec.
"""

from __future__ import annotations

import struct

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class WireError(ValueError):
    """Bytes that do not read as the primitive asked for (a varint, a tagged-field section)."""


def skip_tagged_fields(payload: bytes | bytearray | memoryview, pos: int) -> int:
    """Return the offset after the tagged-field section starting at `pos`."""
    count, pos = read_uvarint(payload, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(payload, pos)
        size, pos = read_uvarint(payload, pos)
        pos += size
        if pos > len(payload):
            raise WireError(f"tagged field of {size} bytes runs past the {len(payload)}-byte payload")
    return pos


def read_uvarint(payload: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint as Kafka writes it (at most 5 bytes for 32 bits)."""
    end = len(payload)
    value = 0
    for shift in range(0, 35, 7):
        if pos >= end:
            raise WireError("varint runs past the end of the payload")
        byte = payload[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value > 0xFFFFFFFF:
                break
            return value, pos
    raise WireError("varint longer than 32 bits")


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128 varint, as `read_uvarint` reads it."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class MalformedResponse(ValueError):
    """A response that does not parse as its api key and version say it should."""


class Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0):
        self.buf = buf
        self.pos = pos

    def _need(self, n: int) -> int:
        start = self.pos
        end = start + n
        if n < 0 or end > len(self.buf):
            raise MalformedResponse(f"need {n} bytes at {start}, have {len(self.buf) - start}")
        self.pos = end
        return start

    def skip(self, n: int) -> None:
        self._need(n)

    def int16(self) -> int:
        return _INT16.unpack_from(self.buf, self._need(2))[0]

    def int32(self) -> int:
        return _INT32.unpack_from(self.buf, self._need(4))[0]

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos)
        except WireError as exc:
            raise MalformedResponse(str(exc)) from None
        return value

    def length(self, compact: bool) -> int:
        """A string/bytes length or an array count; -1 means null."""
        if compact:
            return self.uvarint() - 1
        return self.int16()

    def count(self, compact: bool) -> int:
        return self.uvarint() - 1 if compact else self.int32()

    def string(self, compact: bool) -> str | None:
        n = self.length(compact)
        if n < 0:
            return None
        start = self._need(n)
        try:
            return bytes(self.buf[start:self.pos]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedResponse(f"string at {start} is not UTF-8") from exc

    def skip_string(self, compact: bool) -> None:
        n = self.length(compact)
        if n > 0:
            self._need(n)

    def skip_bytes(self, compact: bool) -> None:
        """BYTES/RECORDS: int32 length when not flexible, varint n+1 when flexible."""
        n = self.count(compact)
        if n > 0:
            self._need(n)

    def skip_tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._need(self.uvarint())

    def tagged(self) -> list[tuple[int, bytes]]:
        fields = []
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            start = self._need(size)
            fields.append((tag, bytes(self.buf[start:self.pos])))
        return fields

    def at_end(self) -> bool:
        return self.pos == len(self.buf)


def int32(n: int) -> bytes:
    return _INT32.pack(n)


def count(n: int, compact: bool) -> bytes:
    return encode_uvarint(n + 1) if compact else _INT32.pack(n)


def string(s: str | None, compact: bool) -> bytes:
    if s is None:
        return encode_uvarint(0) if compact else _INT16.pack(-1)
    data = s.encode("utf-8")
    return (encode_uvarint(len(data) + 1) if compact else _INT16.pack(len(data))) + data


def tagged(fields: list[tuple[int, bytes]]) -> bytes:
    out = [encode_uvarint(len(fields))]
    for tag, data in fields:
        out += (encode_uvarint(tag), encode_uvarint(len(data)), data)
    return b"".join(out)
