"""Where the long fuzz run's memory goes: kgc's RSS under the fuzz test's hostile requests.

`kgc serve` runs in a child process (standalone, a fresh data dir); the fuzz test's
generator of schema-valid but hostile requests (`tests/support/hostile_requests.py`)
sends `--chunks` rounds of 1,000 examples, each frame on its own connection, and kgc's
RSS is printed after each round; at the end the groups and members kgc holds are counted
over the wire (ListGroups, then DescribeGroups).

    .venv/bin/python -m tests.bench.fuzz_rss --chunks 8

A benchmark, not a test: the requests are random and the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile

from hypothesis import HealthCheck, given, settings
from kafka.protocol.admin.groups import DescribeGroupsRequest, ListGroupsRequest

from tests.support.hostile_requests import encoded, hostile_requests, send_and_drain
from tests.support.kgc import KgcProcess, rss_bytes
from tests.support.wire_client import WireClient

ROUND = 1_000


def one_round(port: int) -> int:
    """Frames sent (a request its version cannot carry is not sent)."""
    sent = [0]

    @settings(max_examples=ROUND, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(hostile_requests)
    def hostile(request):
        frame = encoded(request)
        if frame is not None:
            send_and_drain(port, frame, park_s=0.5)
            sent[0] += 1

    hostile()
    return sent[0]


async def census(port: int) -> tuple[int, int, int]:
    """Groups, members, and the characters of the group ids kgc holds."""
    client = await WireClient.open(port, "census")
    listed = await client.call(ListGroupsRequest(version=4, states_filter=[]))
    ids = [g.group_id for g in listed.groups]
    members = 0
    for start in range(0, len(ids), 500):
        described = await client.call(DescribeGroupsRequest(version=5, groups=ids[start:start + 500],
                                                            include_authorized_operations=False))
        members += sum(len(g.members) for g in described.groups)
    client.close()
    return len(ids), members, sum(map(len, ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=6, help=f"rounds of {ROUND:,} hostile examples")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        kgc = KgcProcess("--min-session-timeout-ms", "500", "--initial-rebalance-delay-ms", "0",
                         "--data-dir", data_dir).start()
        try:
            print(f"start: kgc RSS {rss_bytes(kgc.proc.pid) / 2**20:.1f} MiB", flush=True)
            sent = 0
            for _ in range(args.chunks):
                sent += one_round(kgc.port)
                print(f"{sent:7,d} frames: kgc RSS {rss_bytes(kgc.proc.pid) / 2**20:.1f} MiB", flush=True)
            groups, members, id_chars = asyncio.run(census(kgc.port))
            print(f"kgc holds {groups} groups, {members} members (group ids {id_chars:,} characters)")
        finally:
            kgc.stop()


if __name__ == "__main__":
    main()
