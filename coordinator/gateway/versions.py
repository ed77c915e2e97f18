"""The ApiVersions answer of a gateway: our ranges where we serve, upstream's where we forward.

Opaque forwarding handles any version of an API we only pass through, so upstream's range
holds there (Kroxylicious `ApiVersionsIntersectFilter` intersects; we need not). Two
kinds of API are held back from upstream's list:
- group APIs kgc does not serve (yet), `protocol.api_keys.GROUP_APIS`: they are never
  forwarded either (`net/dispatch.py`), or a group would be split between kgc and
  upstream's own coordinator;
- rewritten APIs above the newest version `rewrite` knows: a newer layout could carry a
  broker address past us.

Fetch is capped at v15, below what `rewrite` knows. From v16 (KIP-951) a Fetch response
ends with node endpoints (Tansu sends the field in every one, empty unless a partition's
leader moved) that kgc must rewrite. A non-empty list's rewrite changes the response's
length, which the client reads first, and the list comes last: a v16 response can only
be passed on once kgc has seen its end. Up to v15 nothing in a Fetch response is
rewritten, so it streams through as it arrives (session.py).
What a client gives up is KIP-951's leader hint on a Fetch: after NOT_LEADER_OR_FOLLOWER
it refreshes Metadata to find the new leader, as every client did before Kafka 3.7.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka.protocol.api_key import ApiKey

from coordinator.gateway.rewrite import FETCH_NODE_ENDPOINTS_VERSION, REWRITE_MAX_VERSIONS
from protocol.api_keys import GROUP_APIS

# The newest version of each API that clients are offered, where it is below upstream's.
ADVERTISED_MAX_VERSIONS: dict[int, int] = {
    **REWRITE_MAX_VERSIONS,
    ApiKey.Fetch: FETCH_NODE_ENDPOINTS_VERSION - 1,
}

Ranges = Mapping[int, tuple[int, int]]

TRANSACTION_VERSION = "transaction.version"
# TxnOffsetCommit v5 (KIP-890 part 2) also adds the group's partition to the transaction,
# in place of AddOffsetsToTxn; a Java client sends it only when `transaction.version` 2 is
# finalized. Below that level v4 is the newest offered, as Kafka's brokers do: the
# upstream adds a partition on a client's behalf only in a transaction of version 2.
TXN_OFFSET_COMMIT_V1_MAX = 4


@dataclass(frozen=True, slots=True)
class Features:
    """The upstream's feature flags from ApiVersions v3+ (KIP-584), passed on to clients as
    they are: a Java client decides its transaction protocol from `transaction.version`."""

    supported: tuple[tuple[str, int, int], ...] = ()    # name, min version, max version
    finalized: tuple[tuple[str, int, int], ...] = ()    # name, min level, max level
    epoch: int = -1

    def level(self, name: str) -> int:
        return next((high for feature, _, high in self.finalized if feature == name), 0)


NO_FEATURES = Features()


def merge_api_versions(local: Ranges, upstream: Ranges, features: Features = NO_FEATURES) -> dict[int, tuple[int, int]]:
    merged: dict[int, tuple[int, int]] = {}
    for api_key, (low, high) in upstream.items():
        if api_key in local or api_key in GROUP_APIS:
            continue
        high = min(high, ADVERTISED_MAX_VERSIONS.get(api_key, high))
        if low <= high:
            merged[api_key] = (low, high)
    merged.update(local)
    if ApiKey.TxnOffsetCommit in merged and features.level(TRANSACTION_VERSION) < 2:
        low, high = merged[ApiKey.TxnOffsetCommit]
        merged[ApiKey.TxnOffsetCommit] = (low, min(high, TXN_OFFSET_COMMIT_V1_MAX))
    return merged
