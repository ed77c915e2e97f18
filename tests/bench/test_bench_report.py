"""The comparison's Markdown table: every row has its header's columns."""

from __future__ import annotations

from coordinator.bench.compare import Comparison, Row
from coordinator.bench.report import table
from tests.support.markdown import table_cells


def _row(target: str, median: float, config: str = "") -> Row:
    return Row("heartbeat", "heartbeat 50 members: heartbeats/s", "/s", "higher", target, config, median, 3, "")


def test_workloads_at_their_defaults_give_no_config_column():
    lines = table([Comparison("heartbeat 50 members: heartbeats/s", _row("kgc", 30_000), _row("kafka", 40_000))],
                  "kgc", "kafka").splitlines()
    assert lines[0].startswith("| figure | kgc (median) | kafka (median) | kgc/kafka |")
    assert {table_cells(line) for line in lines} == {6}
    assert "| 30,000 /s | 40,000 /s | 0.75 | kgc worse |" in lines[2]


def test_a_config_gets_its_column_and_a_row_without_one_an_empty_cell():
    lines = table([Comparison("heartbeat 50 members: heartbeats/s", _row("kgc", 30_000, "processes=2"),
                              _row("kafka", 40_000)),
                   Comparison("heartbeat 200 members: heartbeats/s", _row("kgc", 20_000), _row("kafka", 40_000))],
                  "kgc", "kafka").splitlines()
    assert "| kgc config |" in lines[0]
    assert {table_cells(line) for line in lines} == {7}
    assert "| processes=2 | 30,000 /s |" in lines[2]
    assert "(higher is better) |  | 20,000 /s |" in lines[3]
