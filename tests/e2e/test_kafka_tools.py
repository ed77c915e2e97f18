"""Kafka's own `kafka-consumer-groups` (ConsumerGroupCommand: kafka-tools 4.4, and the tools of
the older lines the suite runs, which teams keep using against kgc) pointed at kgc in front of
Kafka: list, describe (offsets, members, state), reset-offsets, delete-offsets and delete act
on kgc's groups exactly as on Kafka's, and Kafka's own coordinator never hears of them."""

from __future__ import annotations

import datetime
import itertools
import re

import pytest
from confluent_kafka import Producer

from tests.support.admin import (
    UNKNOWN_AT_KAFKA,
    committed_offsets,
    create_topic,
    group_at_broker,
    new_name,
)
from tests.support.clients import JAVA_CONSUMER_PROTOCOL, Member, MemberSettings, wait_until
from tests.support.kafka_dist import KAFKA_OLD_VERSIONS, KAFKA_VERSION, run_tool

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTITIONS = 3
RECORDS = 6                 # per partition, timestamped T0, T0 + 1 s, ...
T0_MS = 1_700_000_000_000
TIMEOUT_S = 60
TOOLS = pytest.mark.parametrize("tools", [KAFKA_VERSION, *KAFKA_OLD_VERSIONS], ids=lambda v: f"tools-{v}")


def consumer_groups(kgc, *args: str, tools: str = KAFKA_VERSION) -> str:
    done = run_tool(GROUP_COMMAND, "--bootstrap-server", kgc.bootstrap, *args, version=tools)
    assert done.returncode == 0, f"kafka-consumer-groups {tools} {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def table(output: str) -> list[dict[str, str]]:
    """The tool's table as dicts by column header. 'COORDINATOR (ID)' is one column in the header
    and in its cells ('127.0.0.1:9092  (1)'). Kafka 3.9's reset-offsets printed its header and
    rows with no line break: the cells after the header's (upper case) are cut into rows."""
    lines = [line for line in output.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith(("GROUP ", "TOPIC ")))
    header = _cells(lines[start])
    columns = list(itertools.takewhile(str.isupper, header))
    if len(header) > len(columns):
        cells = header[len(columns):]
        rows = [cells[i:i + len(columns)] for i in range(0, len(cells), len(columns))]
    else:
        rows = [_cells(line) for line in lines[start + 1:]]
    return [dict(zip(columns, row, strict=False)) for row in rows]


def _cells(line: str) -> list[str]:
    return re.findall(r"\S+(?:\s+\(\S+\))?", line)


def produce_timestamped(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, value=b"%d" % i, partition=partition, timestamp=T0_MS + i * 1000)
    assert producer.flush(30) == 0


@pytest.fixture
def consumed_group(kgc, kafka):
    """A group whose Java member consumed everything and committed 2, 4 and 6 on the three
    partitions; the member is still in the group."""
    # Its records are stamped T0, years ago: under Kafka's default retention (7 days) the
    # broker's next retention check (every 5 minutes) would delete them all mid-test.
    topic, group = create_topic(kgc.bootstrap, PARTITIONS, configs={"retention.ms": "-1"}), new_name("tools")
    produce_timestamped(kgc.bootstrap, topic)
    member = Member("java", MemberSettings(kgc.bootstrap, group, topic, "tools-member",
                                           assignor="range")).start()
    try:
        wait_until(lambda: len(member.consumed) == PARTITIONS * RECORDS, TIMEOUT_S,
                   lambda: f"{len(member.consumed)} consumed", [member])
        member.call(lambda driver: driver.commit({0: 2, 1: 4, 2: RECORDS}))
        yield topic, group, member
    finally:
        if member.running:
            member.close()


