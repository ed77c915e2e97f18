"""Authorization of the group APIs kgc answers, as Kafka's `KafkaApis` does it.

kgc answers these requests itself, so the upstream never sees them: kgc must check them.
`guard` runs before the request reaches the coordinator service, so a denied request
changes no state and never learns whether a group exists. The operation each check needs
is read from the API's row in `protocol.apis` (`needs`); the checks and their denials, per API:

| API | needs | denied |
|---|---|---|
| FindCoordinator (groups) | DESCRIBE GROUP key | v0-3: top-level 30; v4+: per key 30 |
| JoinGroup, SyncGroup, Heartbeat, LeaveGroup | READ GROUP | top-level 30 |
| OffsetCommit | READ GROUP, then READ TOPIC | every partition 30; partitions of a denied topic 29 |
| TxnOffsetCommit | WRITE TRANSACTIONAL_ID, then as OffsetCommit | every partition 53, then as OffsetCommit |
| AddOffsetsToTxn (`net/dispatch.py`) | WRITE TRANSACTIONAL_ID, READ GROUP | 53, 30 |
| OffsetFetch | DESCRIBE GROUP, then DESCRIBE TOPIC | group error 30; a denied topic asked for: offset -1, 29; all topics asked: denied ones left out |
| DescribeGroups, ConsumerGroupDescribe | DESCRIBE GROUP each | that group 30; `authorized_operations` filled in when asked |
| ConsumerGroupDescribe, then | DESCRIBE TOPIC of each topic a member is or will be assigned | that group 29, no members |
| ListGroups | DESCRIBE CLUSTER, else DESCRIBE GROUP each | groups not described are left out (no error) |
| DeleteGroups | DELETE GROUP each | that group 30 |
| OffsetDelete | DELETE GROUP, then READ TOPIC | top-level 30; partitions of a denied topic 29 |
| ConsumerGroupHeartbeat | READ GROUP, then DESCRIBE each subscribed topic name | top-level 30, then 29; a regex resolves to the topics the member may describe (`net/dispatch.py` hands the group layer the check) |

A request denied in part is submitted without the denied part; `finish` adds the denied
entries (or removes what may not be seen) in the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from kafka.protocol.api_key import ApiKey

from coordinator import metrics
from coordinator.net.connection import ProtocolViolation
from coordinator.security.acl import CLUSTER_NAME, AclSnapshot, Operation, ResourceType
from protocol.answers.offsets import offset_delete_topic_error, offset_fetch_topic_error
from protocol.apis import operation
from protocol.error_responses import error_response
from protocol.errors import ErrorCode

GROUP_KEY = 0
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


@dataclass(frozen=True, slots=True)
class Caller:
    acls: AclSnapshot
    principal: str
    host: str

    def group(self, op: Operation, name: str) -> bool:
        return self.acls.authorize(self.principal, self.host, op, ResourceType.GROUP, name)

    def topic(self, op: Operation, name: str) -> bool:
        return self.acls.authorize(self.principal, self.host, op, ResourceType.TOPIC, name)

    def cluster(self, op: Operation) -> bool:
        return self.acls.authorize(self.principal, self.host, op, ResourceType.CLUSTER, CLUSTER_NAME)

    def transactional_id(self, op: Operation, name: str) -> bool:
        return self.acls.authorize(self.principal, self.host, op, ResourceType.TRANSACTIONAL_ID, name)


@dataclass(slots=True)
class Guarded:
    """What to do with a request: answer `refusal` now, or submit `request` and pass the
    answer through `finish` (None: as it is)."""
    request: Any = None
    finish: Callable[[Any], Any] | None = None
    refusal: Any = None
    denied: bool = False            # some of it was refused (for the denials metric)


def without_topics(api_key: int, version: int, request: Any, kept: list, refused: list, code: int) -> Guarded:
    """OffsetCommit or TxnOffsetCommit with only the topic entries `kept`; each of `refused`
    (a topic with the partitions it refuses) is answered `code`. With nothing kept, the
    answer is given here without touching the group, as Kafka's `KafkaApis` gives it."""
    answer = error_response(api_key, version, SimpleNamespace(topics=refused), code)
    if not kept:
        return Guarded(refusal=answer)
    request.topics = kept
    return Guarded(request, _append("topics", answer.topics))


