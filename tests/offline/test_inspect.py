"""`kgc inspect`: batches, records and headers of a data dir written through the real
store, the materialized state per group (offsets, last GroupMetadata, tombstones), the
same in JSON, and torn tails and corruption reported without a byte changed."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from coordinator import records
from coordinator.offline.inspect import add_inspect_parser, inspect_data_dir, render_text, to_json
from coordinator.partitioning import partition_for
from storage.api import LogRecord
from storage.file_store import FileLogStore, partition_dir
from storage.format import encode_batch
from storage.segment import segment_name
from tests.support.data_dir_writer import T0, write


def offset_value(offset: int, metadata: str = "", ts: int = T0) -> records.OffsetCommitValue:
    return records.OffsetCommitValue(offset, -1, metadata, ts)


def member(member_id: str, assignment: bytes) -> records.MemberMetadata:
    return records.MemberMetadata(member_id, None, f"client-{member_id}", "/127.0.0.1", 10_000, 6_000,
                                  b"subscription", assignment)


def group_metadata(generation: int, *members: records.MemberMetadata) -> records.GroupMetadataValue:
    return records.GroupMetadataValue("consumer", generation, "range" if members else None,
                                      members[0].member_id if members else None, T0, tuple(members))


async def write_known_groups(data_dir) -> None:
    await write(data_dir, [
        [records.new_offset_commit_record("g1", "t", 0, offset_value(10), member_id="m1", generation=1,
                                          client_id="client-m1", client_host="/127.0.0.1"),
         records.new_offset_commit_record("g1", "t", 1, offset_value(11))],
        [records.new_group_metadata_record("g1", group_metadata(1, member(member_id="m1", assignment=b"a")))],
        [records.new_offset_commit_record("g1", "t", 0, offset_value(42, "kept")),
         records.new_offset_commit_tombstone("g1", "t", 1)],
        [records.new_group_metadata_record("g1", group_metadata(
            2, member("m1", b"assignment-1"), member("m2", b"assignment-22")))],
        # A record type kgc does not know (9, removed from Kafka): the loader skips it, so inspect does too.
        [LogRecord(b"\x00\x09\x00\x02g1", b"\x00\x00", ())],
    ], "g1")
    await write(data_dir, [
        [records.new_offset_commit_record("g-gone", "t", 0, offset_value(5))],
        [records.new_group_metadata_record("g-gone", group_metadata(0))],
        # DeleteGroups: a tombstone per offset and for the group, in one batch.
        [records.new_offset_commit_tombstone("g-gone", "t", 0), records.new_group_metadata_tombstone("g-gone")],
    ], "g-gone")
    await write(data_dir, [
        [records.new_offset_commit_record("g-simple", "u", 3, offset_value(7))],
        [records.new_group_metadata_record("g-simple", group_metadata(1))],
        # The group is deleted without its offsets: the offsets stay, as Kafka's replay keeps them.
        [records.new_group_metadata_tombstone("g-simple")],
    ], "g-simple")


def run(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="kgc")
    add_inspect_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["inspect", *argv])
    out = io.StringIO()
    code = args.handler(args, out)
    return code, out.getvalue()


def active_segment(data_dir, group: str):
    return partition_dir(data_dir, partition_for(group)) / segment_name(0)


async def test_materialized_state_follows_the_records_in_offset_order(tmp_path):
    await write_known_groups(tmp_path)
    inspection = inspect_data_dir(tmp_path)
    assert sorted(inspection.groups) == ["g-simple", "g1"]
    g1 = inspection.groups["g1"]
    assert g1.partition == partition_for("g1")
    assert g1.offsets == {("t", 0): offset_value(42, "kept")}
    assert g1.metadata.generation == 2 and g1.metadata_offset == 5
    assert [m.member_id for m in g1.metadata.members] == ["m1", "m2"]
    simple = inspection.groups["g-simple"]
    assert simple.metadata is None and simple.offsets == {("u", 3): offset_value(7)}
    assert not inspection.corrupt


async def test_text_output_shows_batches_records_headers_and_group_state(tmp_path):
    await write_known_groups(tmp_path)
    code, text = run(str(tmp_path))
    assert code == 0
    lines = [line.strip() for line in text.splitlines()]
    assert f"__consumer_offsets-{partition_for('g1')}: end offset 7" in lines
    size = active_segment(tmp_path, "g1").stat().st_size
    assert f"00000000000000000000.log (active): {size} bytes, 5 batches, 7 records" in lines
    assert ("offset 0: OffsetCommitKey group='g1' topic='t' partition=0 -> OffsetCommitValue offset=10 "
            "leader_epoch=-1 metadata='' commit_timestamp_ms=1700000000000 expire_timestamp_ms=-1  "
            "[member_id=m1 generation=1 client_id=client-m1 client_host=/127.0.0.1]") in lines
    assert any(line.startswith("offset 4: OffsetCommitKey group='g1' topic='t' partition=1 -> tombstone")
               for line in lines)
    assert any(line.startswith("offset 6: ? key 0x000900026731 value 2 bytes") and "unknown record type" in line
               for line in lines)
    start = lines.index(f"'g1' (partition {partition_for('g1')})")
    assert lines[start + 1:start + 5] == [
        "GroupMetadata at offset 5: protocol_type='consumer' generation=2 protocol='range' leader='m1' "
        "current_state_timestamp_ms='2023-11-14T22:13:20.000Z'",
        "member member_id='m1' group_instance_id=None client_id='client-m1' client_host='/127.0.0.1' "
        "rebalance_timeout_ms=10000 session_timeout_ms=6000 subscription_bytes=12 assignment_bytes=12",
        "member member_id='m2' group_instance_id=None client_id='client-m2' client_host='/127.0.0.1' "
        "rebalance_timeout_ms=10000 session_timeout_ms=6000 subscription_bytes=12 assignment_bytes=13",
        "t-0: offset 42 leader_epoch -1 metadata 'kept' committed 2023-11-14T22:13:20.000Z",
    ]
    assert "'g-gone'" not in text.split("groups:")[1]
    start = lines.index(f"'g-simple' (partition {partition_for('g-simple')})")
    assert lines[start + 1:start + 3] == [
        "no GroupMetadata", "u-3: offset 7 leader_epoch -1 metadata '' committed 2023-11-14T22:13:20.000Z"]


async def test_json_output_holds_the_same_state_for_machines(tmp_path):
    await write_known_groups(tmp_path)
    code, text = run(str(tmp_path), "--json")
    assert code == 0
    doc = json.loads(text)
    assert doc["corrupt"] is False
    assert doc["groups"]["g-simple"] == {
        "partition": partition_for("g-simple"),
        "offsets": [{"topic": "u", "partition": 3, "offset": 7, "leader_epoch": -1, "metadata": "",
                     "commit_timestamp_ms": T0, "expire_timestamp_ms": -1, "origin": {"source": "committed"}}],
        "group_metadata": None,
    }
    g1 = doc["groups"]["g1"]["group_metadata"]
    assert (g1["offset"], g1["generation"], g1["protocol"], g1["leader"]) == (5, 2, "range", "m1")
    assert [(m["member_id"], m["assignment_bytes"]) for m in g1["members"]] == [("m1", 12), ("m2", 13)]
    (partition,) = [p for p in doc["partitions"] if p["partition"] == partition_for("g1")]
    (segment,) = partition["segments"]
    assert [(b["base_offset"], b["last_offset"]) for b in segment["batches"]] == [
        (0, 1), (2, 2), (3, 4), (5, 5), (6, 6)]
    first = segment["batches"][0]["records"][0]
    assert first["key"] == {"type": "OffsetCommitKey", "group": "g1", "topic": "t", "partition": 0}
    assert first["value"]["offset"] == 10
    assert first["headers"] == [["member_id", "m1"], ["generation", "1"], ["client_id", "client-m1"],
                                ["client_host", "/127.0.0.1"]]
    assert segment["batches"][3]["records"][0]["value"]["members"][1]["member_id"] == "m2"
    assert segment["batches"][1]["records"][0]["headers"][1] == ["generation", "1"]


async def test_adopted_offsets_say_where_they_came_from_until_a_commit_replaces_them(tmp_path):
    from coordinator.group.adopt import AdoptedOffset, adoption_records

    adopted = adoption_records("g-adopted", "consumer", (AdoptedOffset("t", 0, 5, -1, ""),
                                                         AdoptedOffset("t", 1, 6, -1, "")),
                               source="upstream", now_ms=T0)
    await write(tmp_path, [list(adopted), [records.new_offset_commit_record("g-adopted", "t", 1, offset_value(9))]],
                "g-adopted")
    code, text = run(str(tmp_path), "--json")
    offsets = json.loads(text)["groups"]["g-adopted"]["offsets"]
    assert [o["origin"] for o in offsets] == [
        {"source": "adopted", "adopted_from": "upstream", "adopted_at_ms": T0}, {"source": "committed"}]
    code, text = run(str(tmp_path))
    assert "t-0: offset 5" in text and "(adopted from upstream at " in text.split("t-0: offset 5")[1].split("\n")[0]
    assert "adopted" not in text.split("t-1: offset 9")[1].split("\n")[0]


async def test_group_filter_shows_only_that_groups_partition_records_and_state(tmp_path):
    await write_known_groups(tmp_path)
    code, text = run(str(tmp_path), "--group", "g-simple", "--json")
    assert code == 0
    doc = json.loads(text)
    assert [p["partition"] for p in doc["partitions"]] == [partition_for("g-simple")]
    assert list(doc["groups"]) == ["g-simple"]
    shown = [r["key"]["group"] for p in doc["partitions"] for s in p["segments"]
             for b in s["batches"] for r in b["records"]]
    assert shown == ["g-simple"] * 3

    code, _text = run(str(tmp_path), "--group", "g-simple", "--partition",
                      str((partition_for("g-simple") + 1) % 50))
    assert code == 2


async def test_a_torn_tail_is_reported_not_repaired_then_listed_as_evidence_after_recovery(tmp_path):
    await write_known_groups(tmp_path)
    segment = active_segment(tmp_path, "g1")
    torn = encode_batch(7, [LogRecord(b"\x00\x02\x00\x02g1", None)], T0)[:40]
    with open(segment, "ab") as f:
        f.write(torn)
    before = segment.read_bytes()

    inspection = inspect_data_dir(tmp_path, group="g1")
    (part,) = inspection.partitions
    damage = part.segments[-1].damage
    assert damage.torn_tail and damage.tail_bytes == 40 and "short batch" in damage.reason
    assert not inspection.corrupt
    assert inspection.groups["g1"].metadata.generation == 2      # the torn group tombstone is not state
    code, text = run(str(tmp_path), "--group", "g1")
    assert code == 0 and "torn tail: recovery will save it as .torn-N and truncate; 40 bytes" in text
    assert segment.read_bytes() == before

    store = FileLogStore(tmp_path)
    await store.open()          # recovery: saves the tail, truncates
    await store.close()
    (part,) = inspect_data_dir(tmp_path, group="g1").partitions
    assert part.segments[-1].damage is None
    (evidence,) = part.extra_files
    assert (evidence.name, evidence.kind, evidence.size_bytes) == (segment.name + ".torn-1", "torn tail", 40)
    assert evidence.scan.startswith("no whole batch, then short batch")


async def test_damage_before_a_sound_batch_is_corruption_and_exits_1(tmp_path):
    await write_known_groups(tmp_path)
    segment = active_segment(tmp_path, "g-simple")
    data = bytearray(segment.read_bytes())
    data[30] ^= 0xFF            # inside the first batch's CRC-covered bytes
    segment.write_bytes(bytes(data))

    inspection = inspect_data_dir(tmp_path, group="g-simple")
    damage = inspection.partitions[0].segments[0].damage
    assert not damage.torn_tail and "bad CRC" in damage.reason and "a sound batch follows" in damage.reason
    assert inspection.corrupt
    code, text = run(str(tmp_path))
    assert code == 1
    assert "CORRUPT: kgc refuses this partition" in text


async def test_a_known_record_type_that_does_not_decode_is_corruption(tmp_path):
    # Key type 1 (OffsetCommitKey) cut short: the loader would refuse the partition.
    await write(tmp_path, [[LogRecord(b"\x00\x01\x00\x05g", b"\x00\x03")]], "g1")
    inspection = inspect_data_dir(tmp_path, group="g1")
    (record,) = inspection.partitions[0].segments[0].batches[0].records
    assert record.key is None and "need 5 bytes" in record.error
    assert inspection.corrupt
    assert run(str(tmp_path), "--json")[0] == 1


def test_a_missing_data_dir_is_a_usage_error(tmp_path, capsys):
    assert run(str(tmp_path / "nowhere"))[0] == 2
    assert "no data dir" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--state-only", "--json"])
async def test_state_only_keeps_segments_and_groups_but_no_batches(tmp_path, flag):
    await write_known_groups(tmp_path)
    code, text = run(str(tmp_path), "--state-only", *([flag] if flag == "--json" else []))
    assert code == 0
    if flag == "--json":
        doc = json.loads(text)
        assert all("batches" not in s for p in doc["partitions"] for s in p["segments"])
        assert sorted(doc["groups"]) == ["g-simple", "g1"]
    else:
        assert "offset 0:" not in text and "batch " not in text
        assert "t-0: offset 42" in text


async def test_a_kip848_consumer_group_is_materialized_by_the_coordinators_replay(tmp_path):
    from tests.support.group_context import GroupTestContext

    ctx = GroupTestContext()
    ctx.set_topics(t=4)
    ctx.consumer_heartbeat(group_id="cg", member_id="a")
    ctx.consumer_heartbeat(group_id="cg", member_id="b")
    ctx.consumer_heartbeat(group_id="cg", member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}})
    await write(tmp_path, [ctx.written], "cg")
    inspection = inspect_data_dir(tmp_path, group="cg")
    live, shown = ctx.consumer_group("cg"), inspection.groups["cg"].consumer
    assert (shown.group_epoch, shown.assignment_epoch, shown.state, shown.members, shown.target) == \
        (live.group_epoch, live.assignment_epoch, "Reconciling", live.members, live.target)
    view = to_json(inspection, group="cg")["groups"]["cg"]["consumer_group"]
    tid = str(ctx.topics.by_name["t"].topic_id)
    by_member = {m["member_id"]: m for m in view["members"]}
    assert by_member["a"]["state"] == "UNREVOKED_PARTITIONS" and len(by_member["a"]["revoking"][tid]) == 2
    assert by_member["b"]["assigned"] == {}
    text = render_text(inspection, group="cg")
    assert "consumer group (KIP-848): group_epoch=2 assignment_epoch=2 state='Reconciling'" in text
    assert "ConsumerGroupCurrentMemberAssignmentKey group='cg' member_id='a' -> " \
           "ConsumerGroupCurrentMemberAssignmentValue member_epoch=1" in text


async def test_an_upgraded_group_shows_its_classic_members(tmp_path):
    import json

    from tests.support.group_context import GroupTestContext
    from tests.support.group_scenarios import classic_group

    ctx = GroupTestContext()
    ctx.set_topics(t=4)
    a, b = classic_group(ctx)
    ctx.consumer_heartbeat(member_id="c")
    await write(tmp_path, [ctx.written], "g")
    inspection = inspect_data_dir(tmp_path, group="g")
    assert inspection.groups["g"].consumer.members == ctx.consumer_group().members
    doc = to_json(inspection, group="g")
    by_member = {m["member_id"]: m for m in doc["groups"]["g"]["consumer_group"]["members"]}
    assert {m: v["protocol"] for m, v in by_member.items()} == {a: "classic", b: "classic", "c": "consumer"}
    text = json.dumps(doc)
    assert '"classic_member_metadata": {"session_timeout_ms": 10000' in text