@TOOLS
def test_list_and_describe_show_kgcs_group_with_offsets_lag_members_and_state(kgc, kafka, consumed_group, tools):
    topic, group, member = consumed_group
    listed = consumer_groups(kgc, "--list", tools=tools).split()
    assert listed.count(group) == 1

    offsets = {int(r["PARTITION"]): r for r in table(consumer_groups(kgc, "--describe", "--group", group, tools=tools))}
    assert {p: (r["TOPIC"], int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"]), r["CLIENT-ID"])
            for p, r in offsets.items()} == {0: (topic, 2, RECORDS, RECORDS - 2, "tools-member"),
                                            1: (topic, 4, RECORDS, RECORDS - 4, "tools-member"),
                                            2: (topic, RECORDS, RECORDS, 0, "tools-member")}

    [members] = table(consumer_groups(kgc, "--describe", "--group", group, "--members", tools=tools))
    assert (members["CLIENT-ID"], members["#PARTITIONS"]) == ("tools-member", str(PARTITIONS))

    [state] = table(consumer_groups(kgc, "--describe", "--group", group, "--state", tools=tools))
    assert (state["ASSIGNMENT-STRATEGY"], state["STATE"], state["#MEMBERS"]) == ("range", "Stable", "1")
    assert state["COORDINATOR (ID)"].startswith(kgc.bootstrap)

    assert group_at_broker(kafka.host, kafka.port, group) == UNKNOWN_AT_KAFKA


@TOOLS
def test_reset_offsets_to_earliest_datetime_shift_and_file_then_delete_offsets_and_the_group(
        kgc, kafka, consumed_group, tmp_path, tools):
    topic, group, member = consumed_group
    # A group with members is refused, as by Kafka ("consumer group ... is not inactive").
    refused = run_tool(GROUP_COMMAND, "--bootstrap-server", kgc.bootstrap, "--reset-offsets", "--group", group,
                       "--all-topics", "--to-earliest", "--execute", version=tools)
    assert "inactive" in refused.stdout + refused.stderr
    member.close()
    everything = {0: 2, 1: 4, 2: RECORDS}
    assert committed_offsets(kgc.bootstrap, group) == everything

    def reset(*how: str) -> dict[int, int]:
        rows = table(consumer_groups(kgc, "--reset-offsets", "--group", group, "--topic", topic, *how, "--execute",
                                     tools=tools))
        shown = {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in rows}
        assert committed_offsets(kgc.bootstrap, group) == shown
        return shown

    dry = consumer_groups(kgc, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", tools=tools)
    assert {int(r["NEW-OFFSET"]) for r in table(dry)} == {0}
    assert committed_offsets(kgc.bootstrap, group) == everything  # a dry run changes nothing

    assert reset("--to-earliest") == dict.fromkeys(range(PARTITIONS), 0)
    assert reset("--shift-by", "3") == dict.fromkeys(range(PARTITIONS), 3)
    # The first record at or after T0 + 2.5 s is the fourth (T0 + 3 s).
    assert reset("--to-datetime", _iso(T0_MS + 2500)) == dict.fromkeys(range(PARTITIONS), 3)
    plan = tmp_path / "offsets.csv"
    plan.write_text(f"{topic},0,1\n{topic},1,5\n{topic},2,0\n")
    rows = table(consumer_groups(kgc, "--reset-offsets", "--group", group, "--from-file", str(plan), "--execute",
                                 tools=tools))
    assert {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in rows} == {0: 1, 1: 5, 2: 0}
    assert committed_offsets(kgc.bootstrap, group) == {0: 1, 1: 5, 2: 0}

    deleted = consumer_groups(kgc, "--delete-offsets", "--group", group, "--topic", f"{topic}:1", tools=tools)
    assert "Request succeed" in deleted     # "succeeded" from Kafka 4.1's tools
    assert committed_offsets(kgc.bootstrap, group) == {0: 1, 2: 0}
    assert "was successful" in consumer_groups(kgc, "--delete", "--group", group, tools=tools)
    assert group not in consumer_groups(kgc, "--list", tools=tools).split()
    assert group_at_broker(kafka.host, kafka.port, group) == UNKNOWN_AT_KAFKA


def test_describe_state_of_a_consumer_protocol_group_shows_its_epochs(kgc):
    topic, group = create_topic(kgc.bootstrap, PARTITIONS), new_name("tools-848")
    member = Member(JAVA_CONSUMER_PROTOCOL, MemberSettings(kgc.bootstrap, group, topic, "kip848-member")).start()
    try:
        wait_until(lambda: member.assignment == frozenset(range(PARTITIONS)), TIMEOUT_S,
                   lambda: f"assigned {member.assignment}", [member])
        [state] = table(consumer_groups(kgc, "--describe", "--group", group, "--state"))
        assert (state["ASSIGNMENT-STRATEGY"], state["STATE"], state["#MEMBERS"]) == ("uniform", "Stable", "1")
        [described] = table(consumer_groups(kgc, "--describe", "--group", group, "--members", "--verbose"))
        assert described["CLIENT-ID"] == "kip848-member"
        assert described["CURRENT-ASSIGNMENT"] == f"{topic}:0,1,2" == described["TARGET-ASSIGNMENT"]
        assert int(described["CURRENT-EPOCH"]) >= 1 and described["TARGET-EPOCH"] == described["CURRENT-EPOCH"]
        listed = table(consumer_groups(kgc, "--list", "--type", "consumer"))
        assert {r["GROUP"]: r["TYPE"] for r in listed}.get(group) == "Consumer"
    finally:
        member.close()


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
