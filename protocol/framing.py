"""Sans-IO request framing: bytes in, whole request payloads out.

A Kafka frame is a big-endian int32 size followed by that many bytes (request header +
body). The size is checked before any buffer for the payload exists, so a client that
announces 2 GiB costs us four bytes (Kafka `NetworkReceive.readFrom` refuses a negative
size or one above `socket.request.max.bytes` the same way). The payload buffer then grows
only as bytes arrive, so an announced size is never allocated up front either.

Fast path: many small frames in one read are sliced straight out of that read. Slow
path: a frame split across reads keeps large reads as they came (views, not copies) and
joins them once when it is whole, so a frame costs one copy whatever the number of reads:
a multi-megabyte Fetch response through the gateway is copied here once, not twice.
Reads under `VIEW_MIN_BYTES` are gathered into a bytearray instead, so a peer dribbling
a frame a byte at a time costs bytes, not an object per byte.

Cut-through: a caller that passes a large frame on as it arrives (the gateway's Fetch
responses) looks at the frame being gathered (`partial_size`, `partial_head`), takes it
over with `take_partial`, reads the rest of it from the stream itself, and feeds the
reader only what follows.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
VIEW_MIN_BYTES = 64 * 1024


class FrameError(Exception):
    """The byte stream cannot be framed: the connection must close."""


class InvalidFrame(FrameError):
    pass


class FrameTooLarge(FrameError):
    pass


class FrameReader:
    """`max_frame_bytes` may be changed between feeds (a client connection raises it once
    its login is done); it applies to every frame whose size is read after the change."""

    __slots__ = ("max_frame_bytes", "_size_prefix", "_partial", "_partial_bytes", "_remaining")

    def __init__(self, max_frame_bytes: int):
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self.max_frame_bytes = max_frame_bytes
        self._size_prefix = b""  # 0-3 bytes of a size split across reads
        self._partial: list[memoryview | bytearray] | None = None  # a payload being gathered
        self._partial_bytes = 0  # bytes in _partial
        self._remaining = 0  # bytes still missing from _partial

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an incomplete frame (size prefix and payload so far)."""
        held = len(self._size_prefix)
        if self._partial is not None:
            held += 4 + self._partial_bytes
        return held

    @property
    def partial_size(self) -> int:
        """The payload size of the frame being gathered; 0 when there is none."""
        return 0 if self._partial is None else self._partial_bytes + self._remaining

    def partial_head(self, n: int) -> bytes:
        """Up to the first `n` payload bytes gathered so far of the frame being gathered."""
        head = b""
        for part in self._partial or ():
            if len(head) >= n:
                break
            head += bytes(part[:n - len(head)])
        return head

    def take_partial(self) -> tuple[list[memoryview | bytearray], int]:
        """Hand over the frame being gathered: the parts of its payload received so far, and
        how many bytes of it are still to come. The caller takes those from the stream
        itself; the next `feed` must start where the frame ends."""
        if self._partial is None:
            raise ValueError("no frame is being gathered")
        parts, remaining = self._partial, self._remaining
        self._partial = None
        self._partial_bytes = 0
        self._remaining = 0
        return parts, remaining

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Take the next bytes of the stream; return the payloads completed by them, in order."""
        frames: list[bytes] = []
        if type(data) is not bytes:
            data = bytes(data)      # views of it may be kept: it must not change
        view = memoryview(data)
        end = len(view)
        pos = 0
        if self._partial is not None:
            pos = self._continue_partial(self._partial, view, frames)
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
                partial: list[memoryview | bytearray] = []
                self._partial = partial
                self._partial_bytes = 0
                self._gather(partial, view[pos:])
                self._remaining = size - (end - pos)
                break
        return frames

    def _continue_partial(self, partial: list[memoryview | bytearray], view: memoryview,
                          frames: list[bytes]) -> int:
        take = min(self._remaining, len(view))
        self._gather(partial, view[:take])
        self._remaining -= take
        if self._remaining == 0:
            frames.append(b"".join(partial))
            self._partial = None
            self._partial_bytes = 0
        return take

    def _gather(self, partial: list[memoryview | bytearray], part: memoryview) -> None:
        self._partial_bytes += len(part)
        if len(part) >= VIEW_MIN_BYTES:
            partial.append(part)      # keeps the read alive; copied once, at the join
            return
        tail = partial[-1] if partial else None
        if type(tail) is bytearray:
            tail += part
        else:
            partial.append(bytearray(part))

    def _check_size(self, size: int) -> int:
        if size < 0:
            raise InvalidFrame(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise FrameTooLarge(f"frame size {size} exceeds the limit of {self.max_frame_bytes} bytes")
        return size
