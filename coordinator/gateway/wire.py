"""Kafka wire primitives for walking responses in place (KIP-482 compact forms included).

The rewriters read a response only as far as they must and copy the rest as bytes, so
they need a cursor, not a codec. Non-flexible versions encode strings with an int16
length and arrays with an int32 count (-1 = null); flexible versions use an unsigned
varint of n+1 (0 = null) and end every struct with a tagged-field section: a varint
count, then (tag varint, size varint, bytes) per field.
"""

from __future__ import annotations

import struct

from protocol.headers import HeaderError, encode_uvarint, read_uvarint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


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
        except HeaderError as exc:
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
