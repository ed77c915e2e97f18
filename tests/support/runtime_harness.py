"""The partition runtime's test harness: one partition over a memory store, a dummy shard
over string records (Kafka's `MockCoordinatorShard` pattern), and ops that respond or park."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from coordinator.common.result import Result
from coordinator.records import CoordinatorRecord
from coordinator.runtime.partition import PartitionRuntime
from storage.api import LogRecord, StoredRecord
from storage.memory_store import MemoryLogStore

P = 0


def rec(key: str, value: str | None = "v") -> CoordinatorRecord:
    return CoordinatorRecord(key, value)


class StrSerde:
    """Keys starting with "?" are an unknown record type, "!" an undecodable one, "#" an
    unserializable one."""

    compacted = False   # every record is replayed, as written

    def serialize_all(self, records: Sequence[CoordinatorRecord]) -> list[LogRecord]:
        return [self._serialize(record) for record in records]

    @staticmethod
    def _serialize(record: CoordinatorRecord) -> LogRecord:
        if record.key.startswith("#"):
            raise ValueError(f"cannot serialize {record.key}")
        value = None if record.value is None else record.value.encode()
        return LogRecord(record.key.encode(), value)

    def deserialize(self, stored: StoredRecord) -> CoordinatorRecord | None:
        key = stored.key.decode()
        if key.startswith("?"):
            return None
        if key.startswith("!"):
            raise ValueError(f"cannot decode {key}")
        return CoordinatorRecord(key, None if stored.value is None else stored.value.decode())


class DummyShard:
    """Hard state is the list of replayed records; `poison` cannot be replayed.
    `isolate` records the scopes it was asked to put right and returns `isolation`."""

    def __init__(self, partition: int, timer):
        self.partition = partition
        self.timer = timer
        self.replayed: list[tuple[int, str, str | None]] = []
        self.loaded = False
        self.unloaded = False
        self.isolated: list = []
        self.isolation = Result()

    def isolate(self, scope) -> Result:
        self.isolated.append(scope)
        if isinstance(self.isolation, Exception):
            raise self.isolation
        return self.isolation

    def replay(self, offset: int, record: CoordinatorRecord) -> None:
        if record.key == "poison":
            raise ValueError("poison record")
        self.replayed.append((offset, record.key, record.value))

    def keys(self) -> list[str]:
        return [key for _, key, _ in self.replayed]

    def on_loaded(self) -> None:
        self.loaded = True

    def on_unloaded(self) -> None:
        self.unloaded = True


class Harness:
    def __init__(self, store: MemoryLogStore, clock_ms: list[int], answer_timeout_s: float | None = None):
        self.store = store
        self.shards: list[DummyShard] = []
        self.partition = PartitionRuntime(P, store, self._make_shard, StrSerde(), lambda: clock_ms[0],
                                          answer_timeout_s=answer_timeout_s)

    def _make_shard(self, partition: int, timer) -> DummyShard:
        shard = DummyShard(partition, timer)
        self.shards.append(shard)
        return shard

    @property
    def shard(self) -> DummyShard:
        return self.shards[-1]

    async def start(self) -> None:
        self.partition.start()
        await self.partition.wait_loaded()

    def write(self, op, scope=None) -> asyncio.Task:
        return asyncio.ensure_future(self.partition.write(op, scope))

    def read(self, op) -> asyncio.Task:
        return asyncio.ensure_future(self.partition.read(op))


async def settle() -> None:
    """Let every ready callback and task step run (bounded)."""
    for _ in range(20):
        await asyncio.sleep(0)


def respond(*keys: str, response="ok", replies=(), after_commit=None, replay=True):
    def op(shard, handle):
        return Result(records=tuple(rec(k) for k in keys), response=response, replies=tuple(replies),
                      after_commit=after_commit, replay=replay)
    return op


class Parker:
    """An op that parks its request (no response) and remembers the handle, like JoinGroup."""

    def __init__(self):
        self.handles = []

    def __call__(self, shard, handle):
        self.handles.append(handle)
        return Result()
