"""`kgc serve` chooses its upstream: the embedded Tansu broker when no `--upstream` is given
and the `embedded` extra is installed, standalone with `--standalone`, and standalone with
the reason logged when the embedded broker is unavailable."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.structs import OffsetAndMetadata

from coordinator.probe import request_response
from coordinator.settings import ServerConfig
from tests.support.admin import create_topic, new_name, produce_sequenced
from tests.support.clients import Member, MemberSettings, wait_until
from tests.support.embedded_upstream import EMBEDDED_LINE, log_text, process_exists
from tests.support.kgc import KGC_GROUP_FLAGS, KgcProcess, free_port, kgc_process, wait_listening

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PARTITIONS = 2
KGC_NODE_ID = ServerConfig().node_id


@contextlib.contextmanager
def embedded_kgc(tansu, tmp_path) -> Iterator[tuple[KgcProcess, int, Path]]:
    """`kgc serve` with its embedded broker up: the process, the broker's pid, the log."""
    log_path = tmp_path / "kgc.log"
    broker_port = free_port()
    # The embedded broker is the same Tansu build as the session's, so it has the same node id.
    with kgc_process("--broker-port-base", str(broker_port - tansu.node_id), log_path=str(log_path),
                     embedded=True) as kgc:
        wait_listening(broker_port)
        yield kgc, int(EMBEDDED_LINE.search(log_text(log_path))[1]), log_path


def metadata(port: int) -> MetadataResponse:
    return request_response(("127.0.0.1", port), MetadataRequest[1](topics=None), MetadataResponse)


def test_serve_without_upstream_runs_the_embedded_broker_says_so_and_stops_it(tansu, tmp_path):
    log_path = tmp_path / "kgc.log"
    broker_port = free_port()
    # The embedded broker is the same Tansu build as the session's, so it has the same node id.
    with kgc_process("--broker-port-base", str(broker_port - tansu.node_id), *KGC_GROUP_FLAGS,
                     log_path=str(log_path), embedded=True) as kgc:
        wait_listening(broker_port)
        announced = EMBEDDED_LINE.search(log_text(log_path))
        assert announced, log_text(log_path)
        pid, node_id = int(announced[1]), int(announced[2])
        assert node_id == tansu.node_id and announced[3] != tansu.bootstrap
        assert process_exists(pid)
        # The line a user reads names every listener a client may be sent to.
        serving = f"kgc serving on 127.0.0.1:{kgc.port} (broker {node_id} on 127.0.0.1:{broker_port}); HTTP on"
        wait_until(lambda: serving in log_text(log_path), 10, lambda: log_text(log_path)[-2000:])

        topic = create_topic(kgc.bootstrap, PARTITIONS)
        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, 5)
        member = Member("confluent-kafka", MemberSettings(kgc.bootstrap, new_name("g"), topic, "embedded")).start()
        try:
            wait_until(lambda: len(member.consumed) == PARTITIONS * 5, 30, lambda: str(len(member.consumed)),
                       [member])
        finally:
            member.close()
    assert kgc.proc.returncode == 0
    assert not process_exists(pid)


@pytest.mark.skipif(sys.platform != "linux", reason="the broker follows its parent out via Linux PDEATHSIG")
def test_a_kgc_killed_with_sigkill_leaves_no_embedded_broker_behind(tansu, tmp_path):
    with embedded_kgc(tansu, tmp_path) as (kgc, pid, _log_path):
        kgc.kill()
        wait_until(lambda: not process_exists(pid), 10, lambda: f"embedded broker {pid} still running")


def test_serve_standalone_is_a_one_broker_cluster_with_no_topics(tmp_path):
    log_path = tmp_path / "kgc.log"
    with kgc_process("--standalone", log_path=str(log_path), embedded=True) as kgc:
        response = metadata(kgc.port)
    assert [(b.node_id, b.port) for b in response.brokers] == [(KGC_NODE_ID, kgc.port)]
    assert response.topics == []
    assert "standalone mode (--standalone)" in log_text(log_path)
    assert "embedded upstream" not in log_text(log_path)


def test_serve_without_the_embedded_broker_falls_back_to_standalone_and_says_why(tmp_path):
    log_path = tmp_path / "kgc.log"
    env = dict(os.environ, CALF_TANSU_BIN=str(tmp_path / "no-such-tansu"))
    with kgc_process(log_path=str(log_path), env=env, embedded=True) as kgc:
        response = metadata(kgc.port)
    assert [b.node_id for b in response.brokers] == [KGC_NODE_ID]
    text = log_text(log_path)
    assert "standalone mode: no --upstream given and no embedded broker" in text
    assert "no-such-tansu" in text  # the reason names what was missing


def test_an_embedded_broker_that_dies_is_reported_and_reaped_while_kgc_keeps_serving(tansu, tmp_path):
    with embedded_kgc(tansu, tmp_path) as (kgc, pid, log_path):
        os.kill(pid, 9)
        exited = f"embedded upstream (pid {pid}) exited with -9"
        wait_until(lambda: exited in log_text(log_path), 10, lambda: log_text(log_path)[-2000:])
        # Reaped: no zombie left under a kgc that goes on running.
        assert not os.path.exists(f"/proc/{pid}")
        assert kgc.proc.poll() is None
        assert metadata(kgc.port).brokers, "kgc stopped answering after its upstream died"
    assert kgc.proc.returncode == 0


def test_a_restart_over_the_embedded_brokers_memory_storage_is_said_loudly(tansu, tmp_path):
    """The embedded broker forgets its topics when kgc stops; the data dir keeps the offsets.
    kgc says so at start and in /readyz, and names the groups whose topics are gone."""
    data_dir, http_port = tmp_path / "data", free_port()
    args = ("--data-dir", str(data_dir), "--http-port", str(http_port), "--lag-refresh-interval-ms", "0")
    group = new_name("lost")
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    broker_port = free_port()
    with kgc_process("--broker-port-base", str(broker_port - tansu.node_id), *args, log_path=str(first),
                     embedded=True) as kgc:
        wait_listening(broker_port)
        topic = create_topic(kgc.bootstrap, 1)
        consumer = KafkaConsumer(bootstrap_servers=kgc.bootstrap, group_id=group, enable_auto_commit=False)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)})
        finally:
            consumer.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/readyz", timeout=10) as resp:
            assert any("in memory only" in w for w in json.load(resp)["warnings"])
    assert "the embedded upstream keeps topics and records in memory only" in log_text(first)

    broker_port = free_port()
    with kgc_process("--broker-port-base", str(broker_port - tansu.node_id), *args, log_path=str(second),
                     embedded=True):
        wait_listening(broker_port)
        lost = f"groups {group} have committed offsets for topic {topic}, which the upstream does not have"
        wait_until(lambda: lost in log_text(second), 10, lambda: log_text(second)[-2000:])
