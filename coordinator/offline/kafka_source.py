"""The audit's input from a Kafka topic, through Spark's Kafka source.

The topic is any cluster's `__consumer_offsets` (read-only: the source only fetches) or
kgc's own state topic: the same record format either way. Spark's Kafka source plans one
Spark partition per topic partition, from its earliest to its latest offset; each Spark
task hands its rows to this module as Arrow batches (`mapInArrow`), where kgc's own record
parser judges them exactly as it judges segment files: by default the columnar audit
(`column_audit`, on the Arrow key and value buffers as they are), with `Options.scanner`
"records" the record-by-record `PartitionAudit` (`job.audit_batches`). Each task sends back
one pickled `PartitionResult`: as with files, no per-record data is shuffled or collected.

The source gives key, value, headers, offset and timestamp per record, not the batch
headers (producer id, transactional flag, control markers). So the topic is read with
`kafka.isolation.level=read_committed`: records of aborted transactions are dropped by
the consumer, control records are never returned, and the read stops at the last stable
offset, so a transaction still open is not read at all. A commit is then audited when,
and only when, it took effect. (A copy of the log on disk still holds the commits of
aborted transactions, and the file audit reads them: the two agree on logs without
aborted transactions.)

kgc's state topic (the replicated store) holds its clients' transactions as records of its
own (`coordinator.replicated.client_txn`): a pending offset (key type 0x4B50, "KP") and a
transaction's end (0x4B4D, "KM"). Both scanners see them as the file audit sees a client's
transaction in a data dir: the pending offsets a transactional batch of the client's
producer, the end a control batch, so a transaction with no end is reported open.

A run reads each partition up to the offsets it is given (`TopicRead.ending`: the last
stable offsets when it started), from its earliest or from given offsets (`starting`: where
the previous report's read ended, `incremental`). A task audits the previous report's
records of its partition followed by the new ones, and keeps them all in the report
(`keep_records`, one Parquet file per partition) for the next run. A partition with kept
records and nothing new gets no task from the source: a second, small Spark job audits
those from their records alone.

The connector (`spark-sql-kafka-0-10_2.13` at PySpark's own version, and its
dependencies) must be on Spark's classpath: `--packages` / `--jars` with spark-submit,
`--spark-jars` with `kgc audit` (docs/audit.md, "Auditing from a Kafka topic").
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from coordinator.offline.job import PartitionResult, PartitionTask, audit_batches
from coordinator.offline.scan import ScannedBatch
from coordinator.records.types import CLIENT_TXN_MARKER_KEY_TYPE, CLIENT_TXN_OFFSET_KEY_TYPE
from coordinator.replicated.client_txn import OFFSET_HEAD_SIZE, loaded
from storage.api import StoredBatch, StoredRecord
from storage.format import CONTROL_FLAG, TRANSACTIONAL_FLAG

if TYPE_CHECKING:
    # For annotations only: the functions that use numpy import it, so the records scanner runs without it.
    import numpy as np

    from storage.columnar import Headers

DEFAULT_TOPIC = "__consumer_offsets"
CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
_RESULT_SCHEMA = "result binary, records_read long, records_previous long"
# The columns of a record the audit reads, as Spark's Kafka source gives them; the records
# a report keeps for the next run have these too (`records_schema`).
RECORD_COLUMNS = ("partition", "offset", "timestamp", "key", "value", "headers")
_NO_BYTES = memoryview(b"")


class ConnectorMissing(RuntimeError):
    """Spark has no Kafka source: the connector's jars are not on its classpath."""


def connector_coordinates() -> str:
    """The connector's Maven coordinates for the installed PySpark (its version must match)."""
    import pyspark

    return f"{CONNECTOR}:{pyspark.__version__}"


