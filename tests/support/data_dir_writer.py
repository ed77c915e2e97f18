"""Coordinator records written into a data dir through the real file store, one batch per
Result, at timestamps from T0: the data dirs the offline tools (inspect, audit) read."""

from __future__ import annotations

from coordinator import records
from coordinator.partitioning import partition_for
from storage.api import LogRecord
from storage.file_store import FileLogStore
from tests.support.log_records import log_record

T0 = 1_700_000_000_000


async def write(data_dir, batches: list[list[records.CoordinatorRecord | LogRecord]], group: str) -> None:
    """Each inner list is one batch (one Result) on `group`'s partition."""
    store = FileLogStore(data_dir, fsync="never")
    await store.open()
    try:
        for i, batch in enumerate(batches):
            log_records = [r if isinstance(r, LogRecord) else log_record(r) for r in batch]
            await store.append(partition_for(group), log_records, T0 + i).durable
    finally:
        await store.close()
