"""The lag metric families: per group and topic by default, per partition when asked, and
never more than MAX_LAG_SERIES series per family whatever the groups commit."""

from __future__ import annotations

import time

import pytest

from coordinator import metrics
from coordinator.metrics import MAX_LAG_SERIES, LagRow
from tests.support.kgc_http import in_process


@pytest.fixture(autouse=True)
def no_lag_left_behind():
    yield
    metrics.consumer_lag([], per_partition=False)
    metrics._LAG.refreshed_s = None


def test_lag_sums_partitions_per_group_and_topic_and_an_unknown_one_leaves_the_sum_out():
    # A sum over the partitions known would read as the lag; with one unknown it is not.
    metrics.consumer_lag([LagRow("g", "t", 0, 3), LagRow("g", "t", 1, 4), LagRow("g", "t", 2, None),
                          LagRow("g", "u", 0, 0), LagRow("g", "u", 1, 5)], per_partition=False)
    samples = in_process()
    assert ("kgc_consumer_lag", frozenset({("group", "g"), ("topic", "t")})) not in samples.values
    assert samples.get("kgc_consumer_lag_unknown_partitions", group="g", topic="t") == 1
    assert samples.get("kgc_consumer_lag", group="g", topic="u") == 5
    assert samples.get("kgc_consumer_lag_unknown_partitions", group="g", topic="u") == 0
    assert "kgc_consumer_lag_partition" not in samples.names()


def test_per_partition_series_are_opt_in_and_the_series_are_bounded():
    rows = [LagRow(f"g{i}", "t", 0, i) for i in range(MAX_LAG_SERIES + 5)]
    metrics.consumer_lag(rows, per_partition=True)
    samples = in_process()
    assert sum(1 for name, _ in samples.values if name == "kgc_consumer_lag") == MAX_LAG_SERIES
    assert sum(1 for name, _ in samples.values if name == "kgc_consumer_lag_partition") == MAX_LAG_SERIES
    assert samples.get("kgc_consumer_lag_series_dropped") == 10


def test_the_refresh_timestamp_appears_with_the_first_complete_refresh_and_a_failure_keeps_it():
    # Before any refresh reached the upstream (and always standalone) there is no sample: a
    # 0 would read as decades of staleness.
    assert "kgc_log_ends_refreshed_timestamp_seconds" not in in_process().names()
    failures = in_process().get("kgc_log_end_refresh_failures_total")
    before = time.time()
    metrics.log_ends_refreshed(True)
    stamped = in_process().get("kgc_log_ends_refreshed_timestamp_seconds")
    assert before <= stamped <= time.time()
    metrics.log_ends_refreshed(False)
    samples = in_process()
    assert samples.get("kgc_log_ends_refreshed_timestamp_seconds") == stamped
    assert samples.get("kgc_log_end_refresh_failures_total") == failures + 1
