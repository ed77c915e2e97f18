"""Listener plan, broker-set bookkeeping and the ApiVersions merge: pure, no sockets."""

from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.plan import ListenerPlan, ListenerPlanError
from coordinator.gateway.rewrite import Broker
from coordinator.gateway.versions import Features, merge_api_versions

PLAN = ListenerPlan(coordinator_node_id=2_000_000_000, advertised_host="kgc.test", bootstrap_port=9092,
                    broker_port_base=19_092, port_map={7: 29_000})


def test_broker_listeners_are_base_plus_node_id_unless_mapped():
    assert PLAN.listener_address(1) == ("kgc.test", 19_093)
    assert PLAN.listener_address(7) == ("kgc.test", 29_000)
    assert PLAN.listener_address(PLAN.coordinator_node_id) == ("kgc.test", 9092)
    assert PLAN.coordinator == Broker(2_000_000_000, "kgc.test", 9092)


@pytest.mark.parametrize(("node_ids", "reason"), [
    ([1, 2_000_000_000], "uses kgc's coordinator node id"),
    ([1, 50_000], "no usable kgc port"),
    ([9_908, 7], "both map to port 29000"),  # 19092 + 9908 = the port mapped for node 7
])
def test_plan_check_refuses_broker_sets_it_cannot_serve(node_ids, reason):
    with pytest.raises(ListenerPlanError, match=reason):
        PLAN.check(node_ids)


def test_a_port_map_that_reuses_a_port_is_refused():
    with pytest.raises(ListenerPlanError):
        ListenerPlan(1, "h", bootstrap_port=9092, broker_port_base=10_000, port_map={1: 9092})


def test_observed_brokers_notify_subscribers_and_conflicts_are_refused():
    cluster = UpstreamCluster([("upstream", 9092)], plan=PLAN)
    changes = []
    cluster.subscribe(changes.append)

    cluster.observe_brokers([Broker(1, "a", 1), Broker(2, "b", 2)])
    cluster.observe_brokers([Broker(1, "a", 1), Broker(2, "b", 2)])  # no change, no news
    cluster.observe_brokers([Broker(2, "b", 2), Broker(3, "c", 3)])

    assert [(set(c.added), set(c.removed)) for c in changes] == [({1, 2}, set()), ({3}, {1})]
    cluster.observe_brokers([Broker(2_000_000_000, "x", 1)])
    assert set(cluster.brokers) == {2, 3}  # the refused set is not applied
    assert not cluster.ready and "coordinator node id" in cluster.status
    assert len(changes) == 2


def test_merged_ranges_are_ours_where_we_serve_and_upstreams_where_we_forward():
    local = {ApiKey.ApiVersions: (0, 4), ApiKey.JoinGroup: (0, 9), ApiKey.FindCoordinator: (0, 6)}
    upstream = {
        ApiKey.ApiVersions: (0, 3), ApiKey.JoinGroup: (0, 7), ApiKey.FindCoordinator: (0, 5),
        ApiKey.Produce: (3, 12), ApiKey.CreateTopics: (2, 7),
        ApiKey.Metadata: (0, 14),  # newer than the rewriter knows
        ApiKey.Fetch: (4, 17),  # v16+ would carry node endpoints to rewrite, so no streaming
        ApiKey.OffsetCommit: (2, 9),  # a group API we do not serve here
        ApiKey.ConsumerGroupHeartbeat: (0, 1),
        ApiKey.ShareFetch: (0, 1),  # carries addresses we do not rewrite
    }

    assert merge_api_versions(local, upstream) == {
        ApiKey.ApiVersions: (0, 4), ApiKey.JoinGroup: (0, 9), ApiKey.FindCoordinator: (0, 6),
        ApiKey.Produce: (3, 12), ApiKey.CreateTopics: (2, 7), ApiKey.Metadata: (0, 13),
        ApiKey.Fetch: (4, 15),
    }


@pytest.mark.parametrize(("level", "txn_offset_commit"), [(0, (0, 4)), (1, (0, 4)), (2, (0, 5))])
def test_txn_offset_commit_v5_is_offered_only_when_the_upstream_finalized_transaction_version_2(
        level, txn_offset_commit):
    # v5 is the KIP-890 flow (no AddOffsetsToTxn): a Java client takes it only on `transaction.version` >= 2
    features = Features(supported=(("transaction.version", 0, 2),),
                        finalized=(("transaction.version", level, level),) if level else (), epoch=7)
    merged = merge_api_versions({ApiKey.TxnOffsetCommit: (0, 5)}, {ApiKey.TxnOffsetCommit: (0, 5)}, features)
    assert merged[ApiKey.TxnOffsetCommit] == txn_offset_commit


def test_standalone_kgc_never_offers_txn_offset_commit_whatever_the_features():
    features = Features(finalized=(("transaction.version", 2, 2),), epoch=1)
    assert ApiKey.TxnOffsetCommit not in merge_api_versions({}, {ApiKey.TxnOffsetCommit: (0, 5)}, features)
