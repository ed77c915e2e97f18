"""Every part of kgc that handles an API reads, or agrees with, its row in the table of
APIs (`protocol.apis`): the versions the dispatcher serves and ApiVersions offers
(`protocol.api_keys`, `coordinator.net.local_answers`, `coordinator.gateway.versions`),
the codecs (`protocol.messages`), the error answers (`protocol.error_responses`), the
service that runs the group APIs (`coordinator.service`) and the authorizer's rules
(`coordinator.net.authorization`). An API added to the table and forgotten in one of them
fails here, before a client finds it answered by nobody, unguarded, or forwarded upstream."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import pytest
from kafka.protocol.api_key import ApiKey

from coordinator.gateway.gateway import Gateway
from coordinator.gateway.versions import TRANSACTION_VERSION, Features, merge_api_versions
from coordinator.net import authorization
from coordinator.net.local_answers import LocalAnswers
from coordinator.node import CoordinatorNode
from coordinator.security.acl import Operation, ResourceType
from coordinator.service.group_coordinator import GroupCoordinatorService
from protocol.api_keys import GROUP_APIS, LOCAL_VERSIONS, SASL_VERSIONS, TXN_OFFSET_COMMIT_VERSIONS
from protocol.apis import APIS, Server, Where
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from protocol.messages import request_class, response_class

NODE = CoordinatorNode(1, "localhost", 9092)
SERVED = {key: api for key, api in APIS.items() if api.versions is not None}


def _rows(*servers: Server) -> set[int]:
    return {key for key, api in APIS.items() if api.served_by in servers}


class _Transactions:
    def submit(self, ctx, request):
        raise AssertionError("not called: the tables are read, no request is run")


@pytest.mark.parametrize("api", sorted(SERVED), ids=lambda a: ApiKey(a).name)
def test_every_served_version_has_a_codec(api):
    low, high = SERVED[api].versions
    for cls in (request_class(api), response_class(api)):
        assert cls.min_version <= low and high <= cls.max_version, (cls, low, high)


@pytest.mark.parametrize("api", sorted(APIS), ids=lambda a: ApiKey(a).name)
def test_every_api_has_an_error_answer_in_its_own_class(api):
    version = APIS[api].versions[0] if APIS[api].versions else 0
    request = request_class(api)(version=version)
    for field in ("topics", "groups", "coordinator_keys", "groups_names", "group_ids", "members"):
        if hasattr(request, field):
            setattr(request, field, [])
    response = error_response(api, version, request, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert isinstance(response, APIS[api].response)


def test_the_service_runs_exactly_the_apis_the_table_gives_it():
    with_upstream = GroupCoordinatorService(runtime=None, node=NODE, transactions=_Transactions()).api_keys
    standalone = GroupCoordinatorService(runtime=None, node=NODE).api_keys
    assert set(with_upstream) == _rows(Server.SERVICE)
    assert set(standalone) == {k for k in _rows(Server.SERVICE) if APIS[k].where is not Where.WITH_UPSTREAM}


def test_the_authorizer_guards_exactly_the_apis_the_service_runs():
    # AddOffsetsToTxn (Server.TRANSACTIONS) is checked by the dispatcher, before coordinator/txn.
    assert set(authorization._GUARDS) == _rows(Server.SERVICE)
    assert all(APIS[key].acl for key in _rows(Server.SERVICE, Server.TRANSACTIONS))
    assert not any(APIS[key].acl for key in _rows(Server.CONNECTION, Server.SASL))


def test_every_acl_check_in_the_table_names_a_kafka_operation_and_resource():
    for api in APIS.values():
        resources = [ResourceType[acl.resource] for acl in api.acl]
        assert len(resources) == len(set(resources)), api.key     # `needs` finds one per resource
        for acl in api.acl:
            assert authorization.needs(api.key, ResourceType[acl.resource]) is Operation[acl.operation]


def test_the_dispatcher_serves_the_table_s_ranges():
    assert dict(LOCAL_VERSIONS) == {k: api.versions for k, api in SERVED.items()
                                    if api.served_by in (Server.CONNECTION, Server.SERVICE)
                                    and api.where is not Where.WITH_UPSTREAM}
    assert dict(SASL_VERSIONS) == {k: SERVED[k].versions for k in _rows(Server.SASL)}
    assert TXN_OFFSET_COMMIT_VERSIONS == APIS[ApiKey.TxnOffsetCommit].versions


def test_api_versions_offers_exactly_the_table_s_ranges_standalone():
    offered = LocalAnswers(NODE).served_ranges()
    assert offered == {k: api.versions for k, api in SERVED.items() if api.where is not Where.WITH_UPSTREAM}


def test_api_versions_offers_exactly_the_table_s_ranges_with_an_upstream():
    cluster = SimpleNamespace(api_versions={api: (0, 99) for api in ApiKey},
                              features=Features(finalized=((TRANSACTION_VERSION, 2, 2),)))
    gateway = SimpleNamespace(cluster=cluster)
    gateway.api_versions = partial(Gateway.api_versions, gateway)
    # The app's versions with an upstream (`coordinator/app.py`).
    versions = {**LOCAL_VERSIONS, ApiKey.TxnOffsetCommit: TXN_OFFSET_COMMIT_VERSIONS}
    offered = LocalAnswers(NODE, gateway, versions).served_ranges()
    for key, api in SERVED.items():
        if api.where is not Where.STANDALONE:   # Metadata is the upstream's then, forwarded
            assert offered[key] == api.versions, ApiKey(key).name
    # AddOffsetsToTxn is offered at the upstream's range: kgc answers whatever version it sends.
    assert offered[ApiKey.AddOffsetsToTxn] == (0, 99)


def test_every_group_api_is_served_or_refused_and_none_is_offered_from_the_upstream():
    upstream = {api: (0, 99) for api in ApiKey}
    offered = merge_api_versions(LOCAL_VERSIONS, upstream)
    for api in GROUP_APIS:
        assert offered.get(api) == LOCAL_VERSIONS.get(api), ApiKey(api).name
    assert GROUP_APIS >= _rows(Server.SERVICE) - {ApiKey.FindCoordinator}
