"""Sans-IO request framing: bytes in, whole request payloads out.

A Kafka frame is a big-endian int32 size followed by that many bytes (request header +
body). The size is checked before any buffer for the payload exists, so a client that
announces 2 GiB costs us four bytes (Kafka `NetworkReceive.readFrom` refuses a negative
size or one above `socket.request.max.bytes` the same way). The payload buffer then grows
only as bytes arrive, so an announced size is never allocated up front either.

Fast path: many small frames in one read are sliced straight out of that read. Slow
path: a frame split across reads is gathered in one bytearray, so N reads cost O(size).
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be framed: the connection must close."""


class InvalidFrame(FrameError):
    pass


class FrameTooLarge(FrameError):
    pass


class FrameReader:
    __slots__ = ("_max_frame_bytes", "_size_prefix", "_partial", "_remaining")

    def __init__(self, max_frame_bytes: int):
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self._max_frame_bytes = max_frame_bytes
        self._size_prefix = b""  # 0-3 bytes of a size split across reads
        self._partial: bytearray | None = None  # payload being gathered
        self._remaining = 0  # bytes still missing from _partial

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an incomplete frame (size prefix and payload so far)."""
        held = len(self._size_prefix)
        if self._partial is not None:
            held += 4 + len(self._partial)
        return held

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Take the next bytes of the stream; return the payloads completed by them, in order."""
        frames: list[bytes] = []
        view = memoryview(data)
        end = len(view)
        pos = 0
        if self._partial is not None:
            pos = self._continue_partial(view, frames)
        while pos < end:
            if self._size_prefix or end - pos < 4:
                needed = 4 - len(self._size_prefix)
                self._size_prefix += bytes(view[pos:pos + needed])
                pos += min(needed, end - pos)
                if len(self._size_prefix) < 4:
                    break
                size = self._check_size(_SIZE.unpack(self._size_prefix)[0])
                self._size_prefix = b""
            else:
                size = self._check_size(_SIZE.unpack_from(view, pos)[0])
                pos += 4
            if end - pos >= size:
                frames.append(bytes(view[pos:pos + size]))
                pos += size
            else:
                self._partial = bytearray(view[pos:])
                self._remaining = size - (end - pos)
                break
        return frames

    def _continue_partial(self, view: memoryview, frames: list[bytes]) -> int:
        take = min(self._remaining, len(view))
        self._partial += view[:take]
        self._remaining -= take
        if self._remaining == 0:
            frames.append(bytes(self._partial))
            self._partial = None
        return take

    def _check_size(self, size: int) -> int:
        if size < 0:
            raise InvalidFrame(f"negative frame size {size}")
        if size > self._max_frame_bytes:
            raise FrameTooLarge(f"frame size {size} exceeds the limit of {self._max_frame_bytes} bytes")
        return size
