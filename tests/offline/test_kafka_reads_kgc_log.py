"""Kafka's own tool reads kgc's log: `kafka-dump-log --offsets-decoder` (Kafka 4.4's
`DumpLogSegments`, its `__consumer_offsets` decoder) over a segment kgc wrote for a KIP-848
group prints every record as Kafka's records, the target assignment's time among them
(KIP-1263's tagged field). The format is Kafka's, so any tool that reads
`__consumer_offsets` segments reads kgc's (DESIGN.md, "Storage")."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from coordinator.partitioning import partition_for
from storage.segment import segment_name
from tests.support.data_dir_writer import write
from tests.support.group_context import GroupTestContext
from tests.support.kafka_dist import run_tool

START_MS = 1_790_000_000_000
# One record as the tool prints it: `| offset: N ... key: {json} payload: {json}`
RECORD = re.compile(r"^\| offset: (\d+) .* key: (\{.*\}) payload: (\{.*\}|)$")


def _dump(path) -> list[tuple[dict, dict | None]]:
    done = run_tool("org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder", "--print-data-log",
                    "--files", str(path))
    assert done.returncode == 0, done.stderr
    printed = [RECORD.match(line) for line in done.stdout.splitlines() if line.startswith("| offset:")]
    assert all(printed), done.stdout
    return [(json.loads(m[2]), json.loads(m[3]) if m[3] else None) for m in printed if m is not None]


@pytest.mark.integration
def test_kafkas_dump_tool_decodes_a_consumer_group_kgc_wrote(tmp_path):
    ctx = GroupTestContext(start_ms=START_MS, consumer_assignment_interval_ms=1_000)
    ctx.set_topics(orders=4)
    ctx.consumer_heartbeat(member_id="a", subscribe=["orders"])
    ctx.sleep(1_500)
    ctx.consumer_heartbeat(member_id="b", subscribe=["orders"])
    asyncio.run(write(tmp_path, [ctx.written], "g"))

    partition = partition_for("g")
    dumped = _dump(tmp_path / f"__consumer_offsets-{partition}" / segment_name(0))

    assert len(dumped) == len(ctx.written)
    # Kafka's record types, in kgc's order: member (5), epoch (3), targets (7) and their
    # metadata (6), current assignments (8), for both joins.
    assert [int(key["type"]) for key, _ in dumped] == [5, 3, 7, 6, 8, 5, 3, 7, 7, 6, 8]
    stamps = [(value["data"]["assignmentEpoch"], value["data"]["assignmentTimestamp"])
              for key, value in dumped if key["type"] == "6" and value is not None]
    assert stamps == [(1, START_MS), (2, START_MS + 1_500)]
    assigned = {key["data"]["memberId"]: value["data"]["memberEpoch"] for key, value in dumped if key["type"] == "8"}
    assert assigned == {"a": 1, "b": 2}
