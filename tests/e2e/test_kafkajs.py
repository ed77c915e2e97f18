"""kafkajs (Node) consumers through kgc: the same story as the Python libraries tell in
test_consumer_groups.py, driven by tests/e2e/js/group.mjs, through one kgc and through three
instances over one replicated store; and kafkajs's own auto-commit (tests/e2e/js/autocommit.mjs).

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
    offsets_once_owned,
    produce_sequenced,
    sequences_by_partition,
)
from tests.support.clients import Consumed, wait_until
from tests.support.kafkajs import JS_DIR, run_group_story
from tests.support.kgc_instances import instances, owner_of, serving_broker, shared_by

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 6
FIRST, SECOND, RESUME = 40, 30, 10
RECOVERY_BOUND_MS = 5_000


def test_kafkajs_consumers_share_partitions_rebalance_on_leave_and_a_new_member_resumes(node, kgc, kafka):
    topic = create_topic(kgc.bootstrap, PARTITIONS)
    group = new_name("kafkajs")
    report = run_group_story(node, kgc.bootstrap, topic, group, PARTITIONS, FIRST, SECOND, RESUME)

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


@pytest.mark.slow
def test_kafkajs_through_three_instances_reaches_a_coordinator_it_did_not_bootstrap_from(node, kafka, tmp_path):
    # kafkajs looks the node a FindCoordinator names up among the brokers Metadata listed:
    # the group's owner here is neither the instance it knows nor the one it reaches the
    # upstream broker through, so only a Metadata that lists every instance gets it there.
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    with instances(kafka, tmp_path, new_name("kgc-state")) as live:
        wait_until(lambda: shared_by(live), 60, lambda: [i.ownership()["owned"] for i in live])
        known = live[0]
        elsewhere = {known, serving_broker(live, kafka.nodes[0].node_id)}
        prefix = new_name("kafkajs-ha")
        group = next(g for g in (f"{prefix}-{n}" for n in range(1000)) if owner_of(live, g) not in elsewhere)
        report = run_group_story(node, known.address, topic, group, PARTITIONS, FIRST, SECOND, RESUME)
        assert len(report["formed"]) == 3 and len(report["afterLeave"]) == 2
        assert offsets_once_owned(known.address, group) == dict.fromkeys(range(PARTITIONS), FIRST + SECOND + RESUME)


def auto_committing(node: str, bootstrap: str, topic: str, group: str, count: int, committed: int) -> list[dict]:
    """autocommit.mjs reads `count` records; while it still runs, kgc must come to hold
    `committed` for every partition, from kafkajs's own commits. What it read."""
    run = subprocess.Popen([node, "autocommit.mjs", bootstrap, topic, group, str(count)], cwd=JS_DIR,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = run.stdout.readline()     # its own time limit bounds this
        assert line, run.communicate(timeout=10)[1][-3000:]
        wait_until(lambda: committed_offsets(bootstrap, group) == dict.fromkeys(range(PARTITIONS), committed), 30,
                   lambda: str(committed_offsets(bootstrap, group)))
        run.stdin.close()
        assert run.wait(30) == 0, run.stderr.read()[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    return json.loads(line)["consumed"]


def test_kafkajs_auto_commits_by_itself_and_a_successor_resumes_there(node, kgc):
    topic, group = create_topic(kgc.bootstrap, PARTITIONS), new_name("kafkajs-auto")
    produce_sequenced(kgc.bootstrap, topic, PARTITIONS, FIRST)
    first = auto_committing(node, kgc.bootstrap, topic, group, PARTITIONS * FIRST, FIRST)
    produce_sequenced(kgc.bootstrap, topic, PARTITIONS, SECOND, first_sequence=FIRST)
    second = auto_committing(node, kgc.bootstrap, topic, group, PARTITIONS * SECOND, FIRST + SECOND)
    assert sorted(r["offset"] for r in first) == sorted(list(range(FIRST)) * PARTITIONS)
    assert sorted(r["offset"] for r in second) == sorted(list(range(FIRST, FIRST + SECOND)) * PARTITIONS)
