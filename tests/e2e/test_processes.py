"""`kgc serve --processes 2` in front of the suite's real Kafka: two processes over one data
dir, each serving its half of the partitions on its own port, with unmodified clients of
four kinds; a process killed (kill -9) is started again with every acknowledged commit,
while the other process's groups go on; the processes stop with the one that started them."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.errors import KafkaConnectionError
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from coordinator.partitioning import partition_for
from coordinator.probe import request_response
from tests.support.admin import committed_offsets, create_topic, group_ids, new_name, produce_sequenced
from tests.support.clients import CONSUMER_PROTOCOL, Member, MemberSettings, wait_until
from tests.support.kgc import KGC_GROUP_FLAGS, KgcProcess, wait_listening
from tests.support.kgc_http import get_json
from tests.support.ports import free_port, free_port_run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 4
TIMEOUT_S = 60
STOP_S = 20


def group_on(process: int, prefix: str) -> str:
    """A new group id whose partition process `process` of two owns (p % 2 == process)."""
    for _ in range(1000):
        name = new_name(prefix)
        if partition_for(name) % 2 == process:
            return name
    raise AssertionError("no group id for that process in 1000 tries")


def children(pid: int) -> dict[int, int]:
    """process index -> pid, of the processes `pid` started (from /proc)."""
    found = {}
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        for child in f.read().split():
            with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
            if b"--process-index" in argv:
                found[int(argv[argv.index(b"--process-index") + 1])] = int(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def find_coordinator(port: int, group: str) -> tuple[int, int, int]:
    found = request_response(("127.0.0.1", port), FindCoordinatorRequest[3](key=group, key_type=0),
                             FindCoordinatorResponse)
    return found.error_code, found.node_id, found.port


def brokers_listed(port: int) -> set[tuple[int, int]]:
    metadata = request_response(("127.0.0.1", port), MetadataRequest[12](
        topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False), MetadataResponse)
    return {(b.node_id, b.port) for b in metadata.brokers}


def offsets_while_one_is_down(bootstrap: str, group: str) -> dict[int, int]:
    """The group's offsets through kafka-python's admin client, which sends FindCoordinator
    to any node Metadata lists and fails the call when that is the process that is down."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return committed_offsets(bootstrap, group)
        except KafkaConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def ownership(http_port: int) -> dict:
    return asyncio.run(get_json(http_port, "/v1/ownership"))[1]


@pytest.fixture(scope="module")
def two(kafka, tmp_path_factory):
    directory = tmp_path_factory.mktemp("processes")
    port, http_port, broker_port = free_port_run(2), free_port_run(2), free_port()
    proc = KgcProcess("--upstream", kafka.bootstrap, "--broker-port", f"{kafka.node_id}={broker_port}",
                      "--processes", "2", "--data-dir", str(directory / "data"), "--http-port", str(http_port),
                      *KGC_GROUP_FLAGS, port=port, log_path=str(directory / "kgc.log")).start(timeout_s=60)
    try:
        wait_listening(port + 1, 30)
        # Each process opens the shared broker listener once it has learnt the broker.
        wait_until(lambda: all((kafka.node_id, broker_port) in brokers_listed(p) for p in (port, port + 1)),
                   30, lambda: "the upstream broker is not listed by both processes")
        proc.http_port = http_port
        proc.broker_port = broker_port
        yield proc
    finally:
        proc.stop(STOP_S)


def test_each_process_serves_half_of_the_partitions_and_sends_clients_to_the_other_for_the_rest(two, kafka):
    first, second = ownership(two.http_port), ownership(two.http_port + 1)
    assert (first["mode"], first["process"], second["process"]) == ("processes", 0, 1)
    assert first["owned"] == list(range(0, 50, 2)) and second["owned"] == list(range(1, 50, 2))
    assert first["owners"] == second["owners"]
    nodes = {first["instance"]["node_id"]: two.port, second["instance"]["node_id"]: two.port + 1}
    for process in (0, 1):
        group = group_on(process, "routed")
        # Asked of either process, FindCoordinator names the owner.
        assert find_coordinator(two.port, group)[2] == find_coordinator(two.port + 1, group)[2] == two.port + process
    # Both processes list both coordinators and the same address for the upstream broker.
    listed = brokers_listed(two.port)
    assert listed == brokers_listed(two.port + 1)
    assert set(nodes.items()) | {(kafka.node_id, two.broker_port)} == listed


