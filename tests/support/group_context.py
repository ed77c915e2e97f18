"""`GroupTestContext`: a `GroupShard` driven as the runtime drives it, on a manual clock.

A port of Kafka's GroupMetadataManagerTestContext. Every Result goes through `_apply`,
which does what the partition runtime does: replay the records (unless `replay=False`),
append them to the log (`written`), collect the replies for parked requests, and run
`after_commit` once the batch is "durable" — at once, or when `commit_pending()` is
called while `auto_commit` is False. `sleep(ms)` advances the clock and runs the due
timers one by one through the same path.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from coordinator.common.result import Reply, Result
from coordinator.group.config import GroupConfig
from coordinator.group.context import RequestContext
from coordinator.group.shard import GroupShard
from coordinator.group.timer import join_key
from coordinator.group.topics import EMPTY_TOPIC_IMAGE, TopicImage, TopicMetadata
from coordinator.records import CoordinatorRecord, deserialize_record, serialize_key, serialize_value
from protocol.errors import ApiError
from tests.support import builders
from tests.support.clock import ManualClock
from tests.support.manual_timer import ManualTimer


@dataclass
class Call:
    """What one request got: its handle, the Result, and its response once it has one."""

    handle: int
    result: Result
    ctx: GroupTestContext = field(repr=False)

    @property
    def response(self) -> Any:
        return self.result.response if self.result.response is not None else self.ctx.replies.get(self.handle)

    @property
    def error(self) -> int | None:
        r = self.response
        return None if r is None else r.error_code


@dataclass
class ConsumerHeartbeatCall:
    """A ConsumerGroupHeartbeat's answer, or the ApiError it was refused with; the
    assignment as {topic name: partitions}."""

    response: Any
    refused: ApiError | None
    ctx: GroupTestContext = field(repr=False)

    @property
    def error(self) -> int:
        return int(self.refused.code) if self.refused is not None else self.response.error_code

    @property
    def epoch(self) -> int:
        return self.response.member_epoch

    @property
    def assignment(self) -> dict[str, set[int]] | None:
        if self.response.assignment is None:
            return None
        names = {t.topic_id: t.name for t in self.ctx.topics.by_name.values()}
        return {names[t.topic_id]: set(t.partitions) for t in self.response.assignment.topic_partitions}


class GroupTestContext:
    def __init__(self, start_ms: int = 1_000_000, **config: Any):
        self.clock = ManualClock(start_ms)
        self.timer = ManualTimer(self.clock.now_ms)
        # Target assignments at every change, unless a test sets the interval (KIP-1263):
        # most tests step members one at a time at one instant, as Kafka's own tests do
        # with the interval 0. tests/coordinator/test_consumer_assignment_interval.py tests it.
        config.setdefault("consumer_assignment_interval_ms", 0)
        self.config = GroupConfig(**config)
        self._ids = itertools.count(1)
        self._handles = itertools.count(1)
        self.topics: TopicImage = EMPTY_TOPIC_IMAGE
        self.shard = GroupShard(0, self.config, self.timer, self.clock.now_ms,
                                lambda prefix: f"{prefix}-{next(self._ids)}", lambda: self.topics)
        self.replies: dict[int, Any] = {}
        self.written: list[CoordinatorRecord] = []
        self.auto_commit = True
        self.pending_commits: list = []
        self._offset = 0
        # A partition is loaded (here: from an empty log) before it serves requests.
        self.shard.on_loaded()

    # ------------------------------------------------------------ the runtime's part

    def _apply(self, result: Result) -> Result:
        for record in result.records:
            if result.replay:
                self.shard.replay(self._offset, record)
            self._offset += 1
        self.written.extend(result.records)
        for reply in result.replies:
            self._deliver(reply)
        if result.after_commit is not None:
            if self.auto_commit:
                self._apply(result.after_commit())
            else:
                self.pending_commits.append(result.after_commit)
        return result

    def _deliver(self, reply: Reply) -> None:
        assert reply.handle not in self.replies, f"handle {reply.handle} answered twice"
        self.replies[reply.handle] = reply.response

    def commit_pending(self) -> None:
        pending, self.pending_commits = self.pending_commits, []
        for op in pending:
            self._apply(op())

    def sleep(self, ms: int) -> list[str]:
        """Advance time and run every timer that falls due; returns their keys in order."""
        now = self.clock.advance(ms)
        fired = []
        for key, op in self.timer.poll(now):
            fired.append(key)
            self._apply(op())
        return fired

    def deadline_in(self, key: Hashable) -> int | None:
        deadline = self.timer.deadline_ms(key)
        return None if deadline is None else deadline - self.clock.now_ms()

    # ------------------------------------------------------------ requests

    @staticmethod
    def rctx(version: int, client_id: str = "client", client_host: str = "/127.0.0.1") -> RequestContext:
        return RequestContext(api_version=version, client_id=client_id, client_host=client_host)

    def join(self, version: int = 5, client_id: str = "client", **fields: Any) -> Call:
        handle = next(self._handles)
        result = self.shard.join_group(self.rctx(version, client_id), builders.join_request(version, **fields), handle)
        return Call(handle, self._apply(result), self)

    def sync(self, version: int = 3, **fields: Any) -> Call:
        handle = next(self._handles)
        result = self.shard.sync_group(self.rctx(version), builders.sync_request(version, **fields), handle)
        return Call(handle, self._apply(result), self)

    def heartbeat(self, version: int = 3, **fields: Any) -> Call:
        return Call(0, self._apply(self.shard.heartbeat(self.rctx(version), builders.heartbeat_request(version, **fields))),
                    self)

    def leave(self, version: int = 3, group_id: str = "g", members=()) -> Call:
        return Call(0, self._apply(self.shard.leave_group(self.rctx(version),
                                                          builders.leave_request(version, group_id, members))), self)

    def commit(self, version: int = 8, **fields: Any) -> Call:
        return Call(0, self._apply(self.shard.commit_offsets(self.rctx(version),
                                                             builders.commit_request(version, **fields))), self)

    def delete_offsets(self, **fields: Any) -> Call:
        return Call(0, self._apply(self.shard.delete_offsets(self.rctx(0), builders.offset_delete_request(**fields))),
                    self)

    def delete_groups(self, *group_ids: str) -> list:
        return self._apply(self.shard.delete_groups(self.rctx(2), list(group_ids))).response

    def fetch(self, group_id: str = "g", topics=None, version: int = 8):
        return self.shard.fetch_offsets(self.rctx(version), group_id, topics, False)

    def describe(self, group_id: str = "g", version: int = 5):
        return self.shard.describe_group(self.rctx(version), group_id)

    def state(self, group_id: str = "g") -> str | None:
        group = self.shard.groups.get(group_id)
        return None if group is None else group.state.value

    def group(self, group_id: str = "g"):
        return self.shard.groups[group_id]

    def set_topics(self, **partitions: int) -> None:
        """The upstream's topics (name=partition count); a topic keeps its id while it exists."""
        old = self.topics.by_name
        self.topics = TopicImage.of(self.topics.version + 1, (
            TopicMetadata(old[name].topic_id if name in old else builders.topic_id(name), name, count)
            for name, count in partitions.items()))

    def consumer_heartbeat(self, version: int = 1, **fields: Any) -> ConsumerHeartbeatCall:
        """A ConsumerGroupHeartbeat; `owned` gives TopicPartitions as {topic name: partitions}."""
        request = builders.consumer_heartbeat_request(version, self.topics, **fields)
        try:
            result = self.shard.consumer_group_heartbeat(self.rctx(version), request)
        except ApiError as exc:
            return ConsumerHeartbeatCall(None, exc, self)
        return ConsumerHeartbeatCall(self._apply(result).response, None, self)

    def consumer_group(self, group_id: str = "g"):
        return self.shard.consumer_groups[group_id]

    # ------------------------------------------------------------ common flows

    def join_dynamic(self, version: int = 5, client_id: str = "client", **fields: Any) -> tuple[str, Call]:
        """The v4+ two-step join: get a member id, then park a JoinGroup with it."""
        first = self.join(version, client_id, **fields)
        assert first.error == 79, first.response
        member_id = first.response.member_id
        return member_id, self.join(version, client_id, member_id=member_id, **fields)

    def stable_group(self, n: int = 2, group_id: str = "g", **fields: Any) -> list[str]:
        """n dynamic members, joined, synced and Stable; the first is the leader."""
        members, joins = [], []
        for i in range(n):
            member_id, call = self.join_dynamic(client_id=f"c{i}", group_id=group_id, **fields)
            members.append(member_id)
            joins.append(call)
        self.finish_join_phase(group_id)
        generation = joins[0].response.generation_id
        leader = joins[0].response.leader
        for member_id in members:
            assignments = [(m, f"assign-{m}".encode()) for m in members] if member_id == leader else ()
            self.sync(group_id=group_id, member_id=member_id, generation_id=generation, assignments=assignments)
        assert self.state(group_id) == "Stable"
        return members

    def finish_join_phase(self, group_id: str = "g") -> None:
        """Sleep until the join timer (initial delay and its extensions) completes the phase."""
        for _ in range(10):
            if self.state(group_id) != "PreparingRebalance":
                return
            self.sleep(self.deadline_in(join_key(group_id)))
        raise AssertionError("the join phase did not complete")

    def reload(self, start_ms: int | None = None, **config: Any) -> GroupTestContext:
        """A fresh context whose shard loaded this one's log through the byte codec, its
        clock at `start_ms` (default: this one's now)."""
        start_ms = self.clock.now_ms() if start_ms is None else start_ms
        fresh = GroupTestContext(start_ms=start_ms, **{**_config_kwargs(self.config), **config})
        fresh.topics = self.topics
        fresh.shard.on_unloaded()
        for offset, record in enumerate(self.written):
            decoded = deserialize_record(serialize_key(record.key), serialize_value(record.value), record.headers)
            assert decoded is not None
            fresh.shard.replay(offset, decoded)
        fresh.written = list(self.written)
        fresh._offset = len(self.written)
        fresh.shard.on_loaded()
        return fresh


def _config_kwargs(config: GroupConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in GroupConfig.__dataclass_fields__}
