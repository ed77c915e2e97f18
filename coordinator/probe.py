"""One blocking request/response with kafka-python codecs: enough to probe a broker.

Used where an event loop would be overkill: checking that the embedded broker is up, the
offline audit reading log offsets, `kgc demo`, tests.
"""

from __future__ import annotations

import socket
import struct

_SIZE = struct.Struct(">i")


def request_response(address: tuple[str, int], request, response_class, *, timeout_s: float = 2.0,
                     correlation_id: int = 1, client_id: str = "kgc"):
    """Raises OSError (refused, timed out, closed mid-frame) for the caller to word."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        (size,) = _SIZE.unpack(read_exactly(sock, _SIZE.size))
        payload = read_exactly(sock, size)
    return response_class.decode(payload, version=request.API_VERSION, header=True)


def read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-frame")
        chunks += chunk
    return bytes(chunks)