def needs(api_key: int, resource: ResourceType) -> Operation:
    """The operation `api_key` needs on `resource`, from its row's ACL checks (`protocol.apis`)."""
    return Operation[operation(api_key, resource.name)]


def guard(api_key: int, version: int, request: Any, caller: Caller) -> Guarded:
    check = _GUARDS.get(api_key)
    if check is None:       # fail closed: a local API without a rule is never answered
        raise ProtocolViolation(f"api key {api_key} has no authorization rule: not answered")
    guarded = check(version, request, caller)
    if guarded.denied:
        metrics.authorization_denied(api_key)
    return guarded


def _refuse(api_key: int, version: int, request: Any, code: int = GROUP_DENIED) -> Guarded:
    return Guarded(refusal=error_response(api_key, version, request, code), denied=True)


def _single_group(api_key: int):
    group_op = needs(api_key, ResourceType.GROUP)

    def check(version: int, request: Any, caller: Caller) -> Guarded:
        if caller.group(group_op, request.group_id):
            return Guarded(request)
        return _refuse(api_key, version, request)
    return check


_COORDINATOR_GROUP_OP = needs(ApiKey.FindCoordinator, ResourceType.GROUP)


def _find_coordinator(version: int, request: Any, caller: Caller) -> Guarded:
    if request.key_type != GROUP_KEY:
        return Guarded(request)
    if version < 4:
        if caller.group(_COORDINATOR_GROUP_OP, request.key):
            return Guarded(request)
        return _refuse(ApiKey.FindCoordinator, version, request)
    return _per_group(ApiKey.FindCoordinator, version, request, caller, _COORDINATOR_GROUP_OP,
                      "coordinator_keys", "coordinators")


def _per_group(api_key: int, version: int, request: Any, caller: Caller, op: Operation, asked: str,
               answered: str) -> Guarded:
    """A batch of group names (`request.<asked>`): the denied ones are taken out of the
    request and answered GROUP_AUTHORIZATION_FAILED in `response.<answered>`."""
    names = getattr(request, asked)
    denied = [name for name in names if not caller.group(op, name)]
    if not denied:
        return Guarded(request)
    if len(denied) == len(names):
        return _refuse(api_key, version, request)
    setattr(request, asked, [name for name in names if name not in denied])
    refused = error_response(api_key, version, SimpleNamespace(**{asked: denied}), GROUP_DENIED)
    return Guarded(request, _append(answered, getattr(refused, answered)), denied=True)


def _append(attribute: str, entries: list) -> Callable[[Any], Any]:
    def finish(response: Any) -> Any:
        setattr(response, attribute, list(getattr(response, attribute)) + entries)
        return response
    return finish


def _commit_like(api_key: int):
    """OffsetCommit, TxnOffsetCommit and OffsetDelete: a group check, then one on each topic."""
    group_op, topic_op = needs(api_key, ResourceType.GROUP), needs(api_key, ResourceType.TOPIC)

    def check(version: int, request: Any, caller: Caller) -> Guarded:
        if not caller.group(group_op, request.group_id):
            return _refuse(api_key, version, request)
        denied = [t for t in request.topics if _named(version, t) and not caller.topic(topic_op, t.name)]
        if not denied:
            return Guarded(request)
        kept = [t for t in request.topics if t not in denied]
        if api_key in (ApiKey.OffsetCommit, ApiKey.TxnOffsetCommit):
            guarded = without_topics(api_key, version, request, kept, denied, TOPIC_DENIED)
            guarded.denied = True
            return guarded
        refused = [offset_delete_topic_error(version, t, TOPIC_DENIED) for t in denied]
        request.topics = kept
        if not request.topics:
            answer = _append("topics", refused)(error_response(api_key, version, request, ErrorCode.NONE))
            return Guarded(refusal=answer, denied=True)
        return Guarded(request, _append("topics", refused), denied=True)
    return check


