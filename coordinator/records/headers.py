"""The headers kgc puts on its records: who wrote a record (the audit's), and where an
adopted record came from. Kafka ignores record headers in `__consumer_offsets`, so the
format stays Kafka's; the offline audit and the views read them."""

from __future__ import annotations

import functools

from coordinator.records.types import Headers

ADOPTED_FROM = "adopted_from"
ADOPTED_AT_MS = "adopted_at_ms"


@functools.lru_cache(maxsize=4096)
def audit_headers(member_id: str, generation: int, client_id: str, client_host: str) -> Headers:
    # The offline audit reads them to say who wrote what.
    # Cached: every partition of one commit shares them, and the batch encoder encodes a
    # run of records holding the same tuple once.
    return (
        ("member_id", member_id.encode("utf-8")),
        ("generation", str(generation).encode("utf-8")),
        ("client_id", client_id.encode("utf-8")),
        ("client_host", client_host.encode("utf-8")),
    )


def adoption_headers(source: str, adopted_at_ms: int) -> Headers:
    """The audit headers of a record kgc adopted rather than was sent: from where, and when."""
    return audit_headers("", -1, "kgc-adoption", "") + (
        (ADOPTED_FROM, source.encode("utf-8")), (ADOPTED_AT_MS, str(adopted_at_ms).encode("utf-8")))


def adoption_of(headers: Headers) -> tuple[str, int] | None:
    """(source, adopted at ms) from a record's audit headers, or None if it was not adopted."""
    found = {name: value for name, value in headers if value is not None}
    source, at = found.get(ADOPTED_FROM), found.get(ADOPTED_AT_MS)
    if source is None or at is None:
        return None
    try:
        return source.decode("utf-8", "replace"), int(at)
    except ValueError:
        return source.decode("utf-8", "replace"), -1


def origin_view(adoption: tuple[str, int] | None) -> dict[str, str | int]:
    """Where a committed offset came from, for JSON views: committed to kgc, or adopted
    (from where, when), as `adoption_of` read it from the offset's latest record."""
    if adoption is None:
        return {"source": "committed"}
    return {"source": "adopted", "adopted_from": adoption[0], "adopted_at_ms": adoption[1]}
