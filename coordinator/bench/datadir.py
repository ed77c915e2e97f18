"""Data dirs for the load workload: N records of consumers committing, in kgc's format.

Written through `FileLogStore` (so the layout, batches and CRCs are the service's own)
with `coordinator.records` keys and values. The shape is what a busy cluster leaves:
`GROUPS` empty consumer groups (one GroupMetadata record each, generation 1, no members,
so loading arms no session timers and writes nothing), each committing all
`PARTITIONS_PER_GROUP` partitions of its topic per batch, round after round, with the
offset growing by one per round. Each group lives on the partition Kafka would pick. The
commit timestamps are the generation time: retention (7 days) expires nothing during a run.

A generated dir is kept under the cache dir (marked complete only once fully written),
so a compare run generates each size once, and reruns may reuse it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from coordinator import records
from coordinator.partitioning import partition_for
from storage.api import LogRecord
from storage.file_store import FileLogStore

log = logging.getLogger(__name__)

GROUPS = 1_000
PARTITIONS_PER_GROUP = 64
TOPIC = "orders"
FLUSH_EVERY_BATCHES = 2_000
_COMPLETE = "complete"


def _log_record(record) -> LogRecord:
    return LogRecord(records.serialize_key(record.key), records.serialize_value(record.value), record.headers)


async def generate(path: Path, total_records: int, *, groups: int = GROUPS,
                   partitions_per_group: int = PARTITIONS_PER_GROUP) -> None:
    now_ms = time.time_ns() // 1_000_000
    store = FileLogStore(path, fsync="never", clock=lambda: now_ms)
    await store.open()
    try:
        names = [f"consumer-group-{g}" for g in range(groups)]
        placement = {name: partition_for(name) for name in names}
        pending = []

        async def append(partition: int, batch: list[LogRecord]) -> None:
            pending.append(store.append(partition, batch, now_ms).durable)
            if len(pending) >= FLUSH_EVERY_BATCHES:
                await asyncio.gather(*pending)
                pending.clear()

        written = 0
        for name in names[:total_records]:
            value = records.GroupMetadataValue(protocol_type="consumer", generation=1, protocol=None, leader=None,
                                               current_state_timestamp_ms=now_ms)
            await append(placement[name], [_log_record(records.new_group_metadata_record(name, value))])
            written += 1
        # Keys and audit headers do not change from round to round: build them once.
        keys = {name: [_log_record(records.new_offset_commit_record(
                    name, TOPIC, p, records.OffsetCommitValue(0, -1, "", now_ms),
                    member_id=f"{name}-member", generation=1, client_id="bench", client_host="/127.0.0.1"))
                    for p in range(partitions_per_group)] for name in names}
        offset = 0
        while written < total_records:
            offset += 1
            for name in names:
                count = min(partitions_per_group, total_records - written)
                if count <= 0:
                    break
                commit = records.serialize_value(records.OffsetCommitValue(offset, -1, "", now_ms))
                await append(placement[name], [LogRecord(r.key, commit, r.headers) for r in keys[name][:count]])
                written += count
        await asyncio.gather(*pending)
    finally:
        await store.close()


async def cached(cache_dir: Path, total_records: int) -> Path:
    """The data dir of `total_records` records under `cache_dir`, generated if missing."""
    path = cache_dir / f"records-{total_records}"
    marker = cache_dir / f"records-{total_records}.{_COMPLETE}"
    if marker.exists():
        return path
    if path.exists():
        raise RuntimeError(f"{path} exists but was not generated completely: remove it")
    started = time.perf_counter()
    await generate(path, total_records)
    marker.write_text(f"{total_records}\n")
    log.info("generated %d records in %s in %.1f s", total_records, path, time.perf_counter() - started)
    return path
