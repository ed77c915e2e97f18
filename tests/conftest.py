import pytest

from tests.support.kafka import KafkaCluster
from tests.support.tansu import TansuBroker


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """One real Apache Kafka broker (KRaft, one combined node) for the whole run: the upstream
    the end-to-end tests put kgc in front of."""
    with KafkaCluster(tmp_path_factory.mktemp("kafka")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def tansu():
    """One real Tansu broker for the whole run (memory storage: topics are per-run): kgc's
    embedded upstream, and the tests of what only it does."""
    with TansuBroker() as broker:
        yield broker
