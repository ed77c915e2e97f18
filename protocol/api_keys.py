"""What kgc serves locally, and which header version each request and response uses.

Version ranges we answer ourselves (the `versions` of `protocol.apis`' rows; Kafka 4.x
serves these APIs at the versions in its `clients/src/main/resources/common/message/*.json`):

| API             | key | ours | first flexible | note                                          |
|-----------------|----:|------|---------------:|-----------------------------------------------|
| ApiVersions     |  18 | 0-4  | 3              | above 4: KIP-511 v0 error answer              |
| FindCoordinator |  10 | 0-6  | 3              | v4+ batches keys (KIP-699)                    |
| JoinGroup       |  11 | 0-9  | 6              |                                               |
| Heartbeat       |  12 | 0-4  | 4              |                                               |
| LeaveGroup      |  13 | 0-5  | 4              | v3+ batches members                           |
| SyncGroup       |  14 | 0-5  | 4              |                                               |
| OffsetCommit    |   8 | 0-10 | 8              | v0-1 removed in Kafka 4.0 (KIP-896); v10 ids  |
| OffsetFetch     |   9 | 0-10 | 6              | v0 removed in Kafka 4.0 (KIP-896); v10 ids    |
| DescribeGroups  |  15 | 0-6  | 5              |                                               |
| ListGroups      |  16 | 0-5  | 3              |                                               |
| DeleteGroups    |  42 | 0-2  | 2              |                                               |
| OffsetDelete    |  47 | 0    | never          |                                               |
| Metadata        |   3 | 0-12 | 9              | local only in standalone mode, else forwarded |
| ConsumerGroupHeartbeat | 68 | 0-1 | 0          | KIP-848; librdkafka asks for exactly v1       |
| ConsumerGroupDescribe  | 69 | 0-1 | 0          | KIP-848                                       |

These are the versions Kafka 3.9 served for every group API it shares with kgc (its
`*Request.json` `validVersions`), and Kafka 4.x's additions: clients older than Kafka 4
(sarama 1.22 commits with OffsetCommit v1) keep working whichever cluster kgc fronts.
Kafka 4.0 (KIP-896) removed OffsetCommit v0-1 and OffsetFetch v0, the only group API
versions it removed for good (JoinGroup v0-1 came back in 4.0.1, DeleteGroups v0 was
kept); `local_versions("kafka4")` is the table with that cut, for operators who want it
(the `min_group_api_versions` setting).

OffsetCommit and OffsetFetch v10 name topics by id (uuid) instead of by name (Kafka 4.1+);
kgc resolves the ids against the upstream's topics (`coordinator/net/topic_ids.py`), which
the gateway reads with Metadata v10+ (standalone, no topic is known: every id is
UNKNOWN_TOPIC_ID). Metadata v13 only adds a
top-level error code; 0-12 is enough for every client we know. kafka-python 3.0.12 encodes
every version listed here (its schemas go to OffsetCommit/OffsetFetch 10, Metadata 13).

Request header v2 (flexible) = v1 + tagged fields; response header v1 (flexible) = v0 +
tagged fields. An API's request uses header v2 from its first flexible version on
(Kafka's `*Request.json` `flexibleVersions`, loaded here from the copies kafka-python
ships). ApiVersions responses always use header v0 so that a client of any version can
read the error of KIP-511 (generator `ApiMessageTypeGenerator.java`).
"""

from __future__ import annotations

import importlib.resources
from types import MappingProxyType

from kafka.protocol.api_key import ApiKey
from kafka.protocol.schemas import load_json

from protocol.apis import APIS, Server, Where, ranges

# The ranges of the table of APIs (`protocol.apis`), by who serves them and where.
LOCAL_VERSIONS: MappingProxyType[ApiKey, tuple[int, int]] = MappingProxyType(
    ranges(Server.CONNECTION, Server.SERVICE))

# Answered here only when kgc is the whole cluster (Metadata); with an upstream they are
# forwarded, and the upstream's range is offered.
STANDALONE_APIS: frozenset[ApiKey] = frozenset(key for key, api in APIS.items() if api.where is Where.STANDALONE)

# TxnOffsetCommit is served only with an upstream, whose transaction coordinator decides
# each transaction (coordinator/txn). v0-4 for the classic flow (AddOffsetsToTxn first);
# v5 (KIP-890 part 2, transaction version 2) also adds the group's partition to the
# transaction; v6 (KIP-1319) names topics by id. v5-6 are served, and offered in
# ApiVersions only when the upstream has finalized `transaction.version` 2
# (`coordinator/gateway/versions.py`).
TXN_OFFSET_COMMIT_VERSIONS = APIS[ApiKey.TxnOffsetCommit].versions

