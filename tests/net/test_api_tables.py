"""The tables that say, per API, how kgc serves it agree with each other: the versions
kgc serves (`protocol.api_keys`), their codecs (`protocol.messages`), their error answers
(`protocol.error_responses`), the service that runs them (`coordinator.service`), the
authorizer's rule (`coordinator.net.authorization`) and what ApiVersions offers
(`coordinator.gateway.versions`). An API added to one and forgotten in another fails here,
before a client finds it answered by nobody, unguarded, or forwarded upstream."""

from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey

from coordinator.gateway.versions import merge_api_versions
from coordinator.net.authorization import _GUARDS
from coordinator.node import CoordinatorNode
from coordinator.service.group_coordinator import GroupCoordinatorService
from protocol.api_keys import (
    GROUP_APIS,
    LOCAL_VERSIONS,
    SASL_VERSIONS,
    TXN_OFFSET_COMMIT_VERSIONS,
)
from protocol.error_responses import _BUILDERS
from protocol.messages import request_class, response_class

# Answered by the connection itself, never by the service: ApiVersions to anyone;
# Metadata only in standalone mode, where kgc is the whole cluster.
CONNECTION_APIS = {ApiKey.ApiVersions, ApiKey.Metadata}
# Served only in front of an upstream, whose transaction coordinator decides (coordinator/txn).
WITH_UPSTREAM = {ApiKey.TxnOffsetCommit: TXN_OFFSET_COMMIT_VERSIONS}
SERVED = {**LOCAL_VERSIONS, **SASL_VERSIONS, **WITH_UPSTREAM}
SERVICE_APIS = set(LOCAL_VERSIONS) - CONNECTION_APIS | set(WITH_UPSTREAM)


class _Transactions:
    def submit(self, ctx, request):
        raise AssertionError("not called: the tables are read, no request is run")


@pytest.fixture(scope="module")
def service_apis() -> set[int]:
    node = CoordinatorNode(1, "localhost", 9092)
    return set(GroupCoordinatorService(runtime=None, node=node, transactions=_Transactions()).api_keys)


@pytest.mark.parametrize("api", sorted(SERVED), ids=lambda a: ApiKey(a).name)
def test_every_served_version_has_a_codec(api):
    low, high = SERVED[api]
    for cls in (request_class(api), response_class(api)):
        assert cls.min_version <= low and high <= cls.max_version, (cls, low, high)


def test_the_service_runs_exactly_the_apis_kgc_serves(service_apis):
    assert service_apis == SERVICE_APIS


def test_every_api_the_service_runs_has_an_authorization_rule_and_no_other(service_apis):
    assert set(_GUARDS) == service_apis


def test_every_local_api_has_an_error_answer_and_only_group_apis_have_one_besides():
    # An unserved group API is refused, never forwarded: in its own shape
    # (UNSUPPORTED_VERSION) where one is written, by closing the connection otherwise.
    assert set(LOCAL_VERSIONS) | set(WITH_UPSTREAM) <= set(_BUILDERS) <= set(LOCAL_VERSIONS) | GROUP_APIS


def test_every_group_api_is_served_or_refused_and_none_is_offered_from_the_upstream():
    upstream = {api: (0, 99) for api in ApiKey}
    offered = merge_api_versions(LOCAL_VERSIONS, upstream)
    for api in GROUP_APIS:
        assert offered.get(api) == LOCAL_VERSIONS.get(api), ApiKey(api).name
    assert GROUP_APIS & set(SERVICE_APIS) == set(SERVICE_APIS) - {ApiKey.FindCoordinator}
