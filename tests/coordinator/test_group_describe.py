"""DescribeGroups, ListGroups and DeleteGroups (REFERENCE §2.3; 30 is not enforced)."""

import pytest

from coordinator.group.describe import normalized_filter
from tests.support.builders import subscription
from tests.support.group_context import GroupTestContext

NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP = 0, 69, 68


@pytest.mark.parametrize(("version", "error", "message"), [
    (5, NONE, None),
    (6, GROUP_ID_NOT_FOUND, "Group nope not found."),
])
def test_unknown_group_reads_as_dead_and_v6_reports_it(version, error, message):
    d = GroupTestContext().describe("nope", version=version)
    assert (d.error, d.error_message, d.state, d.protocol_type, d.members) == (error, message, "Dead", "", ())


def test_empty_group_id_is_looked_up_like_any_other():
    ctx = GroupTestContext()
    ctx.commit(group_id="")
    assert ctx.describe("").state == "Empty"


def test_stable_group_shows_protocol_and_member_data():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    d = ctx.describe()
    assert (d.state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in d.members] == [
        (a, "c0", "/127.0.0.1", subscription("t"), f"assign-{a}".encode()),
        (b, "c1", "/127.0.0.1", subscription("t"), f"assign-{b}".encode())]


def test_rebalancing_group_lists_members_without_their_data():
    ctx = GroupTestContext()
    a, _ = ctx.join_dynamic(client_id="a")
    ctx.finish_join_phase()
    d = ctx.describe()
    assert (d.state, d.protocol_data) == ("CompletingRebalance", "")
    assert [(m.member_id, m.member_metadata, m.member_assignment) for m in d.members] == [(a, b"", b"")]


def test_list_groups_filters_by_state_case_insensitively_and_by_type():
    ctx = GroupTestContext()
    ctx.stable_group(1, group_id="stable")
    ctx.commit(group_id="simple")
    listed = {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in ctx.shard.list_groups(set(), set())}
    assert listed == {"stable": ("consumer", "Stable", "classic"), "simple": ("", "Empty", "classic")}
    # the service normalizes a request's filters once (`normalized_filter`), not per partition
    assert [g.group_id for g in ctx.shard.list_groups(normalized_filter({"STABLE"}), set())] == ["stable"]
    assert [g.group_id for g in ctx.shard.list_groups(normalized_filter([" empty"]),
                                                      normalized_filter(["Classic"]))] == ["simple"]
    assert ctx.shard.list_groups(set(), {"consumer"}) == []


def test_delete_groups_per_group_results_and_one_atomic_batch():
    # given an empty group with offsets, a stable group, and no group "ghost"
    ctx = GroupTestContext()
    ctx.commit(group_id="idle", offsets=(("t", 0, 5, None), ("t", 1, 6, None)))
    ctx.stable_group(1, group_id="busy")
    before = len(ctx.written)
    # when all three are deleted
    result = ctx.delete_groups("idle", "busy", "ghost")
    # then only the empty one goes: its offsets and itself are tombstoned together
    assert result == [("idle", NONE), ("busy", NON_EMPTY_GROUP), ("ghost", GROUP_ID_NOT_FOUND)]
    tombstones = ctx.written[before:]
    assert [(type(r.key).__name__, r.value) for r in tombstones] == [
        ("OffsetCommitKey", None), ("OffsetCommitKey", None), ("GroupMetadataKey", None)]
    assert "idle" not in ctx.shard.groups
    assert ctx.fetch("idle").topics == ()


@pytest.mark.parametrize("rebalancing", [True, False])
def test_rebalancing_groups_cannot_be_deleted(rebalancing):
    ctx = GroupTestContext()
    ctx.join_dynamic()
    if not rebalancing:
        ctx.finish_join_phase()
    assert ctx.delete_groups("g") == [("g", NON_EMPTY_GROUP)]
