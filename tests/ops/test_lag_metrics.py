"""The lag metric families: per group and topic by default, per partition when asked, and
never more than MAX_LAG_SERIES series per family whatever the groups commit."""

from __future__ import annotations

import pytest

from coordinator import metrics
from coordinator.metrics import MAX_LAG_SERIES, LagRow
from tests.support.kgc_http import in_process


@pytest.fixture(autouse=True)
def no_lag_left_behind():
    yield
    metrics.consumer_lag([], per_partition=False)


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