# Every API that reads or changes a group's state. kgc holds every group, so one of
# these it does not serve itself (`UNSERVED_GROUP_APIS`) is refused, never forwarded:
# upstream it would act on a group kgc does not see (a TxnOffsetCommit would plant
# offsets that kgc adopts on the group's first use, in terminate mode as kgc's own
# upstream user; a streams or share group would live half on each side). TxnOffsetCommit
# is served when there is an upstream (the app adds `TXN_OFFSET_COMMIT_VERSIONS`), and
# refused standalone. EndTxn and the other transaction APIs are the transaction
# coordinator's, not a group coordinator's: they keep going upstream; AddOffsetsToTxn
# too, rewritten to add kgc's participant partition (coordinator/txn).
GROUP_APIS: frozenset[ApiKey] = frozenset({
    ApiKey.OffsetCommit, ApiKey.OffsetFetch, ApiKey.JoinGroup, ApiKey.Heartbeat,
    ApiKey.LeaveGroup, ApiKey.SyncGroup, ApiKey.DescribeGroups, ApiKey.ListGroups,
    ApiKey.TxnOffsetCommit, ApiKey.DeleteGroups, ApiKey.OffsetDelete,
    ApiKey.ConsumerGroupHeartbeat, ApiKey.ConsumerGroupDescribe,
    ApiKey.StreamsGroupHeartbeat, ApiKey.StreamsGroupDescribe,
    # KIP-932 share groups: the group coordinator's APIs, the share coordinator's state
    # of each share group, and the share fetches that acquire and acknowledge records
    # for a share group's members (their responses also carry broker addresses kgc
    # does not rewrite).
    ApiKey.ShareGroupHeartbeat, ApiKey.ShareGroupDescribe, ApiKey.ShareFetch, ApiKey.ShareAcknowledge,
    ApiKey.InitializeShareGroupState, ApiKey.ReadShareGroupState, ApiKey.WriteShareGroupState,
    ApiKey.DeleteShareGroupState, ApiKey.ReadShareGroupStateSummary,
    ApiKey.DescribeShareGroupOffsets, ApiKey.AlterShareGroupOffsets, ApiKey.DeleteShareGroupOffsets,
})
# `difference`, not `-`: a frozenset minus dict keys is a plain set (dict_keys answers the
# subtraction), where the annotation promises a frozenset.
UNSERVED_GROUP_APIS: frozenset[ApiKey] = GROUP_APIS.difference(LOCAL_VERSIONS)

# SASL is answered by kgc on every listener, never forwarded: a client that authenticates
# its upstream leg through kgc would otherwise look authenticated while kgc answers the
# group APIs for anyone (coordinator/net/sasl.py).
SASL_VERSIONS: MappingProxyType[ApiKey, tuple[int, int]] = MappingProxyType(ranges(Server.SASL))

# The lowest version served of each API whose floor moved, by the Kafka release whose
# floor kgc keeps: "kafka3" serves everything Kafka 3.9 served, "kafka4" cuts what
# Kafka 4.0 removed (KIP-896).
GROUP_API_FLOORS: MappingProxyType[str, MappingProxyType[ApiKey, int]] = MappingProxyType({
    "kafka3": MappingProxyType({}),
    "kafka4": MappingProxyType({ApiKey.OffsetCommit: 2, ApiKey.OffsetFetch: 1}),
})


def local_versions(floor: str) -> MappingProxyType[ApiKey, tuple[int, int]]:
    """`LOCAL_VERSIONS` with the lowest versions `GROUP_API_FLOORS[floor]` sets."""
    raised = GROUP_API_FLOORS[floor]
    return MappingProxyType({key: (max(low, raised.get(key, low)), high)
                             for key, (low, high) in LOCAL_VERSIONS.items()})


# Above any int16 version: the "first version" of a feature an API never has, such as
# "flexibleVersions": "none", or an API that never names topics by id.
NEVER_VERSION = 1 << 15

