import pytest

from tests.support.kafkajs import node  # noqa: F401 (a fixture for every e2e test)
from tests.support.kgc import KGC_GROUP_FLAGS, KgcProcess, kgc_in_front_of, wait_listening
from tests.support.ports import free_port
from tests.support.sarama import sarama_1_22, sarama_1_61  # noqa: F401 (fixtures for every e2e test)


@pytest.fixture(scope="session")
def kgc(kafka, tmp_path_factory):
    """`kgc serve` in front of the session's Kafka broker: clients bootstrap here and never see Kafka."""
    log_path = tmp_path_factory.mktemp("kgc") / "kgc.log"
    with kgc_in_front_of(kafka, *KGC_GROUP_FLAGS, log_path=str(log_path)) as proc:
        yield proc


# A crashed member's partitions move after its session: short here, 45 s by default, yet long
# enough for a restarted static member (a JVM, on a loaded machine) to be back within it.
KGC_FLAGS = ("--consumer-session-timeout-ms", "10000", "--consumer-heartbeat-interval-ms", "500")


@pytest.fixture(scope="module")
def kgc848(kafka, tmp_path_factory):
    """kgc with a data dir (the restart test kills it) in front of the session's Kafka."""
    broker_port, http_port = free_port(), free_port()
    root = tmp_path_factory.mktemp("kgc848")
    proc = KgcProcess("--upstream", kafka.bootstrap, "--broker-port", f"{kafka.node_id}={broker_port}",
                      "--data-dir", str(root / "data"), "--http-port", str(http_port), *KGC_FLAGS,
                      log_path=str(root / "kgc.log")).start()
    proc.http_port = http_port
    try:
        wait_listening(broker_port)
        yield proc
    finally:
        proc.stop()