def test_real_clients_commit_through_both_and_a_killed_process_comes_back_with_its_commits(two, kafka):
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    produce_sequenced(kafka.bootstrap, topic, PARTITIONS, 20)
    groups = {0: group_on(0, "left"), 1: group_on(1, "right")}
    libraries = {0: ("confluent-kafka", "java"), 1: ("kafka-python", CONSUMER_PROTOCOL)}
    members = {process: [Member(library, MemberSettings(two.bootstrap, groups[process], topic, f"{library}-{process}"))
                         .start() for library in libraries[process]] for process in (0, 1)}
    everyone = members[0] + members[1]
    try:
        def read_all(process: int, records: int) -> None:
            wait_until(lambda: sum(len(m.consumed) for m in members[process]) >= records, TIMEOUT_S,
                       lambda: f"{[m.positions() for m in members[process]]}", everyone)

        for process in (0, 1):
            read_all(process, PARTITIONS * 20)
            for m in members[process]:
                m.commit()
            assert committed_offsets(two.bootstrap, groups[process]) == dict.fromkeys(range(PARTITIONS), 20)

        supervisor = two.proc.pid
        killed = children(supervisor)[1]
        os.kill(killed, signal.SIGKILL)
        wait_until(lambda: not alive(killed), 10, lambda: f"process 1 (pid {killed}) still there")
        # Process 0's group goes on meanwhile: it reads and commits what comes next.
        produce_sequenced(kafka.bootstrap, topic, PARTITIONS, 5, first_sequence=20)
        read_all(0, PARTITIONS * 25)
        for m in members[0]:
            m.commit()
        assert offsets_while_one_is_down(two.bootstrap, groups[0]) == dict.fromkeys(range(PARTITIONS), 25)

        # Started again by the supervisor (a new pid), process 1 has its group's commits. Its
        # members fetched on meanwhile (the data path goes through either process).
        wait_until(lambda: children(supervisor).get(1, killed) != killed, TIMEOUT_S, lambda: "not started again")
        wait_listening(two.port + 1, 30)
        assert committed_offsets(two.bootstrap, groups[1]) == dict.fromkeys(range(PARTITIONS), 20)
        read_all(1, PARTITIONS * 25)
        seen = [len(m.consumed) for m in members[1]]

        def committed_through_process_1() -> bool:
            for m in members[1]:
                m.commit()
            return committed_offsets(two.bootstrap, groups[1]) == dict.fromkeys(range(PARTITIONS), 25)

        wait_until(committed_through_process_1, TIMEOUT_S, lambda: f"{committed_offsets(two.bootstrap, groups[1])}")
        # A member that rejoined started from the commits that survived: nothing below 20 again.
        again = [c for m, n in zip(members[1], seen, strict=True) for c in m.consumed[n:]]
        assert all(c.offset >= 20 for c in again), again
        # A listing through process 0 names both processes' groups (each answers for its own).
        assert set(groups.values()) <= group_ids(two.bootstrap)
    finally:
        for m in everyone:
            if m.running:
                m.close()


def _supervisor(tmp_path: Path, *flags: str) -> KgcProcess:
    return KgcProcess("--processes", "2", "--data-dir", str(tmp_path / "data"), *flags, port=free_port_run(2),
                      log_path=str(tmp_path / "kgc.log"), own_session=True)


def test_the_processes_stop_with_a_sigterm_and_die_with_a_killed_supervisor(tmp_path):
    proc = _supervisor(tmp_path).start()
    try:
        wait_listening(proc.port + 1)
        first = children(proc.proc.pid)
        assert sorted(first) == [0, 1]
        assert proc.stop(STOP_S) == 0
        assert not any(alive(pid) for pid in first.values())

        proc.start()
        wait_listening(proc.port + 1)
        second = children(proc.proc.pid)
        proc.kill()
        wait_until(lambda: not any(alive(pid) for pid in second.values()), 10,
                   lambda: f"processes {second} outlived their supervisor")
    finally:
        proc.stop(STOP_S)


def test_a_process_that_cannot_start_stops_the_whole_start(tmp_path):
    proc = _supervisor(tmp_path)
    with socket.create_server(("127.0.0.1", proc.port + 1)):
        started = subprocess.run([sys.executable, "-m", "coordinator", "serve", *proc.args], capture_output=True,
                                 text=True, timeout=60)
    assert started.returncode == 2, started.stderr
    assert f"cannot listen for Kafka clients on 127.0.0.1:{proc.port + 1}" in started.stderr
