"""The table of APIs kgc answers itself: one row per API.

Each row says what kgc serves of an API and how: the versions it offers, the classes that
decode the request and encode the answer, where the API puts an error (its error answer,
in `protocol.answers`), who serves it, and the ACL checks Kafka's `KafkaApis` makes before
it does. Everything that needs one of these reads it here:

| column         | read by                                                                 |
|----------------|-------------------------------------------------------------------------|
| `versions`     | `protocol.api_keys` (`LOCAL_VERSIONS`, `SASL_VERSIONS`, `TXN_OFFSET_COMMIT_VERSIONS`), so the dispatcher's ranges and ApiVersions' |
| `request`, `response` | `protocol.messages` (decoding, `request_class`, `response_class`) |
| `error_answer` | `protocol.error_responses.error_response`                               |
| `served_by`, `where` | `protocol.api_keys`; `tests/net/test_api_tables.py` checks the service and the dispatcher agree |
| `acl`          | `coordinator.net.authorization` and the dispatcher's AddOffsetsToTxn    |

Heartbeat, OffsetCommit and OffsetFetch v0-7 also have hand codecs for the common case
(`protocol.messages` tries them first); they decode to and encode from the same classes.

The ACL checks name Kafka's `AclOperation` and `ResourceType` (`coordinator.security.acl`
has both enums, one layer up), at most one operation per resource type, in the order
Kafka makes them. What a denial looks like in each answer is the authorizer's business
(`coordinator/net/authorization.py`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer.transaction import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from protocol.answers import admin, classic, consumer, coordinator, local, offsets, sasl, transactions
from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.txn_offset_commit_messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse


class Server(enum.Enum):
    """Who answers an API."""
    CONNECTION = "the connection itself (coordinator/net/local_answers.py)"
    SASL = "the connection's login (coordinator/net/sasl.py)"
    SERVICE = "the group coordinator service (coordinator/service)"
    TRANSACTIONS = "the transactional commits, from the dispatcher (coordinator/txn)"


class Where(enum.Enum):
    """Where kgc answers an API rather than forward it (or refuse it, for a group API)."""
    ALWAYS = "on every listener"
    STANDALONE = "only without an upstream, where kgc is the whole cluster"
    WITH_UPSTREAM = "only with an upstream, whose transaction coordinator decides each transaction"


@dataclass(frozen=True, slots=True)
class Acl:
    operation: str      # Kafka's AclOperation name
    resource: str       # Kafka's ResourceType name


# (api, version, request or None, code, message) -> the API's answer carrying the code
ErrorAnswer = Callable[[Any, int, Any, int, "str | None"], ApiMessage]


@dataclass(frozen=True, slots=True)
class Api:
    key: ApiKey
    # The versions kgc offers and answers; None: the upstream's, as it is forwarded
    # untouched unless kgc answers it (AddOffsetsToTxn, coordinator/txn).
    versions: tuple[int, int] | None
    request: type[ApiMessage]
    response: type[ApiMessage]
    error_answer: ErrorAnswer
    served_by: Server
    where: Where = Where.ALWAYS
    acl: tuple[Acl, ...] = ()       # none: the API needs no permission (a client may always log in)


def _acl(*checks: str) -> tuple[Acl, ...]:
    """"READ GROUP", "DESCRIBE TOPIC", ... in Kafka's order."""
    return tuple(Acl(*check.split()) for check in checks)


