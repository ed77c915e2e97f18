"""The reference a hand-written codec is held to: kafka-python's own decoder, and what it
stores on the objects it builds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from kafka.protocol.data_container import DataContainer

from protocol import messages
from protocol.messages import MalformedRequest

UNSET = "<unset>"


def attributes(obj: object) -> object:
    """Every slot as stored (not through `__getattr__` defaults), nested objects too."""
    if isinstance(obj, list):
        return [attributes(item) for item in obj]
    if not isinstance(obj, DataContainer):
        return obj
    out: dict[str, object] = {"type": type(obj).__name__}
    for cls in type(obj).__mro__:
        for name in cls.__dict__.get("__slots__", ()):
            try:
                out[name] = attributes(cls.__dict__[name].__get__(obj))
            except AttributeError:
                out[name] = UNSET
    return out


def generic_decode(api_key: int, version: int, body: bytes) -> tuple[str, object]:
    """kafka-python's compiled decoder plus kgc's checks: the path decode_request takes
    when a hand codec answers None (and took for every request before it)."""
    decode, check = messages._decoder(api_key, version)
    try:
        request, end = decode(memoryview(body), 0)
        check(request)
    except Exception as exc:
        return "refused", type(exc).__name__
    if end != len(body):
        return "truncated" if end > len(body) else "trailing bytes", end
    return "ok", attributes(request)


def damaged(body: bytes, data: st.DataObject) -> bytes:
    """`body` cut short, extended, or with one byte changed: what a hand codec must judge
    as kafka-python judges it."""
    damaged = bytearray(body)
    match data.draw(st.sampled_from(["cut", "extend", "flip"])):
        case "cut":
            del damaged[data.draw(st.integers(0, len(damaged))):]
        case "extend":
            damaged += data.draw(st.binary(min_size=1, max_size=4))
        case "flip":
            index = data.draw(st.integers(0, len(damaged) - 1))
            damaged[index] = data.draw(st.integers(0, 255))
    return bytes(damaged)


def check_fast_decode(api_key: int, fast_decode: Callable[[int, memoryview], Any], request: Any) -> None:
    """A well-formed `request` takes the hand decoder's path and reads as kafka-python
    reads it, through `decode_request` too; the decoded request encodes to the same bytes."""
    body = bytes(request.encode())
    fast = fast_decode(request.version, memoryview(body))
    assert fast is not None, "a well-formed request takes the fast path"
    assert generic_decode(api_key, request.version, body) == ("ok", attributes(fast))
    assert bytes(fast.encode()) == body
    assert attributes(messages.decode_request(api_key, request.version, body)) == attributes(fast)


def check_damaged_decode(api_key: int, fast_decode: Callable[[int, memoryview], Any], version: int,
                         body: bytes) -> None:
    """A damaged body is judged as kafka-python judges it: what the hand decoder reads, it
    reads alike; trailing bytes are ignored (as Kafka does); anything else is malformed."""
    expected = generic_decode(api_key, version, body)
    fast = fast_decode(version, memoryview(body))
    if fast is not None:
        assert expected == ("ok", attributes(fast))
    try:
        outcome: object = "ok", attributes(messages.decode_request(api_key, version, body))
    except MalformedRequest:
        outcome = "malformed"
    if expected[0] == "ok":
        assert outcome == expected
    elif expected[0] == "trailing bytes":
        assert isinstance(outcome, tuple) and outcome[0] == "ok"
    else:
        assert outcome == "malformed"
