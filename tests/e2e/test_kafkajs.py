"""kafkajs (Node) consumers through kgc: the same story as the Python libraries tell in
test_consumer_groups.py, driven by tests/e2e/js/group.mjs.

kafkajs comes from the npm registry: the `node` fixture (tests/support/kafkajs.py) runs `npm ci`
in tests/e2e/js when it is missing, and the test is skipped, saying why, when Node, npm or
the package is unavailable.
"""

from __future__ import annotations

import json
import logging
import subprocess

import pytest

from tests.support.admin import (
    UNKNOWN_AT_KAFKA,
    committed_offsets,
    create_topic,
    describe_group,
    group_at_broker,
    new_name,
    sequences_by_partition,
)
from tests.support.clients import Consumed
from tests.support.kafkajs import JS_DIR

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 6
FIRST, SECOND, RESUME = 40, 30, 10
RECOVERY_BOUND_MS = 5_000


def test_kafkajs_consumers_share_partitions_rebalance_on_leave_and_a_new_member_resumes(node, kgc, kafka):
    topic = create_topic(kgc.bootstrap, PARTITIONS)
    group = new_name("kafkajs")
    run = subprocess.run([node, "group.mjs", kgc.bootstrap, topic, group, str(PARTITIONS),
                          str(FIRST), str(SECOND), str(RESUME)],
                         cwd=JS_DIR, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])

    for phase in ("formed", "afterLeave"):
        owned = sorted(p for parts in report[phase].values() for p in parts)
        assert owned == list(range(PARTITIONS)), report[phase]
        assert all(report[phase].values()), report[phase]
    assert len(report["formed"]) == 3 and len(report["afterLeave"]) == 2
    log.info("kafkajs: remaining members own every partition %d ms after a clean leave", report["recoveryMs"])
    assert report["recoveryMs"] < RECOVERY_BOUND_MS

    consumed = [Consumed(r["partition"], r["offset"], r["value"].encode()) for r in report["consumed"]]
    total = FIRST + SECOND + RESUME
    by_partition = sequences_by_partition(consumed)
    assert {p: sorted(s) for p, s in by_partition.items()} == {p: list(range(total)) for p in range(PARTITIONS)}
    resumed = [r for r in report["consumed"] if r["member"] == "kafkajs-resumer"]
    assert {p: min(r["offset"] for r in resumed if r["partition"] == p) for p in range(PARTITIONS)} == \
        {p: FIRST + SECOND for p in range(PARTITIONS)}

    assert committed_offsets(kgc.bootstrap, group) == {p: total for p in range(PARTITIONS)}
    assert describe_group(kgc.bootstrap, group)["group_state"] == "Empty"
    assert group_at_broker(kafka.host, kafka.port, group) == UNKNOWN_AT_KAFKA
