import pytest

from tests.support.kafkajs import node  # noqa: F401 (a fixture for every e2e test)
from tests.support.kgc import KGC_GROUP_FLAGS, kgc_in_front_of


@pytest.fixture(scope="session")
def kgc(kafka, tmp_path_factory):
    """`kgc serve` in front of the session's Kafka broker: clients bootstrap here and never see Kafka."""
    log_path = tmp_path_factory.mktemp("kgc") / "kgc.log"
    with kgc_in_front_of(kafka, *KGC_GROUP_FLAGS, log_path=str(log_path)) as proc:
        yield proc
