"""/metrics under a real client workload, /v1/groups, and the rebalance sampling rules."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.client import AIOKafkaClient

from coordinator.group.classic.state import GroupState
from coordinator.metrics import LOG_OBSERVER
from coordinator.service.group_stats import GroupSample, RebalanceTracker
from coordinator.settings import ServerConfig
from tests.support.aio_member import AioMember
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.kgc_http import get_json, in_process, scrape
from tests.support.waiting import wait_until

TOPIC = "t"
PARTS = 3
COMMITS = 5


@pytest.mark.integration
@pytest.mark.timeout(60)
async def test_a_group_workload_moves_the_request_group_and_log_metrics(tmp_path):
    baseline = in_process()
    config = ServerConfig(host="127.0.0.1", port=0, data_dir=str(tmp_path), http_port=0,
                          metrics_sample_interval_ms=50, group=TEST_GROUP_CONFIG)
    # A one-second initial delay keeps the group in PreparingRebalance long enough for the
    # sampler to see it, so the rebalance is timed as well as counted.
    async with running_kgc(config, initial_rebalance_delay_ms=1_000) as app:
        http = app.http.port
        before = await scrape(http)
        member = AioMember(f"127.0.0.1:{app.port}", "ops-metrics", TOPIC, PARTS, client_id="ops")
        await member.start()
        try:
            await wait_until(lambda: member.assignment is not None, what="the member's first assignment")
            for value in range(COMMITS):
                assert await member.commit(dict.fromkeys(range(PARTS), value)) == [0] * PARTS
            assert await member.fetch(list(range(PARTS))) == dict.fromkeys(range(PARTS), COMMITS - 1)
            after = await scrape(http)
            status, groups = await get_json(http, "/v1/groups")
            status_one, detail = await get_json(http, "/v1/groups/ops-metrics")
        finally:
            await member.close()

    def delta(name: str, **labels: str) -> float:
        return after.total(name, **labels) - before.total(name, **labels)

    assert delta("kgc_requests_total", api="OffsetCommit") == COMMITS
    assert delta("kgc_request_duration_seconds_count", api="OffsetCommit") == COMMITS
    assert delta("kgc_requests_total", api="JoinGroup") == 2              # MEMBER_ID_REQUIRED, then in
    assert delta("kgc_requests_total", api="SyncGroup") == 1
    assert delta("kgc_response_errors_total", api="JoinGroup", error="MEMBER_ID_REQUIRED") == 1
    assert delta("kgc_response_errors_total", api="OffsetCommit", error="NONE") == COMMITS * PARTS
    assert delta("kgc_offsets_committed_total") == COMMITS * PARTS
    assert delta("kgc_connections_accepted_total") >= 1 and after.get("kgc_connections") >= 1

    assert after.get("kgc_groups", state="Stable") == 1 and after.get("kgc_group_members") == 1
    assert after.get("kgc_partitions", state="active") == 50
    assert delta("kgc_group_rebalances_total") == 1
    assert delta("kgc_group_rebalance_duration_seconds_count") == 1
    assert 1.0 <= delta("kgc_group_rebalance_duration_seconds_sum") < 10

    assert after.total("kgc_partition_load_duration_seconds_count") - baseline.total(
        "kgc_partition_load_duration_seconds_count") == 50
    # Each commit is one batch, and so is the leader's group metadata.
    assert delta("kgc_log_append_duration_seconds_count") >= COMMITS + 1
    assert delta("kgc_log_fsync_duration_seconds_count") >= 1                          # fsync=always
    assert delta("kgc_log_group_commit_batches_sum") == delta("kgc_log_append_duration_seconds_count")
    assert delta("kgc_log_group_commit_bytes_sum") > 0

    assert status == 200 and [g["group_id"] for g in groups["groups"]] == ["ops-metrics"]
    assert groups["groups"][0]["state"] == "Stable" and groups["unavailable_partitions"] == []
    assert status_one == 200 and detail["generation"] == 1 and detail["protocol"] == "range"
    [only] = detail["members"]
    assert only["leader"] and only["client_id"] == "ops" and only["assignment"] == {TOPIC: [0, 1, 2]}
    assert {p: o["offset"] for p, o in detail["offsets"][TOPIC].items()} == {"0": 4, "1": 4, "2": 4}


@pytest.mark.integration
@pytest.mark.timeout(30)
async def test_an_unknown_group_is_404_and_its_partition_is_named():
    config = ServerConfig(host="127.0.0.1", port=0, http_port=0, group=TEST_GROUP_CONFIG)
    async with running_kgc(config) as app:
        status, body = await get_json(app.http.port, "/v1/groups/polygenelubricants")
    assert status == 404 and body["partition"] == 0


@pytest.mark.integration
@pytest.mark.timeout(60)
async def test_forwarding_through_the_gateway_moves_the_upstream_metrics(tansu):
    config = ServerConfig(host="127.0.0.1", port=0, http_port=0, upstream=(tansu.address,),
                          broker_ports=((tansu.node_id, free_port()),), group=TEST_GROUP_CONFIG)
    async with running_kgc(config) as app:
        await asyncio.wait_for(app.cluster.wait_reachable(), 10)
        before = await scrape(app.http.port)
        client = AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{app.port}", client_id="ops-upstream")
        await client.bootstrap()        # Metadata goes upstream and comes back rewritten
        await client.close()
        after = await scrape(app.http.port)
        status, ready = await get_json(app.http.port, "/readyz")

    def delta(name: str, **labels: str) -> float:
        return after.total(name, **labels) - before.total(name, **labels)

    assert delta("kgc_upstream_request_duration_seconds_count", api="Metadata") >= 1
    assert delta("kgc_upstream_bytes_total", direction="sent") > 0
    assert delta("kgc_upstream_bytes_total", direction="received") > 0
    assert after.get("kgc_upstream_reachable") == 1 and after.get("kgc_upstream_brokers") == 1
    assert status == 200 and "reachable" in ready["upstream"]


def sample(group: str, state: GroupState, generation: int, since_ms: int) -> GroupSample:
    return GroupSample(group, state, generation, since_ms, members=1)


def test_the_log_histograms_count_each_value_in_the_buckets_prometheus_reads():
    """The log's histograms are counted by hand (one append each): `le` buckets are
    cumulative, a value on a bound counts in it, and the bounds read as prometheus-client
    writes them."""
    before = in_process()
    LOG_OBSERVER.group_committed(3, 1024, 0.001, None)      # 3 on no bound, 1024 and 1 ms on one
    LOG_OBSERVER.group_committed(2000, 20_000_000, 40.0, 0.0005)
    LOG_OBSERVER.durable(0.0003)
    after = in_process()

    def delta(name: str, **labels: str) -> float:
        return after.total(name, **labels) - before.total(name, **labels)

    assert delta("kgc_log_group_commit_batches_bucket", le="2.0") == 0
    assert delta("kgc_log_group_commit_batches_bucket", le="4.0") == 1
    assert delta("kgc_log_group_commit_batches_bucket", le="1024.0") == 1
    assert delta("kgc_log_group_commit_batches_bucket", le="+Inf") == 2
    assert delta("kgc_log_group_commit_batches_count") == 2 and delta("kgc_log_group_commit_batches_sum") == 2003
    assert delta("kgc_log_group_commit_bytes_bucket", le="1024.0") == 1
    assert delta("kgc_log_group_commit_bytes_bucket", le="1.6777216e+07") == 1
    assert delta("kgc_log_group_commit_bytes_bucket", le="+Inf") == 2
    assert delta("kgc_log_write_duration_seconds_bucket", le="0.001") == 1
    assert delta("kgc_log_write_duration_seconds_bucket", le="30.0") == 1
    assert delta("kgc_log_write_duration_seconds_count") == 2
    assert delta("kgc_log_fsync_duration_seconds_bucket", le="0.0005") == 1
    assert delta("kgc_log_fsync_duration_seconds_count") == 1
    assert delta("kgc_log_append_duration_seconds_bucket", le="0.0005") == 1
    assert delta("kgc_log_append_duration_seconds_sum") == pytest.approx(0.0003)


def test_groups_loaded_before_the_first_sample_count_no_past_rebalances():
    tracker = RebalanceTracker()
    assert tracker.observe(7, [sample("g", GroupState.STABLE, 12, 0)]) == (0, [])
    assert tracker.observe(7, [sample("g", GroupState.STABLE, 13, 5_000)]) == (1, [])


def test_a_rebalance_seen_preparing_is_timed_from_preparing_to_stable():
    tracker = RebalanceTracker()
    tracker.observe(0, [])
    assert tracker.observe(0, [sample("g", GroupState.PREPARING_REBALANCE, 0, 1_000)]) == (0, [])
    assert tracker.observe(0, [sample("g", GroupState.COMPLETING_REBALANCE, 1, 3_000)]) == (1, [])
    assert tracker.observe(0, [sample("g", GroupState.STABLE, 1, 3_500)]) == (0, [2.5])


def test_a_rebalance_missed_between_samples_is_counted_not_timed():
    tracker = RebalanceTracker()
    tracker.observe(0, [sample("g", GroupState.STABLE, 3, 0)])
    assert tracker.observe(0, [sample("g", GroupState.STABLE, 5, 9_000)]) == (2, [])
    # Preparing again in a newer generation: the earlier start is not reused.
    tracker.observe(0, [sample("g", GroupState.PREPARING_REBALANCE, 5, 10_000)])
    tracker.observe(0, [sample("g", GroupState.PREPARING_REBALANCE, 6, 20_000)])
    assert tracker.observe(0, [sample("g", GroupState.STABLE, 7, 21_000)]) == (1, [1.0])


def test_a_group_deleted_and_created_again_counts_from_zero():
    tracker = RebalanceTracker()
    tracker.observe(0, [sample("g", GroupState.STABLE, 9, 0)])
    assert tracker.observe(0, []) == (0, [])
    assert tracker.observe(0, [sample("g", GroupState.STABLE, 1, 1_000)]) == (1, [])
    assert tracker.observe(0, [sample("g", GroupState.STABLE, 0, 2_000)]) == (0, [])


def test_kip848_epochs_are_counted_and_each_timed_once_it_settles():
    from coordinator.service.group_stats import ConsumerGroupSample, EpochTracker

    def cg(epoch: int, since: int, stable: int | None, group: str = "g") -> ConsumerGroupSample:
        return ConsumerGroupSample(group, "Stable" if stable is not None else "Reconciling", epoch, 2, since, stable)

    tracker = EpochTracker()
    # Loaded groups are the baseline: nothing counted, a settled epoch not timed.
    assert tracker.observe(0, [cg(4, 0, 10)]) == (0, [])
    assert tracker.observe(0, [cg(5, 1_000, None)]) == (1, [])
    assert tracker.observe(0, [cg(5, 1_000, 1_300)]) == (0, [0.3])
    assert tracker.observe(0, [cg(5, 1_000, 1_300)]) == (0, [])        # timed once
    # Two epochs between samples: both counted; only the one that settled is timed.
    assert tracker.observe(0, [cg(7, 5_000, 5_200)]) == (2, [0.2])
    # A group created after the baseline counts from 0.
    assert tracker.observe(0, [cg(7, 5_000, 5_200), cg(1, 6_000, 6_050, "new")]) == (1, [0.05])
