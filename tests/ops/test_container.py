"""The container's settings at work: `kgc serve` with the image's environment and the
README's `docker run` line, in front of a real broker, reached by a client the way one
outside the container reaches it. (No Docker engine here: the process runs on this
machine, with the same settings the image and the `docker run` line give it.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kafka import KafkaConsumer
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from coordinator.probe import request_response
from tests.support.admin import create_topic, new_name, produce_sequenced
from tests.support.deploy_files import image_env, readme_docker_run
from tests.support.kgc import free_port, wait_listening

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture
def kgc_as_in_the_container(tansu, tmp_path):
    """The image's settings and the README's, but the ports: a container has its own ports,
    while this machine is shared with other tests, so kgc takes free ones (each published
    on its own number, as the README publishes them, so clients dial what kgc listens on)."""
    run = readme_docker_run()
    port, http_port, broker_port = free_port(), free_port(), free_port()
    env = image_env(run, tmp_path) | {
        "KGC_DATA_DIR": str(tmp_path / "data"), "KGC_PORT": str(port), "KGC_HTTP_PORT": str(http_port),
        "KGC_BROKER_PORT_BASE": str(broker_port - tansu.node_id)}
    args = [tansu.bootstrap if arg == run.args[run.args.index("--upstream") + 1] else arg for arg in run.args]
    outside = {k: v for k, v in os.environ.items() if not k.startswith("KGC_")}
    with open(tmp_path / "kgc.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "coordinator", "serve", *args], env=outside | env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_listening(broker_port, timeout_s=30)
        yield run.env["KGC_ADVERTISED_HOST"], port, broker_port, tansu.node_id
    finally:
        proc.terminate()
        proc.wait(15)
    assert b"WARNING" not in (tmp_path / "kgc.log").read_bytes()


def test_a_client_is_told_the_advertised_host_and_the_published_ports_and_a_group_works(kgc_as_in_the_container):
    host, port, broker_port, node_id = kgc_as_in_the_container
    bootstrap = f"{host}:{port}"
    metadata = request_response((host, port), MetadataRequest[1](topics=None), MetadataResponse)
    brokers = {node: (broker_host, broker_port_) for node, broker_host, broker_port_, _rack in metadata.brokers}
    assert brokers[node_id] == (host, broker_port)
    assert all(broker_host == host for broker_host, _ in brokers.values()) and (host, port) in brokers.values()
    topic, group = create_topic(bootstrap, 1), new_name("container")
    produce_sequenced(bootstrap, topic, 1, 3)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             consumer_timeout_ms=20_000)
    try:
        assert [next(consumer).value for _ in range(3)] == [b"0:0", b"0:1", b"0:2"]
    finally:
        consumer.close()