@dataclass(frozen=True, slots=True)
class TopicSource:
    bootstrap: str                                   # host:port[,host:port...]
    topic: str = DEFAULT_TOPIC
    # Kafka consumer settings (security.protocol, ssl.*, sasl.* ...), given to the
    # source as its `kafka.`-prefixed options.
    consumer: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}"


@dataclass(frozen=True, slots=True)
class TopicRead:
    """What a run reads of the topic, by partition, and the records it goes on from."""
    ending: Mapping[int, int] | None = None         # up to these offsets (exclusive); None: the latest
    starting: Mapping[int, int] | None = None       # from these; None: from each partition's earliest
    previous_records: str | None = None             # a previous report's kept records, audited first
    keep_records: str | None = None                 # keep every record audited here, for the next run


@dataclass(slots=True)
class TopicAudit:
    results: list[PartitionResult]
    records_read: int            # from Kafka
    records_previous: int        # from the previous report's kept records


def records_schema():
    import pyarrow as pa

    return pa.schema([("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("us", "UTC")),
                      ("key", pa.binary()), ("value", pa.binary()),
                      ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))])


def records_part(directory: str | Path, partition: int) -> Path:
    return Path(directory) / f"part-{partition:05d}.parquet"


def _offsets_json(topic: str, offsets: Mapping[int, int]) -> str:
    return json.dumps({topic: {str(p): o for p, o in sorted(offsets.items())}})


def read_topic(spark, source: TopicSource, read: TopicRead | None = None):
    """The topic as a DataFrame of Spark's Kafka source, committed records only, from and
    to the offsets `read` gives (default: all of it)."""
    read = read or TopicRead()
    # Spark 4.2's Admin-based offset reader plans no rows at all for __consumer_offsets
    # of a Kafka 4.4 broker (by subscribe and by assign alike), where it reads an ordinary
    # topic; the consumer-based reader plans the partitions' real ranges.
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    reader = (spark.read.format("kafka")
              .option("kafka.bootstrap.servers", source.bootstrap)
              # The partitions by name where they are known: a subscription would have the
              # driver's consumer join a group of its own, and write that group's records to
              # the cluster's __consumer_offsets, the topic this audit reads (and the next).
              .option(*(("subscribe", source.topic) if read.ending is None
                        else ("assign", json.dumps({source.topic: sorted(read.ending)}))))
              .option("startingOffsets", "earliest" if read.starting is None
                      else _offsets_json(source.topic, read.starting))
              .option("endingOffsets", "latest" if read.ending is None else _offsets_json(source.topic, read.ending))
              .option("includeHeaders", "true")
              .option("kafka.isolation.level", "read_committed")
              # A task reads a bounded range and stops at its end. With the consumer's
              # default fetch.max.wait.ms each task waited that long there, on a fetch past
              # the range that the broker held open for records not yet written: most of
              # the read of a small topic. The source's own settings (source.consumer,
              # below) may set it again.
              .option("kafka.fetch.max.wait.ms", "10")
              # Records that retention deleted between planning and reading fail the run
              # (Spark's default): an audit of part of a log must not pass for a whole one.
              # Gaps left by compaction and transaction markers are not loss.
              .option("failOnDataLoss", "true"))
    for name, value in source.consumer.items():
        reader = reader.option(name if name.startswith("kafka.") else f"kafka.{name}", value)
    try:
        return reader.load()
    except Exception as e:
        if "DATA_SOURCE_NOT_FOUND" in str(e) or "Failed to find data source: kafka" in str(e):
            raise ConnectorMissing(
                f"Spark has no Kafka source: put {connector_coordinates()} and its dependencies on its "
                "classpath (spark-submit --packages, or kgc audit --spark-jars)") from None
        raise


