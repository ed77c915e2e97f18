import pytest

from tests.support.kafkajs import node  # noqa: F401 (a fixture for every e2e test)
from tests.support.kgc import KGC_GROUP_FLAGS, free_port, kgc_process, wait_listening


@pytest.fixture(scope="session")
def kgc(kafka, tmp_path_factory):
    """`kgc serve` in front of the session's Kafka broker: clients bootstrap here and never see Kafka."""
    broker_port = free_port()
    log_path = tmp_path_factory.mktemp("kgc") / "kgc.log"
    with kgc_process("--upstream", kafka.bootstrap, "--broker-port", f"{kafka.node_id}={broker_port}",
                     *KGC_GROUP_FLAGS, log_path=str(log_path)) as proc:
        # The broker's listener opens once kgc has learnt the broker from upstream.
        wait_listening(broker_port)
        yield proc