# Client-facing APIs whose schemas kafka-python does not ship (apache/kafka
# clients/src/main/resources/common/message/*Request.json). Every API added after
# KIP-482 is flexible from v0.
_FLEXIBLE_SINCE_NOT_SHIPPED = {
    ApiKey.CreateDelegationToken: 2,
    ApiKey.RenewDelegationToken: 2,
    ApiKey.ExpireDelegationToken: 2,
    ApiKey.DescribeDelegationToken: 2,
    ApiKey.ConsumerGroupHeartbeat: 0,
    ApiKey.ConsumerGroupDescribe: 0,
    ApiKey.GetTelemetrySubscriptions: 0,
    ApiKey.PushTelemetry: 0,
    ApiKey.ShareGroupHeartbeat: 0,
    ApiKey.ShareGroupDescribe: 0,
    ApiKey.ShareFetch: 0,
    ApiKey.ShareAcknowledge: 0,
    ApiKey.StreamsGroupHeartbeat: 0,
    ApiKey.StreamsGroupDescribe: 0,
    ApiKey.DescribeShareGroupOffsets: 0,
    ApiKey.AlterShareGroupOffsets: 0,
    ApiKey.DeleteShareGroupOffsets: 0,
}


# Their request versions in the same schemas: the rest of `known_versions`.
_VERSIONS_NOT_SHIPPED = {
    ApiKey.CreateDelegationToken: (1, 3),
    ApiKey.RenewDelegationToken: (1, 2),
    ApiKey.ExpireDelegationToken: (1, 2),
    ApiKey.DescribeDelegationToken: (1, 3),
    ApiKey.ConsumerGroupHeartbeat: (0, 1),
    ApiKey.ConsumerGroupDescribe: (0, 1),
    ApiKey.GetTelemetrySubscriptions: (0, 0),
    ApiKey.PushTelemetry: (0, 0),
    ApiKey.ShareGroupHeartbeat: (1, 1),
    ApiKey.ShareGroupDescribe: (1, 1),
    ApiKey.ShareFetch: (1, 2),
    ApiKey.ShareAcknowledge: (1, 2),
    ApiKey.StreamsGroupHeartbeat: (0, 1),
    ApiKey.StreamsGroupDescribe: (0, 1),
    ApiKey.DescribeShareGroupOffsets: (0, 1),
    ApiKey.AlterShareGroupOffsets: (0, 0),
    ApiKey.DeleteShareGroupOffsets: (0, 0),
}


def _first_flexible(flexible_versions: str) -> int:
    spec = flexible_versions.strip()
    if spec == "none":
        return NEVER_VERSION
    if not spec.endswith("+"):
        raise ValueError(f"unexpected flexibleVersions {flexible_versions!r}")
    return int(spec[:-1])


def _version_range(valid_versions: str) -> tuple[int, int]:
    low, _, high = valid_versions.partition("-")
    return int(low), int(high or low)


def _load_schemas() -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    flexible = {int(key): since for key, since in _FLEXIBLE_SINCE_NOT_SHIPPED.items()}
    versions = {int(key): span for key, span in _VERSIONS_NOT_SHIPPED.items()}
    resources = importlib.resources.files("kafka.protocol.schemas.resources")
    for entry in resources.iterdir():
        if entry.name.endswith("Request.json"):
            schema = load_json(entry.name[: -len(".json")])
            flexible[schema["apiKey"]] = _first_flexible(schema["flexibleVersions"])
            versions[schema["apiKey"]] = _version_range(schema["validVersions"])
    for key, (low, high) in ranges(*Server, where=tuple(Where)).items():
        known_low, known_high = versions.get(key, (low, high))
        versions[key] = (min(low, known_low), max(high, known_high))
    return flexible, versions


_FLEXIBLE_SINCE, _KNOWN_VERSIONS = _load_schemas()


def known_versions(api_key: int) -> tuple[int, int] | None:
    """The request versions the protocol defines for an API, as far as kgc's schemas
    know (what kgc serves included); None for an API key kgc has no schema for."""
    return _KNOWN_VERSIONS.get(api_key)


def is_flexible(api_key: int, api_version: int) -> bool | None:
    """Whether this request version uses compact types and tagged fields; None if the API is unknown."""
    since = _FLEXIBLE_SINCE.get(api_key)
    if since is None:
        return None
    return api_version >= since


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.ApiVersions:
        return 0  # KIP-511: always v0, even for the flexible v3+ bodies
    return 1 if is_flexible(api_key, api_version) else 0


class NoCommonVersion(ValueError):
    pass


def pick_version(ours: tuple[int, int], theirs: tuple[int, int] | None, name: str) -> int:
    """The newest version in both ranges; `theirs` is a peer's ApiVersions range (None: not served)."""
    if theirs is None or theirs[1] < ours[0] or theirs[0] > ours[1]:
        raise NoCommonVersion(f"upstream serves no {name} version in {ours[0]}..{ours[1]} (it has {theirs})")
    return min(ours[1], theirs[1])