# Kafka 4.x serves these APIs at the versions in its `clients/src/main/resources/common/
# message/*.json`; why kgc's ranges are what they are: `protocol.api_keys`.
_ROWS = (
    Api(ApiKey.ApiVersions, (0, 4), ApiVersionsRequest, ApiVersionsResponse,
        local.api_versions_error, Server.CONNECTION),
    Api(ApiKey.FindCoordinator, (0, 6), FindCoordinatorRequest, FindCoordinatorResponse,
        coordinator.find_coordinator_error, Server.SERVICE, acl=_acl("DESCRIBE GROUP")),
    Api(ApiKey.JoinGroup, (0, 9), JoinGroupRequest, JoinGroupResponse,
        classic.join_group_error, Server.SERVICE, acl=_acl("READ GROUP")),
    Api(ApiKey.Heartbeat, (0, 4), HeartbeatRequest, HeartbeatResponse,
        classic.heartbeat_error, Server.SERVICE, acl=_acl("READ GROUP")),
    Api(ApiKey.LeaveGroup, (0, 5), LeaveGroupRequest, LeaveGroupResponse,
        classic.leave_group_error, Server.SERVICE, acl=_acl("READ GROUP")),
    Api(ApiKey.SyncGroup, (0, 5), SyncGroupRequest, SyncGroupResponse,
        classic.sync_group_error, Server.SERVICE, acl=_acl("READ GROUP")),
    Api(ApiKey.OffsetCommit, (0, 10), OffsetCommitRequest, OffsetCommitResponse,
        offsets.offset_commit_error, Server.SERVICE, acl=_acl("READ GROUP", "READ TOPIC")),
    Api(ApiKey.OffsetFetch, (0, 10), OffsetFetchRequest, OffsetFetchResponse,
        offsets.offset_fetch_error, Server.SERVICE, acl=_acl("DESCRIBE GROUP", "DESCRIBE TOPIC")),
    Api(ApiKey.DescribeGroups, (0, 6), DescribeGroupsRequest, DescribeGroupsResponse,
        admin.describe_groups_error, Server.SERVICE, acl=_acl("DESCRIBE GROUP")),
    # DESCRIBE on the cluster lists every group; without it, the groups one may describe.
    Api(ApiKey.ListGroups, (0, 5), ListGroupsRequest, ListGroupsResponse,
        admin.list_groups_error, Server.SERVICE, acl=_acl("DESCRIBE CLUSTER", "DESCRIBE GROUP")),
    Api(ApiKey.DeleteGroups, (0, 2), DeleteGroupsRequest, DeleteGroupsResponse,
        admin.delete_groups_error, Server.SERVICE, acl=_acl("DELETE GROUP")),
    Api(ApiKey.OffsetDelete, (0, 0), OffsetDeleteRequest, OffsetDeleteResponse,
        offsets.offset_delete_error, Server.SERVICE, acl=_acl("DELETE GROUP", "READ TOPIC")),
    Api(ApiKey.Metadata, (0, 12), MetadataRequest, MetadataResponse,
        local.metadata_error, Server.CONNECTION, Where.STANDALONE),
    Api(ApiKey.ConsumerGroupHeartbeat, (0, 1), ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
        consumer.consumer_group_heartbeat_error, Server.SERVICE, acl=_acl("READ GROUP", "DESCRIBE TOPIC")),
    Api(ApiKey.ConsumerGroupDescribe, (0, 1), ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
        consumer.consumer_group_describe_error, Server.SERVICE, acl=_acl("DESCRIBE GROUP", "DESCRIBE TOPIC")),
    # With SASL enabled, SaslHandshake v1 only (`coordinator/net/local_answers.py`).
    Api(ApiKey.SaslHandshake, (0, 1), SaslHandshakeRequest, SaslHandshakeResponse,
        sasl.sasl_handshake_error, Server.SASL),
    Api(ApiKey.SaslAuthenticate, (0, 2), SaslAuthenticateRequest, SaslAuthenticateResponse,
        sasl.sasl_authenticate_error, Server.SASL),
    Api(ApiKey.TxnOffsetCommit, (0, 6), TxnOffsetCommitRequest, TxnOffsetCommitResponse,
        transactions.txn_offset_commit_error, Server.SERVICE, Where.WITH_UPSTREAM,
        acl=_acl("WRITE TRANSACTIONAL_ID", "READ GROUP", "READ TOPIC")),
    Api(ApiKey.AddOffsetsToTxn, None, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
        transactions.add_offsets_to_txn_error, Server.TRANSACTIONS, Where.WITH_UPSTREAM,
        acl=_acl("WRITE TRANSACTIONAL_ID", "READ GROUP")),
)

APIS: MappingProxyType[int, Api] = MappingProxyType({api.key: api for api in _ROWS})


def ranges(*servers: Server, where: tuple[Where, ...] = (Where.ALWAYS, Where.STANDALONE)
           ) -> dict[ApiKey, tuple[int, int]]:
    """The offered ranges of the APIs `servers` answer `where`."""
    return {api.key: api.versions for api in _ROWS
            if api.served_by in servers and api.where in where and api.versions is not None}


def operation(api_key: int, resource: str) -> str:
    """The operation the API needs on `resource` (KeyError: it checks none there)."""
    return next(acl.operation for acl in APIS[api_key].acl if acl.resource == resource)