def audit_topic(spark, source: TopicSource, template: PartitionTask, read: TopicRead | None = None) -> TopicAudit:
    """Every partition of the topic audited in its own Spark task, as `template` says
    (options, report dir, log offsets), from what `read` says; the results by partition."""
    read = read or TopicRead()
    frame = read_topic(spark, source, read).select(*RECORD_COLUMNS)

    def run(batches):
        yield from _audit_partition(batches, template, source.topic, read)

    outcomes = [(pickle.loads(row.result), row.records_read, row.records_previous)
                for row in frame.mapInArrow(run, _RESULT_SCHEMA).collect()]
    # A partition's history is judged whole: one split over two tasks (Spark's
    # minPartitions, never set here) would be judged as two logs.
    split = sorted(p for p, n in Counter(r.partition for r, _, _ in outcomes).items() if n > 1)
    if split:
        raise RuntimeError(f"partitions {split} of {source.topic} were read by more than one Spark task")
    audited = {r.partition for r, _, _ in outcomes}
    idle = sorted(p for p in _kept_partitions(read.previous_records) if p not in audited)
    if idle:
        topic = source.topic
        slices = min(len(idle), 4 * spark.sparkContext.defaultParallelism)
        outcomes += spark.sparkContext.parallelize(idle, slices).map(
            lambda p: _audit_records(p, None, template, topic, read)).collect()
    return TopicAudit(sorted((r for r, _, _ in outcomes), key=lambda r: r.partition),
                      records_read=sum(n for _, n, _ in outcomes), records_previous=sum(n for _, _, n in outcomes))


def _kept_partitions(directory: str | None) -> list[int]:
    if directory is None or not Path(directory).is_dir():
        return []
    return sorted(int(path.stem.removeprefix("part-")) for path in Path(directory).glob("part-*.parquet"))


def _audit_partition(batches, template: PartitionTask, topic: str, read: TopicRead | None = None):
    """One Spark task: its Arrow batches are the records of one topic partition."""
    import pyarrow as pa

    first = next(batches, None)
    if first is None:
        return
    partition = first.column("partition")[0].as_py()
    new = pa.Table.from_batches(list(_chain(first, batches)))
    result, records_read, records_previous = _audit_records(partition, new, template, topic, read or TopicRead())
    yield pa.RecordBatch.from_pydict(
        {"result": [pickle.dumps(result)], "records_read": [records_read], "records_previous": [records_previous]},
        schema=pa.schema([("result", pa.binary()), ("records_read", pa.int64()), ("records_previous", pa.int64())]))


def _audit_records(partition: int, new, template: PartitionTask, topic: str,
                   read: TopicRead) -> tuple[PartitionResult, int, int]:
    """A partition's audit over the previous report's records of it (if any) and `new`
    (Spark's rows; None: none), which it keeps for the next run as `read` says; the
    result and the records read from Kafka and from the previous report."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    previous = records_part(read.previous_records, partition) if read.previous_records else None
    if previous is not None and previous.exists():
        tables.append(pq.read_table(previous).cast(records_schema()))
    records_previous = tables[0].num_rows if tables else 0
    if new is not None:
        tables.append(new.select(list(RECORD_COLUMNS)).cast(records_schema()))
    if len(tables) == 2 and tables[0].num_rows and tables[1].num_rows:
        last, first = tables[0].column("offset")[-1].as_py(), tables[1].column("offset")[0].as_py()
        if first <= last:
            raise RuntimeError(f"{topic}-{partition}: read from offset {first}, but the previous report's records "
                               f"go up to {last}")
    table = pa.concat_tables(tables) if tables else records_schema().empty_table()
    if read.keep_records is not None:
        _keep(records_part(read.keep_records, partition), table, copy_of=previous if new is None else None)
    task = replace(template, partition=partition, directory=topic)
    if task.options.scanner == "columns":
        result = _audit_columns(task, table, topic)
    else:
        result = audit_batches(task, _scanned(iter(table.to_batches()), topic))
    return result, 0 if new is None else new.num_rows, records_previous


def _keep(path: Path, table, copy_of: Path | None) -> None:
    """The partition's records, for the next run: a copy of the previous file when nothing
    was added. Written aside and renamed, so a retried task leaves one whole file."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    if copy_of is not None:
        shutil.copyfile(copy_of, tmp)
    else:
        # Without dictionaries: keys and values are mostly distinct (and headers nested),
        # so zstd alone packs them smaller and writes and reads them faster.
        pq.write_table(table, tmp, compression="zstd", use_dictionary=False)
    os.replace(tmp, path)


