"""DescribeGroups (API 15) and ListGroups (API 16): reads of the live groups."""

from __future__ import annotations

from coordinator.group.classic.group import ClassicGroup
from coordinator.group.classic.state import GroupState
from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.views import DescribedMember, GroupDescription, GroupListing
from protocol.errors import ErrorCode


def describe_group(groups: dict[str, ClassicGroup], api_version: int, group_id: str) -> GroupDescription:
    group = groups.get(group_id)
    if group is None:
        # v6+ (KIP-1043) reports unknown groups; before, they read as Dead with no error.
        if api_version >= 6:
            return GroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.",
                                    GroupState.DEAD.value, "", "", ())
        return GroupDescription(group_id, ErrorCode.NONE, None, GroupState.DEAD.value, "", "", ())
    stable = group.is_in(GroupState.STABLE)
    members = tuple(
        DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.metadata(group.protocol_name) if stable else b"",
                        m.assignment if stable else b"")
        for m in group.members.values())
    # The selected protocol and member data are shown only once the group is Stable.
    return GroupDescription(group_id, ErrorCode.NONE, None, group.state.value, group.protocol_type or "",
                            (group.protocol_name or "") if stable else "", members)


def normalized_filter(values) -> frozenset[str]:
    """A ListGroups filter as the listings compare it (Kafka matches states and types
    case-insensitively): made once per request, so each partition's listing is linear in
    its groups whatever the filter's size."""
    return frozenset(v.strip().lower() for v in values or ())


def list_groups(groups: dict[str, ClassicGroup], states: frozenset[str] | set[str],
                types: frozenset[str] | set[str]) -> list[GroupListing]:
    """`states` and `types` come from `normalized_filter`."""
    if types and "classic" not in types:
        return []
    return [GroupListing(g.group_id, g.protocol_type or "", g.state.value)
            for g in groups.values()
            if not states or g.state.value.lower() in states]


def list_consumer_groups(groups: dict[str, ConsumerGroup], states: frozenset[str] | set[str],
                         types: frozenset[str] | set[str]) -> list[GroupListing]:
    """KIP-848 groups list with protocol type "consumer" and group type "consumer"."""
    if types and "consumer" not in types:
        return []
    return [GroupListing(g.group_id, "consumer", g.state, "consumer")
            for g in groups.values() if not states or g.state.lower() in states]
