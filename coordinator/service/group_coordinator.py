"""The group coordinator service: one entry point for the group APIs.

`submit(ctx, api_key, request)` checks what needs no state (a null group id cannot be
routed: INVALID_GROUP_ID), routes each group to its `__consumer_offsets` partition
(`partition_for`, Kafka's placement), runs the shard's handler there through the
runtime, and has the answer shaped at the request's version (`protocol.answers`).
Requests naming several groups (OffsetFetch v8+, DescribeGroups, DeleteGroups) are split
by partition, the partitions run concurrently, and the answers come back in request order. FindCoordinator needs no
partition at all: kgc is the coordinator of every group, even while loading.

This module holds the only mapping from internal exceptions to error codes (Kafka's
`CoordinatorOperationExceptionHelper`); `protocol.error_responses` puts the code where
each API and version carries it:

| raised                | code                            |
|-----------------------|---------------------------------|
| `PartitionLoading`    | COORDINATOR_LOAD_IN_PROGRESS 14 (Heartbeat: NONE, Kafka answers it blindly) |
| `PartitionNotActive`  | NOT_COORDINATOR 16              |
| `RuntimeClosed`       | COORDINATOR_NOT_AVAILABLE 15    |
| `WriteTimedOut`       | COORDINATOR_NOT_AVAILABLE 15 (OffsetFetch: NOT_COORDINATOR 16, as Kafka remaps it) |
| `ApiError`            | its own code                    |
| anything else         | UNKNOWN_SERVER_ERROR -1, logged with its stack trace |
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata.find_coordinator import CoordinatorType

from coordinator.group.context import RequestContext
from coordinator.group.describe import normalized_filter
from coordinator.group.record_limits import check_group_id, fits
from coordinator.node import CoordinatorNode
from coordinator.partitioning import partition_for
from coordinator.runtime.api import (
    PartitionLoading,
    PartitionNotActive,
    RuntimeApi,
    RuntimeClosed,
    WriteTimedOut,
)
from coordinator.service.adoption import Adoption
from protocol.answers.admin import (
    delete_groups_response,
    deleted_group,
    describe_groups_response,
    described_group,
    list_groups_response,
    listed_group,
)
from protocol.answers.consumer import consumer_group_describe_response, described_consumer_group_error
from protocol.answers.coordinator import (
    coordinator_entry,
    find_coordinator_response,
    find_coordinators_response,
)
from protocol.answers.offsets import offset_fetch_group, offset_fetch_groups_response
from protocol.error_responses import error_response
from protocol.errors import ApiError, ErrorCode
from protocol.offset_fetch_codec import offset_fetch_response

log = logging.getLogger(__name__)

# Items (groups, keys, listings) one request handles before it lets the loop run others:
# a request naming 100,000 groups must not hold every other member's heartbeat.
SLICE = 1_000


def error_code_for(api_key: int, exc: BaseException) -> ErrorCode:
    match exc:
        case PartitionLoading():
            return ErrorCode.NONE if api_key == ApiKey.Heartbeat else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        case PartitionNotActive():
            return ErrorCode.NOT_COORDINATOR
        case RuntimeClosed():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        case WriteTimedOut():
            # Kafka answers REQUEST_TIMED_OUT as COORDINATOR_NOT_AVAILABLE, and for OffsetFetch as
            # NOT_COORDINATOR: clients before 3.9 retry neither REQUEST_TIMED_OUT nor, on a
            # fetch, COORDINATOR_NOT_AVAILABLE.
            return ErrorCode.NOT_COORDINATOR if api_key == ApiKey.OffsetFetch else ErrorCode.COORDINATOR_NOT_AVAILABLE
        case ApiError():
            return exc.code
    log.error("%s failed unexpectedly", ApiKey(api_key).name, exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR


class GroupCoordinatorService:
    def __init__(self, runtime: RuntimeApi, node: CoordinatorNode, adoption: Adoption | None = None,
                 transactions: Any = None,
                 learn_topics: Callable[[Iterable[str]], Awaitable[Any] | None] | None = None,
                 locate: Callable[[str], CoordinatorNode | None] | None = None,
                 note_topics: Callable[[Iterable[str]], object] | None = None):
        self._runtime = runtime
        # The coordinator of a group: this instance, unless several share the partitions
        # (coordinator/replicated/ownership.py); None while no instance owns its partition.
        self._locate = locate or (lambda group_id: node)
        self._node_id = node.node_id
        self._adoption = adoption
        # The upstream's topics, asked for again when a KIP-848 member names one kgc has not
        # seen (None: nothing to wait for); none in standalone mode.
        self._learn_topics = learn_topics
        # Told the topics a commit names, so that kgc reads a topic it has not seen yet:
        # kgc learns a topic's deletion by seeing it go from its reads (service/deleted_topics.py).
        self._note_topics = note_topics
        # Each returns the response, or a future of it (a runtime future, or a task for the
        # APIs that fan out over partitions); it may raise, and `_refuse` answers that.
        self._submitters: dict[int, Callable[[RequestContext, Any], Any]] = {
            ApiKey.FindCoordinator: self._find_coordinator,
            ApiKey.JoinGroup: partial(self._adopting_write, _join_group),
            ApiKey.SyncGroup: partial(self._single_group_write, _sync_group),
            ApiKey.Heartbeat: partial(self._single_group_write, _heartbeat),
            ApiKey.LeaveGroup: partial(self._single_group_write, _leave_group),
            ApiKey.OffsetCommit: self._noting_topics(partial(self._adopting_write, _offset_commit)),
            ApiKey.OffsetDelete: partial(self._adopting_write, _offset_delete),
            ApiKey.OffsetFetch: self._adopting(_fetched_group_ids, self._offset_fetch),
            ApiKey.DescribeGroups: self._adopting(lambda ctx, request: request.groups,
                                                  _as_task(self._describe_groups)),
            ApiKey.ListGroups: _as_task(self._list_groups),
            ApiKey.DeleteGroups: _as_task(self._delete_groups),
            ApiKey.ConsumerGroupHeartbeat: self._knowing_topics(partial(self._adopting_write,
                                                                        _consumer_group_heartbeat)),
            ApiKey.ConsumerGroupDescribe: _as_task(self._consumer_group_describe),
        }
        if transactions is not None:
            # coordinator/txn: staged upstream first, then written on the group's partition.
            self._submitters[ApiKey.TxnOffsetCommit] = self._adopting(
                lambda ctx, request: (request.group_id,), transactions.submit)

    @property
    def api_keys(self) -> frozenset[int]:
        return frozenset(self._submitters)

    def submit(self, ctx: RequestContext, api_key: int, request: Any) -> Any:
        """The response when the partition answered inline, otherwise a future to pass to
        `answer` once it is done (`net/pending_answers.py` `PendingAnswer`)."""
        try:
            return self._submitters[api_key](ctx, request)
        except Exception as exc:
            return self._refuse(ctx, api_key, request, exc)

    def answer(self, ctx: RequestContext, api_key: int, request: Any, done: asyncio.Future) -> Any:
        """The response a future from `submit` stands for; `done` is done and not cancelled."""
        exc = done.exception()
        if exc is None:
            return done.result()
        return self._refuse(ctx, api_key, request, exc)

    def _refuse(self, ctx: RequestContext, api_key: int, request: Any, exc: BaseException) -> Any:
        code = error_code_for(api_key, exc)
        log.debug("%s v%d from %s answered %s: %r", ApiKey(api_key).name, ctx.api_version,
                  ctx.client_id, code.name, exc)
        message = exc.message if isinstance(exc, ApiError) else None
        return error_response(api_key, ctx.api_version, request, code, message)

    # ---- routing ---------------------------------------------------------------------

    def _partition(self, group_id: str | None) -> int:
        if group_id is None:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "null group id")
        check_group_id(group_id)
        return partition_for(group_id, self._runtime.num_partitions)

    def _single_group_write(self, op: Callable[..., Any], ctx: RequestContext, request: Any) -> Any:
        group_id = request.group_id
        return self._runtime.submit_write(self._partition(group_id), partial(op, ctx, request), group_id)

    # ---- adoption (cut-over on first use) ---------------------------------------------

    def _adopting_write(self, op: Callable[..., Any], ctx: RequestContext, request: Any) -> Any:
        adoption = self._adoption
        if adoption is None or request.group_id in adoption.settled:
            return self._single_group_write(op, ctx, request)
        # A JoinGroup says how long its member lives without asking again; while the group
        # waits for upstream members, that is how long kgc counts it as waiting.
        session_timeout_ms = request.session_timeout_ms if op is _join_group else None
        return asyncio.ensure_future(self._after(adoption.ensure_all((request.group_id,), session_timeout_ms),
                                                 partial(self._single_group_write, op), ctx, request))

    def _adopting(self, group_ids_of: Callable[[RequestContext, Any], Iterable[str | None]],
                  submit: Callable[[RequestContext, Any], Any]) -> Callable[[RequestContext, Any], Any]:
        """`submit` once every group the request names is settled (`runtime.adoption`);
        a settled group costs a set lookup."""
        adoption = self._adoption
        if adoption is None:
            return submit
        settled = adoption.settled

        def adopting(ctx: RequestContext, request: Any) -> Any:
            group_ids = group_ids_of(ctx, request)
            if all(g in settled for g in group_ids):
                return submit(ctx, request)
            return asyncio.ensure_future(self._after(adoption.ensure_all(group_ids), submit, ctx, request))
        return adopting

    def _knowing_topics(self, submit: Callable[[RequestContext, Any], Any]) -> Callable[[RequestContext, Any], Any]:
        """`submit` once kgc's image of the upstream's topics names every topic the
        heartbeat subscribes to, or one refresh found it has not got one: a topic created a
        moment ago is then assigned in the member's first heartbeat, not one heartbeat
        interval later. Only a heartbeat that sends its subscription (the first, or one
        that changes it) names topics; a regex subscription resolves on the next refresh."""
        learn = self._learn_topics
        if learn is None:
            return submit

        def knowing(ctx: RequestContext, request: Any) -> Any:
            names = request.subscribed_topic_names
            waiting = learn(names) if names else None
            if waiting is None:
                return submit(ctx, request)
            return asyncio.ensure_future(self._after(waiting, submit, ctx, request))
        return knowing

    def _noting_topics(self, submit: Callable[[RequestContext, Any], Any]) -> Callable[[RequestContext, Any], Any]:
        """`submit`, once the topics the commit names are noted (v10 names them by id, which
        the edge resolved: a name is then one kgc has seen)."""
        note = self._note_topics
        if note is None:
            return submit

        def noting(ctx: RequestContext, request: Any) -> Any:
            note([topic.name for topic in request.topics])
            return submit(ctx, request)
        return noting

    @staticmethod
    async def _after(waiting: Awaitable[Any], submit: Callable[[RequestContext, Any], Any], ctx: RequestContext,
                     request: Any) -> Any:
        await waiting
        outcome = submit(ctx, request)
        return await outcome if isinstance(outcome, asyncio.Future) else outcome

    async def _per_partition(self, api_key: int, items: Sequence[Any], group_of: Callable[[Any], str | None],
                             run: Callable[[int, list[Any]], Awaitable[list[Any]]]) -> list[Any]:
        """`run(partition, items)` per partition, the partitions concurrently, each in slices
        awaited one after another (so a request naming 100,000 groups holds each
        partition's executor for one slice at a time); one outcome per item, in request
        order: the item's answer, or the `ErrorCode` its partition failed with. The
        partitions' slices share `SLICE` items: the loop runs every partition whose slice
        is ready before it reads a socket again, so 50 partitions' slices of `SLICE` each
        would hold it for 50 slices at once."""
        outcomes: list[Any] = [None] * len(items)
        by_partition: dict[int, list[int]] = {}
        for index, item in enumerate(items):
            if index % SLICE == SLICE - 1:
                await asyncio.sleep(0)
            try:
                by_partition.setdefault(self._partition(group_of(item)), []).append(index)
            except ApiError as exc:
                outcomes[index] = exc.code

        step = max(1, SLICE // max(1, len(by_partition)))

        async def one(partition: int, indexes: list[int]) -> None:
            for start in range(0, len(indexes), step):
                chunk = indexes[start:start + step]
                try:
                    answers = await run(partition, [items[i] for i in chunk])
                except Exception as exc:
                    answers = [error_code_for(api_key, exc)] * len(chunk)
                for index, answer in zip(chunk, answers, strict=True):
                    outcomes[index] = answer

        await asyncio.gather(*(one(p, indexes) for p, indexes in by_partition.items()))
        return outcomes

    # ---- FindCoordinator -------------------------------------------------------------

    def _find_coordinator(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        key_type = request.key_type if version >= 1 else CoordinatorType.GROUP
        match key_type:
            case CoordinatorType.GROUP:
                code, message = ErrorCode.NONE, None
            case CoordinatorType.TRANSACTION:
                # Transaction coordinators live upstream; the gateway will forward these.
                code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "kgc does not coordinate transactions"
            case _:
                code, message = ErrorCode.INVALID_REQUEST, f"kgc does not serve coordinator key type {key_type}"
        if code is not ErrorCode.NONE:
            raise ApiError(code, message)
        if version < 4:
            node = self._locate(request.key)
            if node is None:
                raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no kgc instance owns the group's partition yet")
            self._prefetch_adoption(request.key, node)
            return find_coordinator_response(version, node)

        def coordinator(key: str) -> Any:      # v4+ (KIP-699) batches keys
            node = self._locate(key)
            if node is None:
                return coordinator_entry(version, key, None, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                         "no kgc instance owns the group's partition yet")
            return coordinator_entry(version, key, node)

        keys = request.coordinator_keys
        if len(keys) == 1:
            self._prefetch_adoption(keys[0], self._locate(keys[0]))
        if len(keys) <= SLICE:
            return find_coordinators_response(version, list(map(coordinator, keys)))
        return asyncio.ensure_future(self._find_coordinators_sliced(version, keys, coordinator))

    def _prefetch_adoption(self, group_id: str, node: CoordinatorNode | None) -> None:
        """A consumer's FindCoordinator names its one group, before its first JoinGroup or
        heartbeat: adoption starts here when this instance is the group's coordinator. (A
        batch of several groups is an admin tool's, whose next request starts it anyway.)"""
        if self._adoption is not None and node is not None and node.node_id == self._node_id and group_id \
                and fits(group_id):
            self._adoption.prefetch(group_id)

    @staticmethod
    async def _find_coordinators_sliced(version: int, keys: Sequence[str], coordinator: Callable[[str], Any]) -> Any:
        return find_coordinators_response(version, await _sliced(keys, coordinator))

    # ---- OffsetFetch -----------------------------------------------------------------

    def _offset_fetch(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        if version >= 8:
            if len(request.groups) == 1:
                # What a consumer sends: its own group only. One read op, as v0-7's.
                (group,) = request.groups
                return self._runtime.submit_read(
                    self._partition(group.group_id),
                    partial(_offset_fetch_sole_group, ctx, group, request.require_stable))
            return asyncio.ensure_future(self._offset_fetch_groups(ctx, request))
        require_stable = request.require_stable if version >= 7 else False
        return self._runtime.submit_read(
            self._partition(request.group_id),
            partial(_offset_fetch_one_group, ctx, request, _requested_topics(request.topics), require_stable))

    async def _offset_fetch_groups(self, ctx: RequestContext, request: Any) -> Any:
        """v8+ (KIP-709): several groups, each routed to its own partition."""
        version = ctx.api_version
        require_stable = request.require_stable

        def fetch(partition: int, groups: list[Any]) -> Awaitable[list[Any]]:
            return self._runtime.read(partition, lambda shard: [
                _fetched_group(ctx, g, require_stable, shard) for g in groups])

        outcomes = await self._per_partition(ApiKey.OffsetFetch, request.groups, lambda g: g.group_id, fetch)
        groups = request.groups
        return offset_fetch_groups_response(version, await _sliced(
            range(len(groups)), lambda i: offset_fetch_group(version, groups[i].group_id, outcomes[i])))

    # ---- DescribeGroups / ListGroups / DeleteGroups ----------------------------------

    async def _describe_groups(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version

        def describe(partition: int, group_ids: list[str]) -> Awaitable[list[Any]]:
            return self._runtime.read(partition, lambda shard: [
                _answer_or_code(partial(shard.describe_group, ctx, g)) for g in group_ids])

        outcomes = await self._per_partition(ApiKey.DescribeGroups, request.groups, lambda g: g, describe)
        return describe_groups_response(version, await _sliced(
            range(len(outcomes)), lambda i: described_group(version, request.groups[i], outcomes[i])))

    async def _consumer_group_describe(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version

        def describe(partition: int, group_ids: list[str]) -> Awaitable[list[Any]]:
            return self._runtime.read(partition, lambda shard: [
                shard.describe_consumer_group(ctx, g) for g in group_ids])

        outcomes = await self._per_partition(ApiKey.ConsumerGroupDescribe, request.group_ids, lambda g: g, describe)
        groups = []
        for group_id, outcome in zip(request.group_ids, outcomes, strict=True):
            if not group_id.strip():
                outcome = described_consumer_group_error(version, "", ErrorCode.INVALID_GROUP_ID)
            elif isinstance(outcome, ErrorCode):
                outcome = described_consumer_group_error(version, group_id, outcome)
            groups.append(outcome)
        return consumer_group_describe_response(version, groups)

    async def _list_groups(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        # v4 (KIP-518) filters by state, v5 (KIP-848) by type; empty means all.
        states = normalized_filter(request.states_filter) if version >= 4 else frozenset()
        types = normalized_filter(request.types_filter) if version >= 5 else frozenset()

        async def listing(partition: int) -> list[Any]:
            try:
                return await self._runtime.read(partition, lambda shard: shard.list_groups(states, types))
            except PartitionNotActive:
                # Kafka skips partitions it does not coordinate; a failed one is not ours now.
                log.debug("ListGroups skips partition %d: not active", partition)
                return []

        listings = await asyncio.gather(*(listing(p) for p in range(self._runtime.num_partitions)),
                                        return_exceptions=True)
        listed = []
        for partition_listing in listings:
            if isinstance(partition_listing, BaseException):
                # One partition still loading (or failing otherwise) answers for the whole request.
                raise partition_listing
            listed.extend(partition_listing)
        return list_groups_response(version, await _sliced(listed, partial(listed_group, version)))

    async def _delete_groups(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version

        async def delete(partition: int, group_ids: list[str]) -> list[Any]:
            codes = dict(await self._runtime.write(partition,
                                                   lambda shard, handle: shard.delete_groups(ctx, group_ids)))
            return [codes[g] for g in group_ids]

        # A group named twice is deleted once and both get its answer, even across slices.
        unique = list(dict.fromkeys(request.groups_names))
        codes = dict(zip(unique, await self._per_partition(ApiKey.DeleteGroups, unique, lambda g: g, delete),
                         strict=True))
        return delete_groups_response(version, await _sliced(
            request.groups_names, lambda group_id: deleted_group(version, group_id, codes[group_id])))


# The single-group writes, as `op(ctx, request, shard, handle)` for `partial`: the request
# path builds one `partial` per request and no closure (docs/benchmarks/notes.md, "Heartbeat request path").

def _join_group(ctx: RequestContext, request: Any, shard: Any, handle: Any) -> Any:
    return shard.join_group(ctx, request, handle)


def _sync_group(ctx: RequestContext, request: Any, shard: Any, handle: Any) -> Any:
    return shard.sync_group(ctx, request, handle)


def _heartbeat(ctx: RequestContext, request: Any, shard: Any, handle: Any) -> Any:
    return shard.heartbeat(ctx, request)


def _leave_group(ctx: RequestContext, request: Any, shard: Any, handle: Any) -> Any:
    return shard.leave_group(ctx, request)


def _offset_commit(ctx: RequestContext, request: Any, shard: Any, handle: Any) -> Any:
    return shard.commit_offsets(ctx, request)


def _offset_delete(ctx: RequestContext, request: Any, shard: Any, handle: Any) -> Any:
    return shard.delete_offsets(ctx, request)


def _consumer_group_heartbeat(ctx: RequestContext, request: Any, shard: Any, handle: Any) -> Any:
    return shard.consumer_group_heartbeat(ctx, request)


def _fetching_member(version: int, group: Any) -> tuple[str | None, int]:
    """OffsetFetch v9+ (KIP-848) names the member fetching, checked against a consumer group."""
    return (group.member_id, group.member_epoch) if version >= 9 else (None, -1)


def _fetched_group(ctx: RequestContext, group: Any, require_stable: bool, shard: Any) -> Any:
    """OffsetFetch v8+: one group's `OffsetFetchGroup`, or the code it is refused with."""
    version = ctx.api_version
    return _answer_or_code(lambda: shard.fetch_offsets(ctx, group.group_id, _requested_topics(group.topics),
                                                       require_stable, _fetching_member(version, group),
                                                       _requested_topic_ids(version, group.topics)))


def _offset_fetch_sole_group(ctx: RequestContext, group: Any, require_stable: bool, shard: Any) -> Any:
    """OffsetFetch v8+ naming one group, as a read op: the answer `_offset_fetch_groups` gives."""
    version = ctx.api_version
    return offset_fetch_groups_response(
        version, [offset_fetch_group(version, group.group_id, _fetched_group(ctx, group, require_stable, shard))])


def _offset_fetch_one_group(ctx: RequestContext, request: Any, topics: list[tuple[str, list[int]]] | None,
                            require_stable: bool, shard: Any) -> Any:
    """OffsetFetch v0-7, as a read op."""
    group = shard.fetch_offsets(ctx, request.group_id, topics, require_stable)
    if group.error is not ErrorCode.NONE:
        # v0-1 copy a group error into every partition, v2-7 carry it on top.
        raise ApiError(group.error)
    return offset_fetch_response(ctx.api_version, ((t.name, t.partitions) for t in group.topics), ErrorCode.NONE)


def _fetched_group_ids(ctx: RequestContext, request: Any) -> list[str | None]:
    if ctx.api_version >= 8:  # KIP-709: several groups
        return [g.group_id for g in request.groups]
    return [request.group_id]


async def _sliced(items: Sequence[Any], build: Callable[[Any], Any]) -> list[Any]:
    """`[build(x) for x in items]`, yielding to the loop after every `SLICE` items."""
    built: list[Any] = []
    for start in range(0, len(items), SLICE):
        if start:
            await asyncio.sleep(0)
        built.extend(build(x) for x in items[start:start + SLICE])
    return built


def _as_task(handler: Callable[[RequestContext, Any], Awaitable[Any]]) -> Callable[[RequestContext, Any], Any]:
    return lambda ctx, request: asyncio.ensure_future(handler(ctx, request))


def _answer_or_code(call: Callable[[], Any]) -> Any:
    """One group's answer inside a multi-group op: an `ApiError` for it is its code only."""
    try:
        return call()
    except ApiError as exc:
        return exc.code


def _requested_topics(topics: Sequence[Any] | None) -> list[tuple[str, list[int]]] | None:
    if topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in topics]


def _requested_topic_ids(version: int, topics: Sequence[Any] | None) -> dict[str, uuid.UUID] | None:
    """OffsetFetch v10+: the id each topic was asked by (the edge named it), by name."""
    if version < 10 or topics is None:
        return None
    return {t.name: t.topic_id for t in topics if t.name and t.topic_id is not None and t.topic_id.int}

