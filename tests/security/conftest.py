"""Fixtures of the tests that put kgc in front of the secured broker (Tansu behind
tests/support/secure_front.py): one Tansu and one test PKI per module."""

from __future__ import annotations

import pytest

from tests.support.kgc import free_port
from tests.support.security import TestPki
from tests.support.tansu import TansuBroker


@pytest.fixture(scope="module")
def front_port():
    return free_port()


@pytest.fixture(scope="module")
def secured_tansu(front_port):
    """A Tansu of its own, advertising the front's port: every path to it goes through the front."""
    with TansuBroker(advertised_port=front_port) as broker:
        yield broker


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return TestPki(tmp_path_factory.mktemp("pki"))
