"""Fixtures shared by the runtime tests: one partition over a memory store whose batches
become durable only when a test says so."""

import pytest

from storage.memory_store import MemoryLogStore
from tests.support.runtime_harness import Harness


@pytest.fixture
def store():
    return MemoryLogStore(num_partitions=1, manual_commit=True)


@pytest.fixture
async def harness(store):
    h = Harness(store, [1_000])
    await h.start()
    yield h
    await h.partition.close(drain_timeout_s=0)
