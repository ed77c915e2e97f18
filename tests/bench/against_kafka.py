"""`kgc bench compare` against Apache Kafka's own group coordinator: Kafka started here from
the cached jars (tests/support/kafka_dist.py), kgc started in front of that same Kafka, and
every workload run against each in turn, as ratios.

    .venv/bin/python -m tests.bench.against_kafka --nodes 1 --fsync never [kgc bench flags]
    .venv/bin/python -m tests.bench.against_kafka --nodes 3 --fsync always [kgc bench flags]
    .venv/bin/python -m tests.bench.against_kafka --initial-delay-ms 3000 --workloads join,rebalance

`--nodes 1`: one broker, `__consumer_offsets` with one replica (a commit is durable in the
page cache, as with kgc's `fsync never`). `--nodes 3`: 127.0.0.11-13, replication factor 3
and min ISR 2 (a commit is durable on two brokers before the answer, as with kgc's
`fsync always` on its disk). `--initial-delay-ms` is set on both sides alike
(`group.initial.rebalance.delay.ms` on Kafka, `--initial-rebalance-delay-ms` on kgc): 0, or
Kafka's default 3000. Every other flag goes to `kgc bench compare` (`--workloads`,
`--repeats`, sizes, `--markdown`). The `load` workload needs a kgc started by the bench on a
prepared data dir: it is not run here. A benchmark tool, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from coordinator.cli import main as kgc_main
from coordinator.probe import request_response
from tests.support.kafka import THREE_HOSTS, KafkaCluster, KafkaNode
from tests.support.kgc import kgc_in_front_of

WORKLOADS = "join,rebalance,heartbeat,commit,sync-commit,fetch-offsets,memory"
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 50     # Kafka's default, as kgc's
READY_S = 120.0


def coordinate_every_group_on(kafka: KafkaCluster, node: KafkaNode) -> None:
    """Kafka's group coordination all on `node`, as kgc's is all in one process. Kafka creates
    `__consumer_offsets` at the first FindCoordinator, waited for here so that no workload's
    first request waits for it; on three nodes, `node` is then made the first replica of
    every partition and elected their leader, so it coordinates every group while each
    commit is still replicated to the other two (min ISR 2). That keeps the comparison one
    coordinator against one (every group's work on one broker, as on kgc's one process), and
    the memory workload's RSS, read from `node`'s process (`--other-pid`), counts every group.

    The bench does not need it to be correct: it sends each group's requests to the
    coordinator FindCoordinator names (`coordinator/bench/router.py`), so with the leaders
    left spread it would run too, measuring the three coordinators of the cluster
    (tests/bench/test_bench_routing.py runs the workloads so)."""
    deadline = time.monotonic() + READY_S
    request = FindCoordinatorRequest[3](key="kgc-bench-warm-up", key_type=0)
    while request_response((node.host, node.port), request, FindCoordinatorResponse).error_code != 0:
        if time.monotonic() > deadline:
            raise SystemExit(f"Kafka had no group coordinator within {READY_S:.0f} s")
        time.sleep(0.2)
    if len(kafka.nodes) == 1:
        return
    others = [n.node_id for n in kafka.nodes if n is not node]
    partitions = range(OFFSETS_PARTITIONS)
    plan = kafka.directory / "coordinators-on-one-node.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": OFFSETS_TOPIC, "partition": p, "replicas": [node.node_id, *others]} for p in partitions]}))
    kafka.admin_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                     "--reassignment-json-file", str(plan), "--execute")
    while "is still in progress" in kafka.admin_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                                                     "--reassignment-json-file", str(plan), "--verify").stdout:
        if time.monotonic() > deadline:
            raise SystemExit(f"the reassignment of {OFFSETS_TOPIC} did not finish within {READY_S:.0f} s")
        time.sleep(0.5)
    election = kafka.directory / "preferred-leaders.json"
    election.write_text(json.dumps({"partitions": [{"topic": OFFSETS_TOPIC, "partition": p} for p in partitions]}))
    kafka.admin_tool("org.apache.kafka.tools.LeaderElectionCommand", "--election-type", "PREFERRED",
                     "--path-to-json-file", str(election))
    while any(request_response((node.host, node.port), FindCoordinatorRequest[3](key=f"probe-{p}", key_type=0),
                               FindCoordinatorResponse).node_id != node.node_id for p in range(20)):
        if time.monotonic() > deadline:
            raise SystemExit(f"node {node.node_id} does not coordinate every group within {READY_S:.0f} s")
        time.sleep(0.5)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.against_kafka", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    parser.add_argument("--fsync", choices=("always", "never"), default=None,
                        help="kgc's fsync (default: never with 1 node, always with 3)")
    parser.add_argument("--initial-delay-ms", type=int, default=0)
    parser.add_argument("--markdown", default=None, help="write the report here too")
    parser.add_argument("--kgc-flag", action="append", default=[], metavar="FLAG",
                        help="one more flag for kgc serve, e.g. --kgc-flag=--adopt-from-upstream=false (repeatable)")
    args, rest = parser.parse_known_args(argv)
    if args.markdown:
        rest = [*rest, "--markdown", args.markdown]
    fsync = args.fsync or ("always" if args.nodes == 3 else "never")
    if not any(a == "--workloads" or a.startswith("--workloads=") for a in rest):
        rest = ["--workloads", WORKLOADS, *rest]
    hosts = THREE_HOSTS if args.nodes == 3 else ("127.0.0.1",)
    delay = str(args.initial_delay_ms)
    with tempfile.TemporaryDirectory(prefix="kgc-vs-kafka-") as tmp:
        work = Path(tmp)
        # Kafka's default: 50 partitions of __consumer_offsets, as kgc's 50.
        settings = {"group.initial.rebalance.delay.ms": delay, "offsets.topic.num.partitions": "50"}
        with KafkaCluster(work / "kafka", hosts, settings=settings, few_threads=False) as kafka, \
                kgc_in_front_of(kafka, *args.kgc_flag, "--fsync", fsync, "--initial-rebalance-delay-ms", delay,
                                "--data-dir", str(work / "kgc-data"), "--log-level", "WARNING",
                                log_path=str(work / "kgc.log")) as kgc:
            first = kafka.nodes[0]
            coordinate_every_group_on(kafka, first)
            replicas = min(3, args.nodes)
            setup = (f"Setup: Apache Kafka {kafka.version} ({args.nodes} node{'s' if args.nodes > 1 else ''}, "
                     f"`__consumer_offsets` replication factor {replicas}) and kgc (`--fsync {fsync}`, file store) "
                     f"in front of it, both with an initial rebalance delay of {delay} ms. Command: "
                     f"`python -m tests.bench.against_kafka {' '.join(argv)}`")
            print(setup + "\n", flush=True)
            code = kgc_main(["bench", "compare",
                             "--kgc", f"kgc={kgc.bootstrap}", "--kgc-pid", str(kgc.proc.pid),
                             "--other", f"kafka={first.address}", "--other-pid", str(first.proc.pid), *rest])
    if args.markdown:
        path = Path(args.markdown)
        path.write_text(setup + "\n\n" + path.read_text())
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
