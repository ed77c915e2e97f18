"""Coordinator records as the coordinator writes them to its log, for tests that build a
log by hand."""

from __future__ import annotations

from coordinator.records import CoordinatorRecord
from coordinator.runtime.loader import KafkaRecordSerde
from storage.api import LogRecord

_SERDE = KafkaRecordSerde()


def log_record(record: CoordinatorRecord) -> LogRecord:
    return _SERDE.serialize_all((record,))[0]
