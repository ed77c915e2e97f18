"""Benchmark: `kgc audit` of the same log from files and from a Kafka topic through Spark.

    python -m tests.support.bench_audit_topic --records 1000000 [--master 'local[2]'] [--work DIR]

Generates a data dir (kept in --work), starts one real Kafka broker (tests/support/kafka.py),
creates a 50-partition topic and produces every partition's batches into it as they are
(one Produce request carries one batch of each of several partitions), then times
`kgc audit DATA_DIR` and `kgc audit --bootstrap ... --topic ...`, each in its own process
with its own Spark session (the wall time includes the session's start), and checks the
two found the same (upstream checks aside: the topic run has them, the file run not).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from coordinator.offline.findings import UPSTREAM_TYPES
from coordinator.offline.generate import GeneratorConfig, generate
from coordinator.offline.scan import PartitionScan
from coordinator.offline.upstream import UpstreamOffsets
from coordinator.probe import read_exactly
from storage.file_store import partition_dirs
from tests.support.kafka import KafkaCluster
from tests.support.kafka_dist import spark_kafka_jars

NOW_MS = 1_790_000_000_000
TOPIC = "kgc-state"
_SIZE = struct.Struct(">i")


def produce_log(bootstrap: str, data_dir: Path, topic: str) -> int:
    """Every batch of the data dir into the same partition of `topic`; the batches sent."""
    scans = {p: iter(PartitionScan(p, d)) for p, d in partition_dirs(data_dir).items()}
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    sent = 0
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        correlation = 0
        while scans:
            parts = []
            for p, scan in list(scans.items()):
                batch = next(scan, None)
                if batch is None:
                    del scans[p]
                    continue
                parts.append(ProduceRequest.TopicProduceData.PartitionProduceData(
                    version=9, index=p, records=_as_produced(batch.raw)))
            if not parts:
                break
            correlation += 1
            request = ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
                ProduceRequest.TopicProduceData(version=9, name=topic, partition_data=parts)])
            request.with_header(correlation_id=correlation, client_id="bench")
            sock.sendall(request.encode(header=True, framed=True))
            (size,) = _SIZE.unpack(read_exactly(sock, _SIZE.size))
            response = ProduceResponse.decode(read_exactly(sock, size), version=9, header=True)
            errors = [(r.index, r.error_code, r.error_message) for t in response.responses for r in t.partition_responses
                      if r.error_code]
            if errors:
                raise RuntimeError(f"produce refused: {errors[:5]}")
            sent += len(parts)
    return sent


def _as_produced(raw: memoryview) -> bytes:
    """A stored batch as a producer sends it: base offset 0 (the broker assigns offsets;
    the CRC covers only what follows the base offset, length and leader epoch)."""
    return bytes(8) + bytes(raw[8:])


def timed_audit(*args: str) -> tuple[float, dict, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "coordinator.offline", "audit", *args, "--now-ms", str(NOW_MS)],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kgc audit failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    out = Path(args[args.index("--out") + 1])
    return seconds, json.loads((out / "summary.json").read_text()), done.stdout


def drain(bootstrap: str, topic: str, master: str, jars: str) -> int:
    """The floor under the topic audit: Spark's Kafka source reading every record of
    `topic` and handing it to a Python task as Arrow, as the audit's tasks get them, with
    no kgc code in the tasks; the rows drained."""
    import pyarrow as pa

    from coordinator.offline import kafka_source, spark_engine

    now = UpstreamOffsets(bootstrap).topic_offsets(topic)
    spark = spark_engine.session(master, jars=jars, reads_in_jvm=True)
    try:
        read = kafka_source.TopicRead(ending={p: end for p, (_start, end) in now.partitions.items()})
        frame = kafka_source.read_topic(spark, kafka_source.TopicSource(bootstrap, topic), read)

        def count(batches):
            yield pa.RecordBatch.from_pydict({"rows": [sum(b.num_rows for b in batches)]})

        return sum(row.rows for row in frame.select(*kafka_source.RECORD_COLUMNS).mapInArrow(count, "rows long")
                   .collect())
    finally:
        spark.stop()


def timed_drain(bootstrap: str, master: str, jars: str) -> tuple[float, int]:
    """`drain` in its own process (its own Spark, started inside the time, as an audit's)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tests.support.bench_audit_topic", "--drain", bootstrap,
                           "--master", master, "--spark-jars", jars], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the drain failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started, int(done.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.bench_audit_topic")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=2_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work", default=None)
    parser.add_argument("--drain", metavar="BOOTSTRAP", help=argparse.SUPPRESS)    # the child of timed_drain
    parser.add_argument("--spark-jars", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drain:
        print(drain(args.drain, TOPIC, args.master, args.spark_jars))
        return 0
    import pyspark

    work = Path(args.work or tempfile.mkdtemp(prefix="kgc-bench-topic-"))
    data = work / f"data-{args.records}"
    if not data.exists():
        generate(data, GeneratorConfig(records=args.records, groups=args.groups, now_ms=NOW_MS))
    jars = ",".join(spark_kafka_jars(pyspark.__version__))
    stamp = time.strftime("%H%M%S")
    files_s, files, _ = timed_audit(str(data), "--master", args.master, "--out", str(work / f"files-{stamp}"))
    print(f"files: {files['records']:,} records in {files_s:.1f} s", flush=True)
    with KafkaCluster(work / f"kafka-{stamp}", settings={"message.max.bytes": str(8 << 20)}) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            # The generated records are dated NOW_MS, in the past: no retention may delete them
            # while the bench runs (as kgc's compacted state topic would keep them).
            admin.create_topics([NewTopic(TOPIC, len(partition_dirs(data)), 1,
                                          topic_configs={"retention.ms": "-1", "retention.bytes": "-1"})])
        finally:
            admin.close()
        deadline = time.monotonic() + 60
        while sum(t == TOPIC for t, _ in UpstreamOffsets(cluster.bootstrap).log_offsets()) < len(partition_dirs(data)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{TOPIC}'s partitions got no leaders")
            time.sleep(0.5)
        started = time.perf_counter()
        batches = produce_log(cluster.bootstrap, data, TOPIC)
        produce_s = time.perf_counter() - started
        print(f"produced {batches:,} batches in {produce_s:.1f} s", flush=True)
        topic_s, topic, _ = timed_audit("--bootstrap", cluster.bootstrap, "--topic", TOPIC, "--master", args.master,
                                        "--spark-jars", jars, "--out", str(work / f"topic-{stamp}"))
        drain_s, drained = timed_drain(cluster.bootstrap, args.master, jars)
    same = {k: v for k, v in files["findings"].items() if k not in {t.value for t in UPSTREAM_TYPES}} == \
        {k: v for k, v in topic["findings"].items() if k not in {t.value for t in UPSTREAM_TYPES}}
    print(f"same findings: {same}")
    print("| records | input | master | audit wall incl. session (s) | records/s |")
    print("|---:|---|---|---:|---:|")
    for name, seconds, summary in (("files", files_s, files), ("topic", topic_s, topic)):
        print(f"| {summary['records']:,} | {name} | {args.master} | {seconds:.1f} | {summary['records'] / seconds:,.0f} |")
    print(f"| {drained:,} | topic, Spark's Kafka source alone (rows to Python, no audit) | {args.master} | "
          f"{drain_s:.1f} | {drained / drain_s:,.0f} |")
    return 0 if same and files["records"] == topic["records"] else 1


if __name__ == "__main__":
    sys.exit(main())
