"""Graceful shutdown: SIGTERM under a stream of commits from real clients keeps every
acknowledged commit, leaves only whole batches, and the next start recovers nothing;
a second signal exits at once."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass

import pytest
from aiokafka.errors import KafkaError

from coordinator.commands.process import ShutdownSignals
from coordinator.offline.inspect import inspect_data_dir
from tests.support.aio_member import AioMember
from tests.support.kgc import KgcProcess, free_port
from tests.support.kgc_http import get_json
from tests.support.waiting import wait_until

TOPIC = "t"
PARTS = 3
FLAGS = ("--standalone", "--min-session-timeout-ms", "500", "--initial-rebalance-delay-ms", "0")


@dataclass
class Ledger:
    group: str
    sent: int = -1
    acked: int = -1
    refused: int = 0


async def committer(bootstrap: str, ledger: Ledger) -> None:
    """Commits 0, 1, 2... until the coordinator goes away or refuses."""
    member = AioMember(bootstrap, ledger.group, TOPIC, PARTS, client_id=f"ops-{ledger.group}")
    try:
        await member.connect()
        while True:
            ledger.sent += 1
            errors = await member.commit(dict.fromkeys(range(PARTS), ledger.sent))
            if errors != [0] * PARTS:
                ledger.refused += 1
                return
            ledger.acked = ledger.sent
    except KafkaError:
        return          # the connection closed under the commit: neither acked nor refused
    finally:
        if member.client is not None:
            await member.client.close()


async def fetch(bootstrap: str, group: str) -> dict[int, int]:
    member = AioMember(bootstrap, group, TOPIC, PARTS, client_id="ops-verifier")
    try:
        await member.connect()
        return await member.fetch(list(range(PARTS)))
    finally:
        if member.client is not None:
            await member.client.close()


@pytest.mark.integration
@pytest.mark.timeout(90)
async def test_sigterm_under_commit_load_keeps_every_acknowledged_commit_and_needs_no_recovery(tmp_path):
    data_dir, port, http_port = tmp_path / "data", free_port(), free_port()
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    ledgers = [Ledger(f"sigterm-{i}") for i in range(4)]

    process = KgcProcess("--data-dir", str(data_dir), "--http-port", str(http_port), *FLAGS,
                         port=port, log_path=str(first_log)).start()
    try:
        tasks = [asyncio.create_task(committer(process.bootstrap, ledger)) for ledger in ledgers]
        await wait_until(lambda: all(ledger.acked >= 20 for ledger in ledgers), 30, "commits from everyone")
        process.proc.send_signal(signal.SIGTERM)
        exit_code = await asyncio.to_thread(process.proc.wait, 30)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    finally:
        process.stop()
    assert exit_code == 0
    first = first_log.read_text()
    assert "SIGTERM: stopping gracefully" in first and "log flushed and closed" in first

    inspection = inspect_data_dir(data_dir)
    assert not inspection.corrupt
    for part in inspection.partitions:
        assert all(segment.damage is None for segment in part.segments), part
        assert not part.extra_files, part

    process = KgcProcess("--data-dir", str(data_dir), "--http-port", str(http_port), *FLAGS,
                         port=port, log_path=str(second_log)).start()
    try:
        for ledger in ledgers:
            committed = await fetch(process.bootstrap, ledger.group)
            values = set(committed.values())
            assert len(values) == 1, f"{ledger.group}: half a batch: {committed}"
            (value,) = values
            assert ledger.acked <= value <= ledger.sent, (ledger, value)
        status, ready = await get_json(http_port, "/readyz")
        assert status == 200, ready
    finally:
        process.stop()
    second = second_log.read_text()
    assert "torn tail" not in second and "recovered" not in second and "refused" not in second


async def test_a_second_signal_exits_at_once_while_the_first_stops_gracefully():
    graceful = asyncio.Event()
    immediate: list[int] = []
    signals = ShutdownSignals(graceful.set, immediate.append)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(graceful.wait(), 5)
        assert immediate == []
        os.kill(os.getpid(), signal.SIGINT)
        await wait_until(lambda: immediate, 5, "the second signal")
    finally:
        signals.remove()
    assert immediate == [signal.SIGINT] and signals.received == 2
