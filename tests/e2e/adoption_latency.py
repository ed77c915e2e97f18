"""What cut-over on first use costs: OffsetFetch latency of a group's first use on kgc
(kgc asks Tansu's coordinator and writes the adoption), of every later use (steady state),
of the same request to a kgc with adoption off, and straight to Tansu, all in one run.

    .venv/bin/python -m tests.e2e.adoption_latency --groups 200

It prints a Markdown table (docs/benchmarks/notes.md, "Adoption: first use and steady state").
"""

from __future__ import annotations

import argparse
import statistics
import time

from tests.support.admin import create_topic, new_name
from tests.support.kgc import free_port, kgc_process, wait_listening
from tests.support.simple_group_offsets import PARTITIONS, offset_fetch, simple_commit
from tests.support.tansu import TansuBroker


def timed(call) -> float:
    started = time.perf_counter()
    code, _ = call()
    assert code == 0, code
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=200)
    args = parser.parse_args()
    with TansuBroker() as broker:
        topic = create_topic(broker.bootstrap, PARTITIONS)
        groups = [new_name("bench") for _ in range(args.groups)]
        for g in groups:
            simple_commit(broker.bootstrap, g, topic, dict.fromkeys(range(PARTITIONS), 5))
        ports = [free_port(), free_port()]
        with kgc_process("--upstream", broker.bootstrap, "--broker-port", f"{broker.node_id}={ports[0]}",
                         "--log-level", "WARNING") as kgc, \
                kgc_process("--upstream", broker.bootstrap, "--broker-port", f"{broker.node_id}={ports[1]}",
                            "--log-level", "WARNING", "--adopt-from-upstream", "false") as plain:
            for port in ports:
                wait_listening(port)
            rows = {"Tansu directly": [], "kgc, first use (adopts)": [], "kgc, steady state": [],
                    "kgc with adoption off": []}
            for i, g in enumerate(groups):
                # The first use must come before the steady state; the rest rotate, so that
                # none is always the one right after a new connection's first request.
                calls = [("Tansu directly", broker.port), ("kgc with adoption off", plain.port)]
                calls.insert(i % 3, ("kgc, first use (adopts)", kgc.port))
                calls.append(("kgc, steady state", kgc.port))
                for name, port in calls:
                    rows[name].append(timed(lambda g=g, port=port: offset_fetch(port, g, topic)))
    direct = statistics.median(rows["Tansu directly"])
    print(f"OffsetFetch v7, {args.groups} groups, one new connection per request (ms)\n")
    print("| request | median | p90 | vs Tansu directly |")
    print("|---|---:|---:|---:|")
    for name, values in rows.items():
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"| {name} | {statistics.median(values):.2f} | {p90:.2f} | {statistics.median(values) / direct:.2f}x |")


if __name__ == "__main__":
    main()
