"""Request frames decoded and answers encoded: on the loop, or off it for a large frame.

A large frame (over `LARGE_FRAME_BYTES`) is decoded, and its answer encoded, on the app's
codec thread rather than on the loop: each is one call into kafka-python's codec, whose
time grows with the frame, and the loop takes the GIL back every switch interval while
that thread works, so other clients' heartbeats keep being answered. (Holding back the
frames read after it, so they keep their order, is the dispatcher's: `net/dispatch.py`.)

An answer that cannot be encoded (a builder's fault) is answered UNKNOWN_SERVER_ERROR in
the API's shape rather than closing the connection.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from functools import partial
from typing import Any

from kafka.protocol.api_key import ApiKey

from coordinator import metrics
from coordinator.net.connection import ProtocolViolation
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from protocol.messages import MalformedRequest, decode_request, encode_response

log = logging.getLogger(__name__)

# Above this a request frame is decoded, and its answer encoded, off the loop. Well above
# what a group's ordinary requests take (a JoinGroup with a few protocols, a commit of a
# few hundred partitions), so they never pay the thread hop; well below the sizes whose
# single codec call holds the loop for tens of milliseconds.
LARGE_FRAME_BYTES = 64 * 1024


class Codec:
    """Where a request's frame is decoded and its answer encoded: the codec pool for a
    large frame, the loop otherwise (and always, without a pool)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pool: Executor | None):
        self._loop = loop
        self._pool = pool       # None: every frame is decoded and encoded on the loop

    def off_loop(self, payload: bytes) -> bool:
        return self._pool is not None and len(payload) > LARGE_FRAME_BYTES

    def _off_loop_pool(self) -> Executor:
        if self._pool is None:
            raise RuntimeError("a frame goes off the loop only with a codec pool (see `off_loop`)")
        return self._pool

    def decode_off_loop(self, header, payload: bytes) -> asyncio.Future:
        return asyncio.wrap_future(self._off_loop_pool().submit(decode, header, payload), loop=self._loop)

    def answer(self, header, payload: bytes, request: Any, request_metrics: metrics.RequestMetrics,
               response: Any) -> bytes | asyncio.Future:
        """The response's frame, encoded off the loop when its request was large (the
        answer's size follows the request's: one entry per group, key or partition named)."""
        if not self.off_loop(payload):
            return encode(header, payload, request, request_metrics, response)
        frame = self._loop.create_future()
        encoding = asyncio.wrap_future(self._off_loop_pool().submit(_encoded_and_counted, header, response),
                                       loop=self._loop)
        encoding.add_done_callback(partial(_encoded, header, payload, request, request_metrics, response, frame))
        return frame


def _encoded(header, payload: bytes, request: Any, request_metrics: metrics.RequestMetrics,
             response: Any, frame: asyncio.Future, encoding: asyncio.Future) -> None:
    if encoding.cancelled():        # the pool was shut down: kgc is stopping
        frame.cancel()
        return
    exc = encoding.exception()
    if frame.done():
        return      # the client went away
    try:
        if exc is None:
            encoded, codes = encoding.result()
            metrics.count_response_codes(request_metrics, codes)
            frame.set_result(encoded)
        else:
            frame.set_result(unencodable(header, payload, request, request_metrics, exc))
    except Exception as failure:
        frame.set_exception(failure)


def encode(header, payload: bytes, request: Any, request_metrics: metrics.RequestMetrics,
           response: Any) -> bytes:
    """The response's frame; a response that cannot be encoded (a builder's fault) is
    answered UNKNOWN_SERVER_ERROR in the API's shape rather than closing the connection.
    `request` may be None (decoded from `payload` only then)."""
    try:
        frame = encode_response(header, response, header.api_version)
    except Exception as exc:
        return unencodable(header, payload, request, request_metrics, exc)
    metrics.response(request_metrics, header.api_key, header.api_version, response)
    return frame


def unencodable(header, payload: bytes, request: Any, request_metrics: metrics.RequestMetrics,
                exc: BaseException) -> bytes:
    log.error("%s v%d: the response could not be encoded; answering UNKNOWN_SERVER_ERROR",
              ApiKey(header.api_key).name, header.api_version, exc_info=exc)
    if request is None:
        request = decode(header, payload)
    response = error_response(header.api_key, header.api_version, request, ErrorCode.UNKNOWN_SERVER_ERROR)
    frame = encode_response(header, response, header.api_version)
    metrics.response(request_metrics, header.api_key, header.api_version, response)
    return frame


def decode(header, payload: bytes):
    try:
        return decode_request(header.api_key, header.api_version, payload[header.header_len:])
    except MalformedRequest as exc:
        raise ProtocolViolation(f"malformed {ApiKey(header.api_key).name} v{header.api_version}: {exc}") from exc


def _encoded_and_counted(header, response: Any) -> tuple[bytes, tuple]:
    """On the codec thread: a large answer's frame, and its error codes counted."""
    encoded = encode_response(header, response, header.api_version)
    return encoded, metrics.response_codes(header.api_key, header.api_version, response)