def _audit_columns(task: PartitionTask, table, topic: str) -> PartitionResult:
    """The partition's records straight from Spark's Arrow columns into the columnar
    audit a data dir's partition gets (`column_audit`): the key and value columns are
    already one data buffer and offsets each, which is what `RecordSpans` describes."""
    from coordinator.offline.column_audit import audit_columns
    from coordinator.offline.job import audited_into, partition_audit

    started = time.perf_counter()
    cols = columns_from_arrow(task.partition, topic, table)
    result = PartitionResult(task.partition, next_offset=int(cols.offset[-1]) + 1 if len(cols.offset) else 0)
    audited_into(result, audit_columns(cols, partition_audit(task)), task)
    result.seconds = time.perf_counter() - started
    return result


def columns_from_arrow(partition: int, topic: str, table):
    """`PartitionColumns` of one topic partition's rows (one record per batch: the
    source gives no batch headers, and control records never arrive)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from coordinator.offline.columns import PartitionColumns
    from coordinator.offline.scan import PartitionScan
    from storage import columnar

    n = table.num_rows
    keys, key_pos, key_len = _binary(table.column("key").combine_chunks(), 0)
    values, value_pos, value_len = _binary(table.column("value").combine_chunks(), len(keys))
    buf = columnar.padded([keys, values])
    blocks, header_block = _header_blocks(table.column("headers").combine_chunks())
    zeros = np.zeros(n, np.int64)
    spans = columnar.RecordSpans(batch=np.arange(n, dtype=np.int64), timestamp_delta=zeros, offset_delta=zeros,
                                 key_pos=key_pos, key_len=key_len, value_pos=value_pos, value_len=value_len,
                                 headers_pos=zeros, record_end=zeros, header_block=header_block)
    offset = table.column("offset").to_numpy().astype(np.int64)
    # Spark's timestamps arrive as microseconds since the epoch; the log's are ms.
    timestamp = pc.divide(table.column("timestamp").combine_chunks().cast(pa.int64()), 1000).to_numpy()
    attributes, producer_id = _client_transactions(table, keys, key_pos, key_len)
    cols = PartitionColumns(PartitionScan(partition, Path(topic)), buf, np.asarray([0, len(keys)], np.int64),
                            [topic], zeros, zeros, zeros, offset, attributes, np.ones(n, bool), spans)
    cols.offset, cols.timestamp, cols.header_blocks = offset, timestamp.astype(np.int64), blocks
    cols.producer_id = producer_id
    return cols


def _client_transactions(table, keys: bytes, key_pos, key_len):
    """The rows kgc's state topic holds for its clients' transactions, as the batches the
    file audit sees (the module's note): per row, its batch attributes and producer id.
    A pending offset's key becomes the offset's own (its head is cut off, in place)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    attributes = np.zeros(n, np.int64)
    producer_id = np.full(n, -1, np.int64)
    kinds = pc.binary_slice(table.column("key").combine_chunks(), 0, 2)
    live = pc.is_valid(table.column("value").combine_chunks())
    for key_type, flags in ((CLIENT_TXN_OFFSET_KEY_TYPE, TRANSACTIONAL_FLAG),
                            (CLIENT_TXN_MARKER_KEY_TYPE, TRANSACTIONAL_FLAG | CONTROL_FLAG)):
        kind = pa.scalar(key_type.to_bytes(2, "big"), pa.binary())
        rows = np.flatnonzero(pc.and_(pc.equal(kinds, kind), live).fill_null(False).to_numpy(zero_copy_only=False))
        attributes[rows] = flags
        for row in rows:
            producer_id[row] = int.from_bytes(keys[key_pos[row] + 2:key_pos[row] + 10], "big", signed=True)
        if key_type == CLIENT_TXN_OFFSET_KEY_TYPE:
            key_pos[rows] += OFFSET_HEAD_SIZE
            key_len[rows] -= OFFSET_HEAD_SIZE
    return attributes, producer_id


def _binary(array, at: int):
    """(data bytes, positions + at, lengths with -1 for null) of an Arrow binary array."""
    import numpy as np

    _validity, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32)[array.offset:array.offset + len(array) + 1].astype(np.int64)
    base = int(offsets[0]) if len(offsets) else 0
    data = bytes(data_buffer)[base:int(offsets[-1])] if data_buffer is not None and len(offsets) else b""
    lengths = np.diff(offsets)
    lengths[array.is_null().to_numpy(zero_copy_only=False)] = -1
    return data, offsets[:-1] - base + at, lengths


