"""The reference a hand-written codec is held to: kafka-python's own decoder, and what it
stores on the objects it builds."""

from __future__ import annotations

from hypothesis import strategies as st
from kafka.protocol.data_container import DataContainer

from protocol import messages

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
