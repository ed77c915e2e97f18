"""An asyncio transport with no socket under it, for driving a KafkaConnection by hand."""

from __future__ import annotations

import asyncio


class FakeTransport(asyncio.Transport):
    """Records what the connection writes and whether reading is paused; its peer is
    10.0.0.7:50123."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.reading = True
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("10.0.0.7", 50123) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    @property
    def written(self) -> bytes:
        return b"".join(self.writes)
