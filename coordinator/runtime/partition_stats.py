"""What one partition's runtime counts (`CoordinatorRuntime.stats()`): requests, appends,
failures and loads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PartitionStats:
    writes: int = 0
    reads: int = 0
    timer_ops: int = 0
    batches_appended: int = 0
    records_appended: int = 0
    failures: int = 0
    op_failures: int = 0
    loads: int = 0
    records_loaded: int = 0
    last_load_ms: float = 0.0
