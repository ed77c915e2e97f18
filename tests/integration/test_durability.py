"""Durability end to end: `kgc serve` killed with SIGKILL under a stream of commits from
real clients keeps every acknowledged commit and loads no half of a batch; a group
survives a restart without a rebalance; segments roll and the online cleaner compacts
the closed ones without changing what loads."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import threading
import time
from dataclasses import dataclass

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import KafkaError
from aiokafka.protocol.admin import DescribeGroupsRequest
from kafka.errors import KafkaError as KafkaPythonError
from kafka.net.compat import KafkaNetClient
from kafka.protocol.consumer.group import OffsetCommitRequest

from coordinator import records
from coordinator.offline.inspect import Inspection, inspect_data_dir
from coordinator.partitioning import partition_for
from coordinator.runtime.partition_state import PartitionState
from coordinator.service.cleaner_schedule import CleanerSchedule
from coordinator.settings import ServerConfig
from storage.api import LogRecord
from storage.file_store import partition_dir
from storage.format import encode_batch
from storage.segment import parse_segment_name
from tests.support.aio_member import RETRIABLE_CODES, AioMember
from tests.support.kgc import TEST_GROUP_CONFIG, KgcProcess, free_port, running_kgc
from tests.support.log_records import log_record
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration]

TOPIC = "t"
PARTS = 3                   # every commit writes all of them: one batch, kept or lost whole
KGC_FLAGS = ("--min-session-timeout-ms", "500", "--initial-rebalance-delay-ms", "0", "--log-level", "WARNING")


# -- kill -9 under load ------------------------------------------------------------------


@dataclass
class Ledger:
    """One committer's group. A commit sends one value for all PARTS partitions; `acked`
    is the last value whose response came back with error 0, `sent` the last one sent."""
    group: str
    next_value: int = 0
    acked: int = -1
    sent: int = -1

    def take(self) -> int:
        self.sent = value = self.next_value
        self.next_value += 1
        return value

    def check(self, fetched: dict[int, int]) -> int:
        values = set(fetched.values())
        # One commit is one batch: a value on some partitions but not others would be half a batch.
        assert len(values) == 1, f"{self.group}: partitions disagree {fetched}: half a batch loaded"
        (value,) = values
        assert value >= self.acked, f"{self.group}: acknowledged {self.acked} but {value} came back"
        assert value <= self.sent, f"{self.group}: {value} came back but only up to {self.sent} was sent"
        return value


async def aio_committer(bootstrap: str, ledger: Ledger, stop: asyncio.Event) -> None:
    member = AioMember(bootstrap, ledger.group, TOPIC, PARTS, client_id=f"aio-{ledger.group}")
    try:
        await member.connect()
        while not stop.is_set():
            value = ledger.take()
            errors = await member.commit({p: value for p in range(PARTS)})
            if errors == [0] * PARTS:
                ledger.acked = value
            else:
                assert set(errors) <= RETRIABLE_CODES, errors
                await asyncio.sleep(0.01)
    except KafkaError:
        pass                # the coordinator died under us: what the test is about
    finally:
        if member.client is not None:
            await member.client.close()


def kafka_python_committer(bootstrap: str, ledger: Ledger, stop: threading.Event) -> None:
    client = KafkaNetClient(bootstrap_servers=bootstrap, client_id=f"kp-{ledger.group}")
    try:
        client.check_version(timeout_ms=10_000)
        node = client.least_loaded_node()       # kgc answers group APIs on every listener
        while not stop.is_set():
            value = ledger.take()
            request = OffsetCommitRequest(
                group_id=ledger.group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                retention_time_ms=-1, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=TOPIC, partitions=[
                        OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=value, committed_leader_epoch=-1,
                            committed_metadata="kp") for p in range(PARTS)])],
                max_version=9)      # by name: v10 names topics by id
            response = client.send_and_receive(node, request, timeout_ms=5_000)
            errors = [p.error_code for t in response.topics for p in t.partitions]
            if errors == [0] * PARTS:
                ledger.acked = value
            else:
                assert set(errors) <= RETRIABLE_CODES, errors
                time.sleep(0.01)
    except KafkaPythonError:
        pass
    finally:
        client.close()


async def fetch_committed(bootstrap: str, group: str) -> dict[int, int]:
    member = AioMember(bootstrap, group, TOPIC, PARTS, client_id="verifier")
    try:
        await member.connect()
        return await member.fetch(list(range(PARTS)))
    finally:
        if member.client is not None:
            await member.client.close()


def log_end(data_dir, group: str) -> tuple[int, int]:
    """(end of the last whole batch, file size) of `group`'s partition's active segment."""
    (part,) = inspect_data_dir(data_dir, partition=partition_for(group)).partitions
    active = part.segments[-1]
    last = active.batches[-1] if active.batches else None
    return (last.position + last.size_bytes if last else 0), active.size_bytes


def tear_the_tail(data_dir, ledger: Ledger) -> int:
    """Write the first half of the batch kgc would have written next for `ledger`'s
    group where it would have gone (after the log, into a preallocated tail if any), as
    a kill in the middle of its write would leave it (a real SIGKILL seldom lands inside
    a write). Returns the partition."""
    partition = partition_for(ledger.group)
    (part,) = inspect_data_dir(data_dir, partition=partition).partitions
    unsent = ledger.sent + 1_000_000
    batch = encode_batch(part.end_offset, [log_record(records.new_offset_commit_record(
        ledger.group, TOPIC, p, records.OffsetCommitValue(unsent, -1, "", 0))) for p in range(PARTS)], 0)
    end, _size = log_end(data_dir, ledger.group)
    with open(partition_dir(data_dir, partition) / part.segments[-1].name, "r+b") as f:
        f.seek(end)
        f.write(batch[:len(batch) // 2])
    return partition


def assert_whole(inspection: Inspection, recovered: bool) -> None:
    """Every batch whole; a torn tail only at the end of a partition's active segment,
    saved as `.torn-N` beside it once recovered."""
    assert not inspection.corrupt
    for part in inspection.partitions:
        for segment in part.segments:
            if segment.damage is not None:
                assert not recovered and segment.damage.torn_tail and segment is part.segments[-1], segment
        for extra in part.extra_files:
            assert extra.kind == "torn tail", extra
            assert extra.name.startswith(part.segments[-1].name + ".torn-"), extra


async def kill_cycles(tmp_path, fsync: str, cycles: int, seed: int) -> None:
    print(f"kill timing seed {seed}")       # shown with a failure, to replay its timing
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    port = free_port()
    ledgers = [Ledger(f"durable-aio-{i}") for i in range(3)]
    kp_ledger = Ledger("durable-kafka-python")
    everyone = [*ledgers, kp_ledger]
    verified: dict[str, int] = {}

    def kgc() -> KgcProcess:
        return KgcProcess("--data-dir", str(data_dir), "--fsync", fsync, *KGC_FLAGS, port=port,
                          log_path=str(tmp_path / "kgc.log"))

    async def verify(bootstrap: str) -> None:
        for ledger in everyone:
            value = ledger.check(await fetch_committed(bootstrap, ledger.group))
            assert value >= verified.get(ledger.group, -1), f"{ledger.group} went back to {value}"
            verified[ledger.group] = value

    for cycle in range(cycles):
        process = kgc().start()
        try:
            if cycle:
                await verify(process.bootstrap)
            acked_before = {ledger.group: ledger.acked for ledger in everyone}
            stop, kp_stop = asyncio.Event(), threading.Event()
            committers = [asyncio.create_task(aio_committer(process.bootstrap, ledger, stop))
                          for ledger in ledgers]
            committers.append(asyncio.create_task(
                asyncio.to_thread(kafka_python_committer, process.bootstrap, kp_ledger, kp_stop)))
            await wait_until(lambda before=acked_before: all(ledger.acked > before[ledger.group]
                                                             for ledger in everyone),
                             what=f"cycle {cycle}: a first acknowledged commit from every committer")
            await asyncio.sleep(rng.uniform(0.05, 0.6))
            process.kill()
            stop.set()
            kp_stop.set()
            await asyncio.wait_for(asyncio.gather(*committers), 20)
        finally:
            process.kill()
        if fsync == "always":
            # The kill left the committers' active segments with their preallocated zeros.
            for ledger in everyone:
                end, size = log_end(data_dir, ledger.group)
                assert size > end, f"{ledger.group}: no preallocated tail ({size} bytes, log to {end})"
        if cycle == 1:
            torn_partition = tear_the_tail(data_dir, ledgers[0])
        # Straight after the kill, before any recovery: whole batches, at most a torn tail.
        assert_whole(inspect_data_dir(data_dir), recovered=False)

    process = kgc().start()
    try:
        await verify(process.bootstrap)
    finally:
        assert process.stop() == 0
    inspection = inspect_data_dir(data_dir)
    assert_whole(inspection, recovered=True)
    (torn,) = [p for p in inspection.partitions if p.partition == torn_partition]
    assert torn.segments[-1].name + ".torn-1" in [f.name for f in torn.extra_files]
    # inspect's replay of the files agrees with what kgc served.
    for ledger in everyone:
        state = inspection.groups[ledger.group]
        assert {p: v.offset for (_t, p), v in state.offsets.items()} == dict.fromkeys(
            range(PARTS), verified[ledger.group])
    # Commits were flowing on every cycle, not only in the first.
    assert all(ledger.acked >= cycles for ledger in everyone)


@pytest.mark.timeout(60)
async def test_sigkill_under_commit_load_keeps_every_acknowledged_commit_with_fsync_always(tmp_path):
    await kill_cycles(tmp_path, "always", cycles=4, seed=random.randrange(2**32))


@pytest.mark.timeout(60)
async def test_sigkill_with_fsync_never_still_keeps_acknowledged_commits(tmp_path):
    # `never` acknowledges a batch once write() has put it in the OS page cache. SIGKILL
    # ends the process, not the kernel: the page cache survives and reaches the disk
    # later, so a *process* kill loses nothing acknowledged, as asserted here. A machine
    # crash or power loss may lose whatever the kernel had not yet written back; this
    # test cannot cause one and promises nothing about it (use `always` or `interval`).
    await kill_cycles(tmp_path, "never", cycles=3, seed=random.randrange(2**32))


# -- restart: the group carries on ---------------------------------------------------------


def snapshot(members: list[AioMember]) -> list[tuple]:
    return [(m.member_id, m.assignment.generation, tuple(m.assignment.partitions), tuple(m.generations))
            for m in members]


async def describe(bootstrap: str, group: str):
    member = AioMember(bootstrap, group, TOPIC, 6, client_id="describer")
    try:
        await member.connect()
        response = await member.send_retrying(DescribeGroupsRequest([group]),
                                              lambda resp: [g[0] for g in resp.groups])
        (described,) = response.groups
        return described            # (error_code, group, state, protocol_type, protocol, members, ...)
    finally:
        await member.client.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
async def test_a_group_resumes_after_a_restart_with_its_generation_assignment_and_offsets(tmp_path, how):
    data_dir, port = tmp_path / "data", free_port()

    def kgc() -> KgcProcess:
        return KgcProcess("--data-dir", str(data_dir), *KGC_FLAGS, port=port, log_path=str(tmp_path / "kgc.log"))

    process = kgc().start()
    members = [AioMember(process.bootstrap, "g-restart", TOPIC, 6, client_id=f"aio-{i}",
                         session_timeout_ms=10_000) for i in range(3)]
    try:
        for m in members:
            await m.start()
        await wait_until(lambda: all(m.assignment is not None for m in members)
                         and len({m.assignment.generation for m in members}) == 1
                         and sorted(p for m in members for p in m.assignment.partitions) == list(range(6)),
                         what="3 members to settle")
        for m in members:
            assert await m.commit({p: 1_000 * (p + 1) for p in m.assignment.partitions}) == [0, 0]
        committed = await members[0].fetch(list(range(6)))
        assert committed == {p: 1_000 * (p + 1) for p in range(6)}
        before = snapshot(members)

        # In threads, so the members keep running and meet the dead coordinator.
        if how == "sigterm":
            assert await asyncio.to_thread(process.stop) == 0
        else:
            await asyncio.to_thread(process.kill)
        heartbeats = [m.heartbeats_ok for m in members]
        await wait_until(lambda: all(m.retries > 0 for m in members), what="members to notice kgc is gone")
        process = await asyncio.to_thread(kgc().start)

        await wait_until(lambda: all(m.heartbeats_ok >= n + 10 for m, n in zip(members, heartbeats, strict=True)),
                         what="every member to heartbeat on the restarted kgc")
        assert snapshot(members) == before                  # same member, generation, partitions; no rejoin
        assert await members[1].fetch(list(range(6))) == committed
        error, _group, state, _type, protocol, described, *_ = await describe(process.bootstrap, "g-restart")
        assert (error, state, protocol) == (0, "Stable", "range")
        # The group came back with its last assignment, member by member.
        assignments = {m[0]: ConsumerProtocolMemberAssignment.decode(m[4]).assignment for m in described}
        assert assignments == {m.member_id: [(TOPIC, m.assignment.partitions)] for m in members}
        # The loaded group still validates generations: the members' own is the live one.
        assert await members[2].commit({p: 7 for p in members[2].assignment.partitions}) == [0, 0]
    finally:
        for m in members:
            with contextlib.suppress(Exception):
                await m.close(leave=False)
        process.stop()


# -- segments roll; the cleaner compacts closed ones ---------------------------------------


def segment_files(data_dir, partition: int) -> list[str]:
    return sorted(n for n in os.listdir(partition_dir(data_dir, partition)) if parse_segment_name(n) is not None)


@pytest.mark.timeout(60)
async def test_segments_roll_and_the_cleaner_compacts_closed_ones_without_changing_what_loads(tmp_path):
    group = "g-clean"
    partition = partition_for(group)
    config = ServerConfig(host="127.0.0.1", port=0, data_dir=str(tmp_path), segment_bytes=4096,
                          group=TEST_GROUP_CONFIG)
    commits = 120
    async with running_kgc(config) as app:
        member = AioMember(f"127.0.0.1:{app.port}", group, TOPIC, PARTS, client_id="cleaned")
        await member.connect()
        for value in range(commits):
            assert await member.commit({p: value for p in range(PARTS)}) == [0] * PARTS
        rolled = segment_files(tmp_path, partition)
        assert len(rolled) >= 4
        (part,) = inspect_data_dir(tmp_path, group=group).partitions
        closed_records = sum(len(b.records) for s in part.segments[:-1] for b in s.batches)

        schedule = CleanerSchedule(app.store, app.runtime, interval_ms=20)
        schedule.start()
        try:
            await wait_until(lambda: schedule.passes >= 1, what="a cleaner pass")
        finally:
            await schedule.close()

        (part,) = inspect_data_dir(tmp_path, group=group).partitions
        closed = [r for s in part.segments[:-1] for b in s.batches for r in b.records]
        # Latest per key: each offset key at most once across the closed segments.
        keys = [r.raw_key for r in closed]
        assert len(keys) == len(set(keys)) and len(closed) < closed_records
        assert segment_files(tmp_path, partition)[-1] == rolled[-1]     # the active segment is untouched
        assert await member.fetch(list(range(PARTS))) == dict.fromkeys(range(PARTS), commits - 1)
        # Appends go on after the swap.
        assert await member.commit(dict.fromkeys(range(PARTS), commits)) == [0] * PARTS
        await member.client.close()

    async with running_kgc(config) as app:
        member = AioMember(f"127.0.0.1:{app.port}", group, TOPIC, PARTS, client_id="reloaded")
        await member.connect()
        assert await member.fetch(list(range(PARTS))) == dict.fromkeys(range(PARTS), commits)
        await member.client.close()


@pytest.mark.timeout(30)
async def test_the_cleaner_skips_partitions_that_are_not_active_and_stops_promptly(tmp_path, caplog):
    # Partition 0 gets a bad CRC before a sound batch: it is refused at open and FAILED.
    damaged = partition_dir(tmp_path, 0)
    damaged.mkdir(parents=True)
    data = bytearray(encode_batch(0, [LogRecord(b"k", b"v")], 0) + encode_batch(1, [LogRecord(b"k", b"w")], 0))
    data[30] ^= 0xFF
    (damaged / "00000000000000000000.log").write_bytes(bytes(data))

    config = ServerConfig(host="127.0.0.1", port=0, data_dir=str(tmp_path), group=TEST_GROUP_CONFIG)
    async with running_kgc(config) as app:
        assert app.runtime.partition_state(0) is PartitionState.FAILED
        schedule = CleanerSchedule(app.store, app.runtime, interval_ms=3_600_000)
        with caplog.at_level(logging.DEBUG, logger="coordinator.service.cleaner_schedule"):
            reports = await schedule.run_pass()
        assert sorted(reports) == list(range(1, 50))
        messages = [r.getMessage() for r in caplog.records if r.name == "coordinator.service.cleaner_schedule"]
        assert messages == ["partition 0 not cleaned: it is failed"]

        schedule.start()
        await asyncio.sleep(0.05)               # let it enter the wait of an hour-long interval
        started = time.monotonic()
        await schedule.close()
        assert time.monotonic() - started < 10, "close waited on the interval"
        assert schedule.passes == 1