def _txn_offset_commit():
    """Kafka's order: the transactional id first, then as OffsetCommit."""
    txn_op = needs(ApiKey.TxnOffsetCommit, ResourceType.TRANSACTIONAL_ID)
    commit_like = _commit_like(ApiKey.TxnOffsetCommit)

    def check(version: int, request: Any, caller: Caller) -> Guarded:
        if not caller.transactional_id(txn_op, request.transactional_id):
            return _refuse(ApiKey.TxnOffsetCommit, version, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return commit_like(version, request, caller)
    return check


_FETCH_GROUP_OP = needs(ApiKey.OffsetFetch, ResourceType.GROUP)
_FETCH_TOPIC_OP = needs(ApiKey.OffsetFetch, ResourceType.TOPIC)


def _offset_fetch(version: int, request: Any, caller: Caller) -> Guarded:
    if version < 8:
        if not caller.group(_FETCH_GROUP_OP, request.group_id):
            return _refuse(ApiKey.OffsetFetch, version, request)
        denied, keep_topic = _fetch_topics(version, request, caller)

        def finish_topics(response: Any) -> Any:
            response.topics = [t for t in response.topics if keep_topic(t.name)] + [
                offset_fetch_topic_error(version, t, TOPIC_DENIED) for t in denied]
            return response
        return Guarded(request, finish_topics if denied or request.topics is None else None, denied=bool(denied))
    denied_groups = [g for g in request.groups if not caller.group(_FETCH_GROUP_OP, g.group_id)]
    if len(denied_groups) == len(request.groups):
        return _refuse(ApiKey.OffsetFetch, version, request)
    request.groups = [g for g in request.groups if g not in denied_groups]
    denied_topics = {}
    for group in request.groups:
        denied, keep = _fetch_topics(version, group, caller)
        denied_topics[group.group_id] = (denied, keep)
    refused = error_response(ApiKey.OffsetFetch, version, SimpleNamespace(groups=denied_groups), GROUP_DENIED).groups

    def finish(response: Any) -> Any:
        for group in response.groups:
            denied, keep = denied_topics.get(group.group_id, ((), lambda _: True))
            group.topics = [t for t in group.topics if keep(t.name)] + [
                offset_fetch_topic_error(version, t, TOPIC_DENIED) for t in denied]
        response.groups = list(response.groups) + refused
        return response
    return Guarded(request, finish, denied=bool(denied_groups) or any(d for d, _ in denied_topics.values()))


def _named(version: int, topic: Any) -> bool:
    """v10 names topics by id: one whose id kgc does not know has no name (no topic has
    the empty one) and is answered UNKNOWN_TOPIC_ID after this (`net/topic_ids.py`)."""
    return version < 10 or topic.name != ""


def _fetch_topics(version: int, holder: Any, caller: Caller):
    """Topics asked for by name: (denied ones, removed from `holder`); all topics: a filter."""
    if holder.topics is None:
        return [], lambda name: caller.topic(_FETCH_TOPIC_OP, name)
    denied = [t for t in holder.topics if _named(version, t) and not caller.topic(_FETCH_TOPIC_OP, t.name)]
    holder.topics = [t for t in holder.topics if t not in denied]
    return denied, lambda name: True


def _describe(api_key: int, asked: str, bits, hide=None):
    """DescribeGroups and ConsumerGroupDescribe: DESCRIBE per group, and the caller's
    operations on each described group when asked (`bits` shapes the codec's field);
    `hide(response, caller)` first replaces what the caller may not see."""
    group_op = needs(api_key, ResourceType.GROUP)

    def check(version: int, request: Any, caller: Caller) -> Guarded:
        guarded = _per_group(api_key, version, request, caller, group_op, asked, "groups")
        operations = getattr(request, "include_authorized_operations", False)
        if guarded.refusal is not None or not (operations or hide):
            return guarded
        merge = guarded.finish

        def finish(response: Any) -> Any:
            if hide is not None:
                hide(version, response, caller)
            for group in response.groups if operations else ():
                if group.error_code == ErrorCode.NONE:
                    group.authorized_operations = bits(caller.acls.authorized_operations(
                        caller.principal, caller.host, ResourceType.GROUP, group.group_id))
            return response if merge is None else merge(response)
        guarded.finish = finish
        return guarded
    return check


UNDESCRIBABLE_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


_DESCRIBED_TOPIC_OP = needs(ApiKey.ConsumerGroupDescribe, ResourceType.TOPIC)


def _hide_undescribable_topics(version: int, response: Any, caller: Caller) -> None:
    """Kafka 4 (KAFKA-18813): a consumer group one of whose members is assigned, or is to
    be assigned, a topic the caller may not describe is answered TOPIC_AUTHORIZATION_FAILED
    with no members, so neither the topic's name nor who holds it is told."""
    def hidden(group: Any) -> bool:
        return any(not caller.topic(_DESCRIBED_TOPIC_OP, tp.topic_name) for member in group.members
                   for assignment in (member.assignment, member.target_assignment)
                   for tp in assignment.topic_partitions)
    refused = [group.group_id for group in response.groups if hidden(group)]
    if not refused:
        return
    rows = iter(error_response(ApiKey.ConsumerGroupDescribe, version, SimpleNamespace(group_ids=refused),
                               TOPIC_DENIED, UNDESCRIBABLE_TOPICS).groups)
    response.groups = [next(rows) if group.group_id in refused else group for group in response.groups]


_LIST_CLUSTER_OP = needs(ApiKey.ListGroups, ResourceType.CLUSTER)
_LIST_GROUP_OP = needs(ApiKey.ListGroups, ResourceType.GROUP)


def _list_groups(version: int, request: Any, caller: Caller) -> Guarded:
    if caller.cluster(_LIST_CLUSTER_OP):
        return Guarded(request)

    def finish(response: Any) -> Any:
        response.groups = [g for g in response.groups if caller.group(_LIST_GROUP_OP, g.group_id)]
        return response
    return Guarded(request, finish)


_DELETE_GROUP_OP = needs(ApiKey.DeleteGroups, ResourceType.GROUP)


def _delete_groups(version: int, request: Any, caller: Caller) -> Guarded:
    return _per_group(ApiKey.DeleteGroups, version, request, caller, _DELETE_GROUP_OP, "groups_names", "results")


_HEARTBEAT_GROUP_OP = needs(ApiKey.ConsumerGroupHeartbeat, ResourceType.GROUP)
_SUBSCRIBED_TOPIC_OP = needs(ApiKey.ConsumerGroupHeartbeat, ResourceType.TOPIC)


def _consumer_group_heartbeat(version: int, request: Any, caller: Caller) -> Guarded:
    if not caller.group(_HEARTBEAT_GROUP_OP, request.group_id):
        return _refuse(ApiKey.ConsumerGroupHeartbeat, version, request)
    if any(not caller.topic(_SUBSCRIBED_TOPIC_OP, name) for name in request.subscribed_topic_names or ()):
        return _refuse(ApiKey.ConsumerGroupHeartbeat, version, request, TOPIC_DENIED)
    return Guarded(request)


_GUARDS = {
    ApiKey.FindCoordinator: _find_coordinator,
    ApiKey.JoinGroup: _single_group(ApiKey.JoinGroup),
    ApiKey.SyncGroup: _single_group(ApiKey.SyncGroup),
    ApiKey.Heartbeat: _single_group(ApiKey.Heartbeat),
    ApiKey.LeaveGroup: _single_group(ApiKey.LeaveGroup),
    ApiKey.OffsetCommit: _commit_like(ApiKey.OffsetCommit),
    ApiKey.OffsetDelete: _commit_like(ApiKey.OffsetDelete),
    ApiKey.TxnOffsetCommit: _txn_offset_commit(),
    ApiKey.OffsetFetch: _offset_fetch,
    ApiKey.DescribeGroups: _describe(ApiKey.DescribeGroups, "groups", set),
    ApiKey.ConsumerGroupDescribe: _describe(ApiKey.ConsumerGroupDescribe, "group_ids",
                                            lambda ops: sum(1 << op for op in ops), _hide_undescribable_topics),
    ApiKey.ListGroups: _list_groups,
    ApiKey.DeleteGroups: _delete_groups,
    ApiKey.ConsumerGroupHeartbeat: _consumer_group_heartbeat,
}
