"""kafka-python message objects built bare: what the hand codecs build instead of calling
a constructor, whose per-object cost (`DataContainer.__init__` walks the schema's fields)
is most of a large message's. A bare object holds the attributes kafka-python's
constructor and decoder set; the codec sets the fields themselves."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

_new = object.__new__


def bare(cls: type[T], version: int | None) -> T:
    """An instance of `cls` at `version` (None: the version it is encoded at), with no
    tagged fields and no field set yet."""
    obj: Any = _new(cls)
    obj._version = version
    obj.tags = None
    obj.unknown_tags = None
    return obj


def bare_message(cls: type[T], version: int) -> T:
    """`bare`, for a whole request or response: no header, no version bounds of its own."""
    obj: Any = bare(cls, version)
    obj._header = None
    obj._min_version = None
    obj._max_version = None
    return obj
