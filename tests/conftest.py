import pytest

# The helpers under tests/support assert as tests do; pytest rewrites their asserts as it does
# test modules' (so a failure shows the values compared) if told before they are imported.
pytest.register_assert_rewrite("tests.support")

from tests.support.kafka import THREE_HOSTS, KafkaCluster, KafkaSecurity  # noqa: E402
from tests.support.security import TestPki  # noqa: E402
from tests.support.tansu import TansuBroker  # noqa: E402


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """One real Apache Kafka broker (KRaft, one combined node) for the whole run: the upstream
    the end-to-end tests put kgc in front of."""
    with KafkaCluster(tmp_path_factory.mktemp("kafka")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka3(tmp_path_factory):
    """Three real Kafka nodes on 127.0.0.11-13 (replication factor 3, min ISR 2), started once
    for the run: the system scenarios bounce its brokers, and restart each one they stop."""
    with KafkaCluster(tmp_path_factory.mktemp("kafka3"), THREE_HOSTS) as cluster:
        yield cluster


# The secured cluster's users: admin is its super user; kgc logs in as itself.
KAFKA_USERS = {"admin": "admin-secret", "kgc": "kgc-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory):
    """One real Kafka broker whose clients must log in (SASL_SSL: SCRAM-SHA-512 or PLAIN, TLS
    from a test CA) and are authorized by Kafka's StandardAuthorizer (no ACL: no access)."""
    directory = tmp_path_factory.mktemp("secured-kafka")
    pki = TestPki(tmp_path_factory.mktemp("secured-kafka-pki"))
    with KafkaCluster(directory, security=KafkaSecurity(pki, KAFKA_USERS)) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def tansu():
    """One real Tansu broker for the whole run (memory storage: topics are per-run): kgc's
    embedded upstream, and the tests of what only it does."""
    with TansuBroker() as broker:
        yield broker
