"""kafka-python's own group coordinator (BaseCoordinator: its JoinGroup/SyncGroup/
Heartbeat/LeaveGroup code and heartbeat thread) forms a group on kgc, rebalances when a
member leaves or goes silent, and commits/fetches offsets with its protocol classes."""

from __future__ import annotations

import threading
import time

import pytest
from kafka.coordinator.base import BaseCoordinator
from kafka.net.compat import KafkaNetClient
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest

from tests.support.kgc import kgc_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

PARTITIONS = 6


class SlicesCoordinator(BaseCoordinator):
    """A minimal group protocol: the leader deals partition numbers round-robin."""

    def __init__(self, client, **configs):
        super().__init__(client, **configs)
        self.assigned: tuple[int, list[int]] | None = None

    def protocol_type(self):
        return "slices"

    def group_protocols(self):
        return [("round-robin", b"v1")]

    def _perform_assignment(self, leader_id, protocol, members):
        ids = sorted(m.member_id for m in members)
        return {mid: bytes(p for p in range(PARTITIONS) if p % len(ids) == i) for i, mid in enumerate(ids)}

    async def _on_join_complete_async(self, generation, member_id, protocol, member_assignment_bytes):
        self.assigned = (generation, list(member_assignment_bytes))


class Member:
    def __init__(self, bootstrap: str, name: str):
        self.client = KafkaNetClient(bootstrap_servers=bootstrap, client_id=name)
        broker_version = self.client.check_version(timeout_ms=10_000)
        self.coordinator = SlicesCoordinator(self.client, group_id="g-kp", session_timeout_ms=1500,
                                             heartbeat_interval_ms=100, max_poll_interval_ms=10_000,
                                             retry_backoff_ms=50, api_version=broker_version)
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            while not self._stop.is_set():
                self.coordinator.ensure_active_group(timeout_ms=1000)
                time.sleep(0.02)
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def start(self) -> Member:
        self.thread.start()
        return self

    def halt(self) -> None:
        self._stop.set()
        self.thread.join(10)

    def crash(self) -> None:
        """Stop every heartbeat without leaving the group."""
        self.halt()
        self.coordinator._close_heartbeat()

    def leave(self) -> None:
        self.halt()
        self.coordinator.close(timeout_ms=5000)
        self.client.close()


def wait_settled(members: list[Member], min_generation: int = 0, timeout_s: float = 20) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for m in members:
            assert m.error is None, m.error
        got = [m.coordinator.assigned for m in members]
        if all(got) and len({g for g, _ in got}) == 1 and got[0][0] > min_generation:
            owned = sorted(p for _, ps in got for p in ps)
            if owned == list(range(PARTITIONS)):
                return got[0][0]
        time.sleep(0.05)
    raise AssertionError(f"group did not settle: {[m.coordinator.assigned for m in members]}")


def test_kafka_python_coordinators_form_rebalance_commit_and_fetch(tmp_path):
    with kgc_process("--min-session-timeout-ms", "500", "--initial-rebalance-delay-ms", "0",
                     log_path=str(tmp_path / "kgc.log")) as kgc:
        members = [Member(kgc.bootstrap, f"kp-{i}").start() for i in range(3)]
        generation = wait_settled(members)

        leader = members[0]
        gen, parts = leader.coordinator.assigned
        commit = OffsetCommitRequest(
            group_id="g-kp", generation_id_or_member_epoch=gen, member_id=leader.coordinator._generation.member_id,
            group_instance_id=None, retention_time_ms=-1,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                name="t", partitions=[OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=10 * p, committed_leader_epoch=-1,
                    committed_metadata="kp") for p in parts])],
            max_version=9)      # v10 names topics by id: by name, kafka-python must stop at v9 (as its consumer does at 8)
        # Members' clients are busy in their own threads (kafka-python clients are not
        # thread-safe); a member's commit may arrive on any connection.
        tool = KafkaNetClient(bootstrap_servers=kgc.bootstrap, client_id="kp-tool")
        tool.check_version(timeout_ms=10_000)
        node = tool.least_loaded_node()  # kgc answers group APIs on every listener
        resp = tool.send_and_receive(node, commit)
        assert [p.error_code for t in resp.topics for p in t.partitions] == [0] * len(parts)

        # kgc serves OffsetFetch v8+, so kafka-python sends the multi-group form (by name: v9 at most).
        fetch = OffsetFetchRequest(require_stable=False, groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id="g-kp", member_id=None, member_epoch=-1, topics=[
                OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                    name="t", partition_indexes=list(range(PARTITIONS)))])], max_version=9)
        resp = tool.send_and_receive(node, fetch)
        assert [g.group_id for g in resp.groups] == ["g-kp"]
        offsets = {p.partition_index: p.committed_offset for t in resp.groups[0].topics for p in t.partitions}
        assert offsets == {p: (10 * p if p in parts else -1) for p in range(PARTITIONS)}

        members.pop().leave()
        generation = wait_settled(members, generation)

        silent = members.pop()
        silent.crash()
        generation = wait_settled(members, generation)
        assert members[0].coordinator.assigned[1] == list(range(PARTITIONS))
        members[0].leave()
        silent.client.close()
        tool.close()
