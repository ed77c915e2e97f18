"""Reads the markers the upstream's transaction coordinator writes into kgc's participant
partitions, and hands each to the group partition whose offsets it decides.

One task per participant partition P with something to resolve, started at the offset
of the oldest participant record still undecided (`watch`): read_uncommitted, so control
batches come through. Each marker is handed on (`on_marker`, which writes Kafka's marker
into kgc's log and waits until it is durable) before the position passes it, so a
TxnOffsetCommit that waits for the position to pass its own participant record
(`reached`) is written after every marker that came before it in P. A partition whose
data upstream retention removed before kgc read it is not guessed at: the tail stops,
says so, and the offsets stay pending (UNSTABLE for require_stable readers).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kafka.protocol.consumer import FetchRequest, FetchResponse

from coordinator import metrics
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable
from coordinator.runtime.api import PartitionNotActive
from coordinator.txn.participant import ParticipantTopic
from protocol.errors import ErrorCode
from storage.format import BatchDecodeError, control_type, iter_batches

log = logging.getLogger(__name__)

_FETCH_VERSION = 4      # the first with isolation levels
_MAX_WAIT_MS = 500
_MAX_BYTES = 1 << 20

# (P, producer id, producer epoch, marker type, marker offset)
OnMarker = Callable[[int, int, int, int, int], Awaitable[None]]


class MarkerTailer:
    def __init__(self, participant: ParticipantTopic, on_marker: OnMarker):
        self._participant = participant
        self._on_marker = on_marker
        self.positions: dict[int, int] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        self._waiters: dict[int, list[tuple[int, asyncio.Future]]] = {}
        self.stopped: dict[int, str] = {}       # P → why its tail stopped
        # P → (leader, connection): each tail long-polls on a connection of its own
        self._connections: dict[int, tuple[int, UpstreamConnection]] = {}

    def watch(self, partition: int, from_offset: int) -> None:
        """Tail P from `from_offset` on, unless it is tailed already (from further back)."""
        if partition in self._tasks:
            return
        self.positions[partition] = from_offset
        self._tasks[partition] = asyncio.get_running_loop().create_task(
            self._run(partition), name=f"kgc-txn-tail-{partition}")

    async def unwatch(self, partition: int) -> None:
        """Stop tailing P; whoever waits for it is told the partition is not read here."""
        task = self._tasks.pop(partition, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.positions.pop(partition, None)
        self.stopped.pop(partition, None)
        metrics.TXN_TAILS_STOPPED.set(len(self.stopped))
        for _, fut in self._waiters.pop(partition, []):
            if not fut.done():
                fut.set_exception(PartitionNotActive(f"partition {partition} is not tailed here"))
        known = self._connections.pop(partition, None)
        if known is not None:
            await known[1].close()

    async def reached(self, partition: int, offset: int) -> None:
        """Returns once every marker of P below `offset` was handed on."""
        if self.positions.get(partition, -1) > offset:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(partition, []).append((offset, fut))
        await fut

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, {}
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        connections, self._connections = self._connections, {}
        for _, conn in connections.values():
            await conn.close()

    async def _connection(self, partition: int) -> UpstreamConnection:
        leader = await self._participant.leader_id(partition)
        known = self._connections.get(partition)
        if known is not None and known[0] == leader and known[1].failure is None:
            return known[1]
        if known is not None:
            await known[1].close()
        conn = await self._participant.own_connection(leader)
        self._connections[partition] = (leader, conn)
        return conn

    async def _run(self, partition: int) -> None:
        backoff = 0.1
        while True:
            try:
                await self._fetch_once(partition)
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except _Stop as stop:
                self.stopped[partition] = str(stop)
                metrics.TXN_TAILS_STOPPED.set(len(self.stopped))
                log.error("participant partition %s-%d: %s; its pending transactions stay undecided",
                          self._participant.topic, partition, stop)
                return
            except (UpstreamUnavailable, TimeoutError, OSError) as exc:
                log.info("participant partition %s-%d: tail retries after %r", self._participant.topic,
                         partition, exc)
                # The leader may be gone: the next try asks the metadata which broker leads now.
                self._participant.forget_leader(partition)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception:
                log.exception("participant partition %s-%d: tail failed; retrying", self._participant.topic,
                              partition)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _fetch_once(self, partition: int) -> None:
        position = self.positions[partition]
        conn = await self._connection(partition)
        cls = FetchRequest[_FETCH_VERSION]
        request = cls(replica_id=-1, max_wait_ms=_MAX_WAIT_MS, min_bytes=1, max_bytes=_MAX_BYTES, isolation_level=0,
                      topics=[cls.FetchTopic(topic=self._participant.topic, partitions=[cls.FetchTopic.FetchPartition(
                          partition=partition, fetch_offset=position, partition_max_bytes=_MAX_BYTES)])])
        response = await self._participant.request(conn, request, FetchResponse)
        data = response.responses[0].partitions[0]
        code = ErrorCode(data.error_code)
        if code is ErrorCode.OFFSET_OUT_OF_RANGE:
            raise _Stop(f"offset {position} is no longer upstream (retention): see docs/exactly-once.md")
        if code is not ErrorCode.NONE:
            self._participant.forget_leader(partition)
            raise UpstreamUnavailable(f"fetch answered {code.name}")
        records = data.records or b""
        log.debug("participant partition %d: fetched %d bytes from %d (high watermark %d)", partition, len(records),
                  position, data.high_watermark)
        try:
            batches = list(iter_batches(records))
        except BatchDecodeError as exc:
            raise _Stop(f"unreadable batch at offset {position}: {exc}") from exc
        for _, batch in batches:
            if batch.last_offset < position:
                continue
            if batch.is_control and batch.records:
                marker = control_type(batch.records[0].key)
                if marker is not None:
                    await self._on_marker(partition, batch.producer_id, batch.producer_epoch, marker,
                                          batch.base_offset)
            position = batch.last_offset + 1
            self.positions[partition] = position
        self._release(partition, position)

    def _release(self, partition: int, position: int) -> None:
        waiting = self._waiters.get(partition)
        if not waiting:
            return
        still = []
        for offset, fut in waiting:
            if offset < position:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((offset, fut))
        self._waiters[partition] = still


class _Stop(Exception):
    """The tail cannot go on without guessing."""
