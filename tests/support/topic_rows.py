"""A data dir's partition as the rows Spark's Kafka source hands a task (one partition's
key, value, headers, offset, timestamp in microseconds, several Arrow batches), and what
two audits of a partition must agree on."""

from __future__ import annotations

import pyarrow as pa

from coordinator.offline.scan import PartitionScan

SCHEMA = pa.schema([("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("us")),
                    ("key", pa.binary()), ("value", pa.binary()),
                    ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))])


def as_spark_rows(partition: int, directory) -> list:
    rows: dict[str, list] = {name: [] for name in SCHEMA.names}
    for scanned in PartitionScan(partition, directory):
        if scanned.batch.is_control:
            continue            # read_committed: the source never returns them
        for r in scanned.batch.records:
            rows["partition"].append(partition)
            rows["offset"].append(r.offset)
            rows["timestamp"].append(r.timestamp_ms * 1000)
            rows["key"].append(r.key)
            rows["value"].append(r.value)
            rows["headers"].append([{"key": k, "value": v} for k, v in r.headers])
    # Several Arrow batches, as Spark sends them.
    return pa.Table.from_pydict(rows, schema=SCHEMA).to_batches(max_chunksize=700)


def comparable(result) -> tuple:
    return (sorted(repr(f.identity()) for f in result.findings),
            sorted(repr(sorted(row.items())) for row in result.final_offsets),
            sorted(repr(sorted(row.items())) for row in result.groups),
            sorted(repr(sorted(row.items())) for row in result.rebalances),
            result.records, result.commits, result.skipped_records)
