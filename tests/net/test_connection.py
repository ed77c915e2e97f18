"""The connection's ordered-answer pipeline, without sockets.

A fake transport records what the connection writes and whether reading is paused; a
scripted handler answers each frame now (bytes), later (a future the test resolves), or
not at all (None, as for Produce with acks=0). These are the gateway's core promises:
answers leave in request order whatever order they are ready in, reading pauses under
backpressure and resumes when it clears, and a cancelled or failed answer closes the
connection without writing anything after it.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from coordinator.net.connection import ConnectionState, KafkaConnection, ProtocolViolation
from tests.support.fake_transport import FakeTransport


class ScriptedHandler:
    """Answers frame N with `script[N]`: bytes, a future, None, or an exception to raise."""

    def __init__(self, script: dict[bytes, object]) -> None:
        self.script = script
        self.seen: list[bytes] = []
        self.closed_sessions: list[object] = []

    def open(self, conn: KafkaConnection) -> object:
        return ("session", conn.peer_host)

    def dispatch(self, session, payload: bytes):
        self.seen.append(payload)
        answer = self.script[payload]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self, session) -> None:
        self.closed_sessions.append(session)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def connect(handler: ScriptedHandler, *, max_in_flight: int = 16) -> tuple[KafkaConnection, FakeTransport]:
    conn = KafkaConnection(handler, max_frame_bytes=1024, max_in_flight=max_in_flight)
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport


async def test_answers_leave_in_request_order_when_ready_out_of_order():
    loop = asyncio.get_running_loop()
    join, sync = loop.create_future(), loop.create_future()
    handler = ScriptedHandler({b"a": b"A", b"join": join, b"hb": b"HB", b"sync": sync, b"z": b"Z"})
    conn, transport = connect(handler)

    conn.data_received(b"".join(frame(p) for p in (b"a", b"join", b"hb", b"sync", b"z")))
    assert transport.written == b"A", "an answer owed to no earlier request goes out at once"

    sync.set_result(b"SYNC")
    await asyncio.sleep(0)
    assert transport.written == b"A", "a later answer waits for the parked one before it"

    join.set_result(b"JOIN")
    await asyncio.sleep(0)
    assert transport.written == b"AJOINHBSYNCZ"
    assert conn.in_flight == 0


async def test_answers_completed_together_go_out_in_one_write():
    loop = asyncio.get_running_loop()
    first = loop.create_future()
    conn, transport = connect(ScriptedHandler({b"1": first, b"2": b"two", b"3": b"three"}))
    conn.data_received(frame(b"1") + frame(b"2") + frame(b"3"))
    first.set_result(b"one")
    await asyncio.sleep(0)
    assert transport.writes == [b"onetwothree"]


async def test_requests_without_an_answer_take_no_slot():
    loop = asyncio.get_running_loop()
    parked = loop.create_future()
    conn, transport = connect(ScriptedHandler({b"p": parked, b"acks0": None, b"x": b"X"}))
    conn.data_received(frame(b"p") + frame(b"acks0") + frame(b"x"))
    assert conn.in_flight == 2
    parked.set_result(b"P")
    await asyncio.sleep(0)
    assert transport.written == b"PX"


async def test_frames_split_across_reads_are_dispatched_once_whole():
    handler = ScriptedHandler({b"hello": b"H", b"world": b"W"})
    conn, transport = connect(handler)
    stream = frame(b"hello") + frame(b"world")
    for i in range(len(stream)):
        conn.data_received(stream[i:i + 1])
    assert handler.seen == [b"hello", b"world"]
    assert transport.written == b"HW"


async def test_reading_pauses_at_max_in_flight_and_resumes_when_answers_drain():
    loop = asyncio.get_running_loop()
    parked = [loop.create_future() for _ in range(3)]
    script = {f"p{i}".encode(): fut for i, fut in enumerate(parked)}
    conn, transport = connect(ScriptedHandler(script), max_in_flight=3)

    conn.data_received(frame(b"p0") + frame(b"p1"))
    assert transport.reading
    conn.data_received(frame(b"p2"))
    assert not transport.reading, "three answers owed with max_in_flight=3: stop reading"

    parked[0].set_result(b"0")
    await asyncio.sleep(0)
    assert transport.reading, "one answer written, room again: read again"
    assert transport.written == b"0"


async def test_reading_pauses_while_the_transport_cannot_take_more():
    conn, transport = connect(ScriptedHandler({b"x": b"X"}))
    conn.pause_writing()
    assert not transport.reading
    conn.data_received(frame(b"x"))  # already in the kernel's buffer: still answered
    assert transport.written == b"X"
    assert not transport.reading, "a full write buffer keeps reading paused"
    conn.resume_writing()
    assert transport.reading


async def test_drain_stops_reading_but_still_writes_what_is_owed():
    loop = asyncio.get_running_loop()
    parked = loop.create_future()
    handler = ScriptedHandler({b"p": parked, b"late": b"LATE"})
    conn, transport = connect(handler)
    conn.data_received(frame(b"p"))

    conn.drain()
    assert conn.state is ConnectionState.DRAINING and not transport.reading
    conn.data_received(frame(b"late"))
    assert handler.seen == [b"p"], "no new request is read once draining"

    parked.set_result(b"P")
    await asyncio.sleep(0)
    assert transport.written == b"P"


@pytest.mark.parametrize("outcome", ["cancelled", "failed"])
async def test_a_cancelled_or_failed_answer_closes_without_writing_what_follows(outcome):
    loop = asyncio.get_running_loop()
    parked = loop.create_future()
    conn, transport = connect(ScriptedHandler({b"a": b"A", b"p": parked, b"b": b"B"}))
    conn.data_received(frame(b"a") + frame(b"p") + frame(b"b"))

    if outcome == "cancelled":
        parked.cancel()
    else:
        parked.set_exception(RuntimeError("builder failed"))
    await asyncio.sleep(0)
    assert transport.written == b"A", "nothing after the lost answer: the client would mismatch it"
    assert transport.closed and conn.state is ConnectionState.CLOSING


async def test_a_protocol_violation_writes_what_was_ready_then_closes():
    conn, transport = connect(ScriptedHandler({b"ok": b"OK", b"bad": ProtocolViolation("unknown api 9999")}))
    conn.data_received(frame(b"ok") + frame(b"bad") + frame(b"ok"))
    assert transport.written == b"OK"
    assert transport.closed


async def test_an_oversized_frame_closes_before_its_payload_is_read():
    handler = ScriptedHandler({})
    conn, transport = connect(handler)
    conn.data_received(struct.pack(">i", 1025) + b"x")
    assert transport.closed and handler.seen == []


async def test_connection_lost_cancels_parked_answers_and_closes_the_session():
    loop = asyncio.get_running_loop()
    parked, failed = loop.create_future(), loop.create_future()
    handler = ScriptedHandler({b"p": parked, b"f": failed})
    conn, transport = connect(handler)
    conn.data_received(frame(b"p") + frame(b"f"))
    failed.set_exception(RuntimeError("nobody will read this"))

    conn.connection_lost(None)
    assert parked.cancelled()
    assert conn.state is ConnectionState.CLOSED and conn.in_flight == 0
    assert handler.closed_sessions == [("session", "10.0.0.7")]
    conn.data_received(frame(b"p"))  # late bytes after close are ignored
    assert transport.writes == []


async def test_an_eager_answer_goes_out_in_the_call_that_settles_it():
    from storage.eager_future import EagerFuture

    later = EagerFuture(asyncio.get_running_loop())
    handler = ScriptedHandler({b"a": later, b"b": b"B"})
    conn, transport = connect(handler)
    conn.data_received(frame(b"a") + frame(b"b"))
    assert transport.writes == []
    later.set_result(b"A")                  # e.g. from the writer's fsync callback
    assert transport.written == b"AB"       # no loop turn needed


async def test_an_eager_answer_settled_while_requests_are_read_waits_for_earlier_answers():
    """A request whose op releases an earlier, parked answer of the same connection: the
    answer made before that one (already in hand, not yet written) must still go first."""
    from storage.eager_future import EagerFuture

    parked = EagerFuture(asyncio.get_running_loop())

    class Releasing(ScriptedHandler):
        def dispatch(self, session, payload: bytes):
            if payload == b"c":
                parked.set_result(b"B")
            return super().dispatch(session, payload)

    handler = Releasing({b"a": b"A", b"b": parked, b"c": b"C"})
    conn, transport = connect(handler)
    conn.data_received(frame(b"a") + frame(b"b") + frame(b"c"))
    assert transport.written == b"ABC"


class FakeSource:
    """The far side of a streamed answer (the gateway's upstream connection)."""

    def __init__(self) -> None:
        self.paused = False
        self.aborted = False

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def abort(self) -> None:
        self.aborted = True


async def test_a_streamed_answer_goes_out_in_its_turn_and_later_answers_wait_behind_it():
    loop = asyncio.get_running_loop()
    parked, streamed = loop.create_future(), loop.create_future()
    handler = ScriptedHandler({b"p": parked, b"fetch": streamed, b"z": b"Z", b"hb": b"HB"})
    conn, transport = connect(handler)
    conn.data_received(frame(b"p") + frame(b"fetch") + frame(b"z"))
    source = FakeSource()

    assert not conn.begin_stream(streamed, source), "an answer owed before it is not written yet"
    parked.set_result(b"P")     # ready, its callback not run yet: begin_stream writes it first
    assert conn.begin_stream(streamed, source)
    assert transport.written == b"P"
    assert not conn.begin_stream(streamed, FakeSource()), "one stream at a time"

    conn.stream(b"F1")
    conn.data_received(frame(b"hb"))      # answered at once, but owed after the stream
    conn.stream(memoryview(b"F2"))
    await asyncio.sleep(0)
    assert transport.written == b"PF1F2", "nothing cuts into a streamed answer"

    streamed.set_result(None)   # its bytes all went out: nothing left to write
    conn.end_stream()
    assert transport.written == b"PF1F2ZHB"
    assert conn.in_flight == 0 and not source.aborted


async def test_only_the_answer_at_the_head_may_stream():
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    conn, transport = connect(ScriptedHandler({b"1": first, b"2": second}))
    conn.data_received(frame(b"1") + frame(b"2"))
    assert not conn.begin_stream(second, FakeSource())
    assert not conn.begin_stream(loop.create_future(), FakeSource()), "not a slot of this connection"
    first.set_result(b"ONE")
    second.set_result(b"TWO")
    await asyncio.sleep(0)
    assert transport.written == b"ONETWO"


async def test_a_client_that_cannot_keep_up_pauses_the_streams_source():
    loop = asyncio.get_running_loop()
    streamed = loop.create_future()
    conn, transport = connect(ScriptedHandler({b"fetch": streamed}))
    conn.data_received(frame(b"fetch"))
    source = FakeSource()
    conn.pause_writing()
    assert conn.begin_stream(streamed, source)
    assert source.paused, "a stream that begins while the client is behind begins paused"
    conn.resume_writing()
    assert not source.paused
    conn.stream(b"F")
    conn.pause_writing()
    assert source.paused and not transport.reading
    conn.resume_writing()
    assert not source.paused and transport.reading

    conn.pause_writing()        # during the last write: the source resumes gathering whole answers
    streamed.set_result(None)
    conn.end_stream()
    assert not source.paused
    conn.resume_writing()
    assert not source.paused


@pytest.mark.parametrize("how", ["lost", "closed"])
async def test_a_client_that_goes_away_mid_stream_aborts_the_source(how):
    loop = asyncio.get_running_loop()
    streamed = loop.create_future()
    handler = ScriptedHandler({b"fetch": streamed, b"z": b"Z"})
    conn, transport = connect(handler)
    conn.data_received(frame(b"fetch") + frame(b"z"))
    source = FakeSource()
    assert conn.begin_stream(streamed, source)
    conn.stream(b"F1")

    if how == "lost":
        conn.connection_lost(ConnectionResetError())
    else:
        conn.close()
    assert source.aborted, "the rest of the answer can reach no one"
    conn.stream(b"F2")
    assert transport.written == b"F1"
    assert not conn.begin_stream(streamed, FakeSource())


async def test_a_source_that_fails_mid_stream_closes_the_client_without_writing_what_follows():
    loop = asyncio.get_running_loop()
    streamed = loop.create_future()
    conn, transport = connect(ScriptedHandler({b"fetch": streamed, b"z": b"Z"}))
    conn.data_received(frame(b"fetch") + frame(b"z"))
    assert conn.begin_stream(streamed, FakeSource())
    conn.stream(b"half of F")

    streamed.set_exception(ConnectionError("upstream closed the connection"))
    await asyncio.sleep(0)
    assert transport.written == b"half of F", "the client is cut off mid-answer and must reconnect"
    assert transport.closed and conn.state is ConnectionState.CLOSING
