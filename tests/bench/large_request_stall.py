"""How long one client's large requests hold every other member's heartbeat.

`kgc serve` runs in a child process (standalone; in-memory log unless `--data-dir`); a healthy member of
its own group heartbeats back to back on its own connection, timing each round trip,
while an attacker on another connection sends, one after another, large requests of
each kind the issue names: a ListGroups whose states filter is `--filter-mb` MB of
entries, and a FindCoordinator (v4 keys), DescribeGroups, OffsetFetch v8, DeleteGroups
and OffsetCommit naming `--items` groups or partitions, then an OffsetDelete of all
the offsets that commit wrote. For each kind the heartbeat
latency p50/p99/max while that request is in flight is printed beside a baseline with
no attacker, measured in the same run. The attacker's frames are encoded before the
clock starts and its answers are not decoded: the healthy member shares this process's
loop, and the attacker's own codec work is not kgc's.

    .venv/bin/python -m tests.bench.large_request_stall --items 200000 --filter-mb 1.5

A benchmark, not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from coordinator.bench.wire import BenchConnection
from tests.support.builders import commit_request, offset_delete_request
from tests.support.kgc import KgcProcess
from tests.support.wire_client import RawMember, WireClient


def large_requests(items: int, filter_mb: float) -> dict[str, object]:
    groups = [f"attacker-group-{i}" for i in range(items)]
    entry = "PreparingRebalance"
    fetch_group = OffsetFetchRequest.OffsetFetchRequestGroup
    return {
        "ListGroups states filter": ListGroupsRequest(
            version=5, states_filter=[entry] * int(filter_mb * 2**20 / (len(entry) + 1)), types_filter=[]),
        "FindCoordinator keys": FindCoordinatorRequest(version=4, key_type=0, coordinator_keys=groups),
        "DescribeGroups groups": DescribeGroupsRequest(version=5, groups=groups, include_authorized_operations=False),
        "OffsetFetch v8 groups": OffsetFetchRequest(version=8, require_stable=False, groups=[
            fetch_group(group_id=g, topics=None) for g in groups]),
        "DeleteGroups groups": DeleteGroupsRequest(version=2, groups_names=groups),
        "OffsetCommit partitions": commit_request(8, "attacker-commit", [("t", p, 1, None) for p in range(items)]),
        # the same group's offsets, every one of them: a tombstone per partition
        "OffsetDelete partitions": offset_delete_request("attacker-commit", (("t", range(items)),)),
    }


def encoded(attacker: BenchConnection, requests: dict[str, object]) -> dict[str, tuple[int, bytes]]:
    """Each request's correlation id and frame."""
    frames = {}
    for name, request in requests.items():
        cid = attacker.next_correlation_id()
        request.with_header(correlation_id=cid, client_id="attacker")
        frames[name] = (cid, bytes(request.encode(header=True, framed=True)))
    return frames


async def heartbeats(member: RawMember, until: asyncio.Event) -> list[float]:
    latencies = []
    while not until.is_set():
        started = time.perf_counter()
        code = await member.heartbeat()
        assert code == 0, f"the healthy member's heartbeat was answered {code}"
        latencies.append(time.perf_counter() - started)
    return latencies


async def measure(member: RawMember, attack) -> tuple[list[float], float]:
    done = asyncio.Event()
    beats = asyncio.ensure_future(heartbeats(member, done))
    started = time.perf_counter()
    await attack()
    elapsed = time.perf_counter() - started
    await asyncio.sleep(0.05)
    done.set()
    return await beats, elapsed


def line(name: str, latencies: list[float], elapsed: float, baseline_p99: float | None) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    ratio = f"{p99 / baseline_p99:7.1f}x" if baseline_p99 else "       -"
    return (f"{name:28s} {elapsed * 1000:9.0f} ms {len(ms):7d} {statistics.median(ms):8.2f} {p99:8.2f} "
            f"{ms[-1]:8.2f} {ratio}")


async def run(args: argparse.Namespace) -> None:
    log_args = ("--data-dir", args.data_dir) if args.data_dir else ()
    kgc = KgcProcess("--min-session-timeout-ms", "500", "--initial-rebalance-delay-ms", "0",
                     "--max-frame-bytes", str(200 * 2**20), *log_args).start()
    try:
        client = await WireClient.open(kgc.port, "healthy")
        member = RawMember(client, "healthy-group")
        await member.until_stable()
        attacker = await BenchConnection.open("127.0.0.1", kgc.port)
        frames = encoded(attacker, large_requests(args.items, args.filter_mb))
        # The request objects are garbage now: collect them, and set aside what is left,
        # before the clock starts, so this process's own full collections (it shares its
        # loop with the healthy member) are not counted as kgc's stall.
        gc.collect()
        gc.freeze()
        print(f"{'request (in flight)':28s} {'answered':>12s} {'beats':>7s} {'p50 ms':>8s} {'p99 ms':>8s} "
              f"{'max ms':>8s} {'p99/base':>8s}")
        baseline, elapsed = await measure(member, lambda: asyncio.sleep(args.baseline_s))
        base_ms = sorted(x * 1000 for x in baseline)
        base_p99 = base_ms[min(len(base_ms) - 1, int(len(base_ms) * 0.99))]
        print(line("baseline (no attacker)", baseline, elapsed, None))
        for name, (cid, frame) in frames.items():
            latencies, elapsed = await measure(
                member, lambda f=frame, c=cid: asyncio.wait_for(attacker.send(f, c), 300))
            print(line(name, latencies, elapsed, base_p99), flush=True)
        attacker.close()
        client.close()
    finally:
        kgc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200_000, help="groups, keys or partitions per request")
    parser.add_argument("--filter-mb", type=float, default=1.5, help="size of the ListGroups states filter")
    parser.add_argument("--data-dir", help="a fresh directory for kgc's log (default: in memory)")
    parser.add_argument("--baseline-s", type=float, default=2.0, help="baseline heartbeat window")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
