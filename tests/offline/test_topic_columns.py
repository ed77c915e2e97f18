"""The topic audit's per-partition work without Spark: a generated log's records as the
Arrow batches Spark's Kafka source hands a task (one partition's rows, key, value,
headers, offset, timestamp in microseconds), audited by the columnar path
(`kafka_source.columns_from_arrow` into `column_audit`) and by the record-by-record
reference; both must equal the data dir's own audit."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from coordinator.offline import kafka_source  # noqa: E402
from coordinator.offline.generate import GeneratorConfig, generate  # noqa: E402
from coordinator.offline.job import Options, PartitionTask, run_partition  # noqa: E402
from storage.file_store import partition_dirs  # noqa: E402
from tests.support.topic_rows import SCHEMA, as_spark_rows, comparable  # noqa: E402

# Anomalies of every kind but no damaged batches (a topic read through Kafka has none),
# with kgc's audit headers on its records, a few tombstones and deleted groups.
CONFIG = GeneratorConfig(records=4_000, groups=16, num_partitions=4, segment_bytes=32 * 1024)


def test_columns_from_arrow_audit_as_the_data_dir_does(tmp_path):
    data = tmp_path / "data"
    generate(data, CONFIG)
    options = Options(now_ms=CONFIG.now_ms)
    found = 0
    for partition, directory in partition_dirs(data).items():
        on_disk = run_partition(PartitionTask(partition, str(directory), options, report_dir=str(tmp_path / "disk")))
        found += len(on_disk.findings)
        for scanner in ("columns", "records"):
            template = PartitionTask(-1, "t", replace(options, scanner=scanner), report_dir=str(tmp_path / scanner))
            [out] = kafka_source._audit_partition(iter(as_spark_rows(partition, directory)), template, "t")
            from_topic = pickle.loads(out.column("result")[0].as_py())
            assert comparable(from_topic) == comparable(on_disk), (scanner, partition)
    assert found > 0


def test_offsets_of_a_recreated_topic_from_arrow_as_from_the_data_dir(tmp_path):
    """Commits that recorded topic ids, one of them a recreated topic's: the Arrow path's
    two scanners find what the data dir's audit finds."""
    from storage.format import encode_batch
    from tests.support.audit_logs import (
        RECREATED_FINDINGS,
        RECREATED_LOG_OFFSETS,
        RECREATED_TOPIC_IDS,
        recreated_topic_log,
    )

    directory = tmp_path / "data" / "__consumer_offsets-0"
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(encode_batch(0, recreated_topic_log(), 1))
    options = Options(now_ms=2)
    upstream = {"log_offsets": RECREATED_LOG_OFFSETS, "topic_ids": RECREATED_TOPIC_IDS}
    on_disk = run_partition(PartitionTask(0, str(directory), options, report_dir=str(tmp_path / "disk"), **upstream))
    assert {(f.type.value, f.group, f.topic, f.partition, f.committed_offset) for f in on_disk.findings} == \
        RECREATED_FINDINGS
    for scanner in ("columns", "records"):
        template = PartitionTask(-1, "t", replace(options, scanner=scanner), report_dir=str(tmp_path / scanner),
                                 **upstream)
        [out] = kafka_source._audit_partition(iter(as_spark_rows(0, directory)), template, "t")
        from_topic = pickle.loads(out.column("result")[0].as_py())
        assert comparable(from_topic) == comparable(on_disk), scanner
        assert sorted(map(repr, from_topic.findings)) == sorted(map(repr, on_disk.findings)), scanner


def state_topic_rows(records: list) -> list:
    """(offset, key, value) rows of a state topic partition, as Spark's source hands them."""
    return pa.Table.from_pydict({
        "partition": [0] * len(records), "offset": [o for o, _, _ in records],
        "timestamp": [1_000_000] * len(records), "key": [k for _, k, _ in records],
        "value": [v for _, _, v in records], "headers": [[] for _ in records]}, schema=SCHEMA).to_batches()


def test_a_client_transaction_left_open_in_the_state_topic_is_reported_by_both_scanners(tmp_path):
    from coordinator.records import helpers
    from coordinator.records.codec import serialize_key, serialize_value
    from coordinator.replicated.client_txn import ClientTransactions
    from storage.api import CONTROL_COMMIT, LogRecord, TxnBatch

    def offset(group: str, value: int) -> LogRecord:
        [record] = helpers.new_offset_commit_records(group, "t", [(0, value, -1, "")], 1_000, -1, member_id="",
                                                      generation=-1, client_id="", client_host="")
        return LogRecord(serialize_key(record.key), serialize_value(record.value))

    # given the replicated store's records for two clients' transactions on one partition:
    # producer 7's committed (its end, the copy, the tombstones), producer 9's still open
    clients = ClientTransactions()
    written = [offset("plain", 1)]
    written += clients.stage([offset("eos", 5)], TxnBatch(7, 0))
    written += clients.end(TxnBatch(7, 0, CONTROL_COMMIT))
    first_open = len(written)
    written += clients.stage([offset("eos", 8)], TxnBatch(9, 2))
    rows = [(o, r.key, r.value) for o, r in enumerate(written)]
    finals = []
    for scanner in ("columns", "records"):
        template = PartitionTask(-1, "t", replace(Options(now_ms=CONFIG.now_ms), scanner=scanner),
                                 report_dir=str(tmp_path / scanner))
        # when the partition is audited from the topic
        [out] = kafka_source._audit_partition(iter(state_topic_rows(rows)), template, "kgc-group-state")
        result = pickle.loads(out.column("result")[0].as_py())
        # then producer 9's transaction is reported open from its first pending offset
        open_txns = [f for f in result.findings if f.type == "open_transaction"]
        assert [(f.record_offset, "producer 9" in f.detail) for f in open_txns] == [(first_open, True)], scanner
        finals.append(comparable(result)[:4])
    # and the two scanners agree on the rest (findings, offsets, groups; the record counts
    # differ: the columns count the tombstones of ended transactions' records too)
    assert finals[0] == finals[1]


_HEADER = st.tuples(st.sampled_from(["member", "generation", "client", "host", "k"]),
                    st.one_of(st.none(), st.binary(max_size=3)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.lists(_HEADER, max_size=4)), max_size=30), st.integers(0, 3))
def test_header_blocks_are_each_records_own_headers(rows, cut):
    """Each record's header list, as the distinct lists and an index into them, whatever
    the lists: none, empty, null values, repeated keys, lists of any length, an array
    that is a slice of a larger one."""
    kind = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    whole = pa.array([None if r is None else [{"key": k, "value": v} for k, v in r] for r in rows], kind)
    headers = whole.slice(min(cut, len(rows)))
    blocks, index = kafka_source._header_blocks(headers)
    expected = [tuple(r) if r else () for r in rows[min(cut, len(rows)):]]
    assert [blocks[i] for i in index.tolist()] == expected
    assert len(set(blocks)) == len(blocks)              # each list once