def _header_blocks(headers) -> tuple[list[Headers], np.ndarray]:
    """The distinct header lists (kgc's audit headers; none in a log Kafka wrote) and each
    record's index into them. Every header is one (key, value) pair of codes; every
    record's pairs one row of a matrix, padded with -1; a distinct row is a distinct list.
    Only the distinct lists (one per member and generation, not per commit) become Python."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(headers)
    lengths = pc.list_value_length(headers).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    width = int(lengths.max()) if n else 0
    if width == 0:
        return [()], np.zeros(n, np.int64)
    flat = headers.flatten()                    # a null list has no headers, as an empty one
    keys = pc.dictionary_encode(flat.field("key"), null_encoding="encode")
    values = pc.dictionary_encode(flat.field("value"), null_encoding="encode")
    base = len(values.dictionary) + 1
    pairs = keys.indices.to_numpy().astype(np.int64) * base + values.indices.to_numpy().astype(np.int64)
    starts = np.cumsum(lengths) - lengths
    matrix = np.full((n, width), -1, np.int64)
    matrix[np.repeat(np.arange(n), lengths), np.arange(len(pairs)) - np.repeat(starts, lengths)] = pairs
    rows = pc.dictionary_encode(pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(matrix.itemsize * width), n, [None, pa.py_buffer(matrix.tobytes())]))
    index = rows.indices.to_numpy().astype(np.int64)
    _, first = np.unique(index, return_index=True)          # each list's first record, in order
    names, contents = keys.dictionary.to_pylist(), values.dictionary.to_pylist()
    blocks = [tuple((names[p // base], contents[p % base]) for p in matrix[row].tolist() if p >= 0)
              for row in first.tolist()]
    return blocks, index


def _chain(first, rest) -> Iterator:
    yield first
    yield from rest


def _scanned(batches, topic: str) -> Iterator[ScannedBatch]:
    """Each Arrow batch as one record batch of the log (control records are never among
    them: see the module's note); the position is the first record's offset."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        if batch.num_rows == 0:
            continue
        offsets = batch.column("offset").to_pylist()
        # Spark's timestamps arrive as microseconds since the epoch; the log's are ms.
        timestamps = pc.divide(batch.column("timestamp").cast(pa.int64()), 1000).to_pylist()
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        headers = batch.column("headers").to_pylist()
        stored = tuple(StoredRecord(o, t, k, v, _headers(h))
                       for o, t, k, v, h in zip(offsets, timestamps, keys, values, headers, strict=True))
        for part in loaded(StoredBatch(offsets[0], offsets[-1], stored, max_timestamp_ms=max(timestamps))):
            yield ScannedBatch(topic, part.base_offset, _NO_BYTES, part)


def _headers(headers: list[dict] | None) -> tuple[tuple[str, bytes | None], ...]:
    return tuple((h["key"], h["value"]) for h in headers) if headers else ()
