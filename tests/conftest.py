import pytest

from tests.support.tansu import TansuBroker


@pytest.fixture(scope="session")
def tansu():
    """One real Tansu broker for the whole run (memory storage: topics are per-run)."""
    with TansuBroker() as broker:
        yield broker
