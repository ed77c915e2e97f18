"""The request a group handler serves: who sent it, at which API version (the audit
headers of its records and the shape of its answer depend on them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class RequestContext(NamedTuple):
    # One per request: a NamedTuple is cheaper to build than a frozen dataclass.
    api_version: int
    client_id: str = ""
    client_host: str = "/127.0.0.1"   # Java InetAddress.toString() form, as Kafka stores it
    # The caller's DESCRIBE right on a topic (its ACLs, decided before the request came
    # here: a pure function); None when kgc has no authorizer, so every topic may be seen.
    may_describe_topic: Callable[[str], bool] | None = None
