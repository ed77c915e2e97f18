"""Classic group states, the moves allowed between them, and how each state answers.

Adapted from Kafka's `ClassicGroupState`; the value of each state is the name Kafka
prints (DescribeGroups, ListGroups).

EMPTY — the group has no members, but may have committed offsets (a group that only
commits offsets, a "simple" group, lives here with no protocol type).
    action:  JoinGroup with member id "" creates a pending (v4+) or a new member.
             OffsetCommit with generation -1 is accepted; OffsetFetch answers.
             SyncGroup / Heartbeat: UNKNOWN_MEMBER_ID. DeleteGroups and the offsets
             expiry may delete the group.
    transition: first member joins → PREPARING_REBALANCE (with the initial delay);
             group deleted or all offsets expired → DEAD.

PREPARING_REBALANCE — waiting for every member to (re)join.
    action:  JoinGroup parks until the join phase completes.
             SyncGroup: REBALANCE_IN_PROGRESS. Heartbeat: REBALANCE_IN_PROGRESS (and the
             session is kept alive). OffsetCommit from the current generation is
             accepted (the generation moves only when the join phase completes) and
             counts as a heartbeat. LeaveGroup removes the member.
    transition: all members and no pending member have joined, or the join timer
             fires → COMPLETING_REBALANCE (generation + 1, protocol chosen by vote,
             leader kept or re-elected, JoinGroup answers sent, pending-sync timer armed);
             the join phase completes with no member left → EMPTY (generation + 1,
             an empty GroupMetadata written).

COMPLETING_REBALANCE — the leader computes the assignment.
    action:  SyncGroup parks; the leader's SyncGroup writes GroupMetadata and, once it is
             durable, answers every parked SyncGroup. A JoinGroup with unchanged metadata
             gets this generation's answer again. Heartbeat: NONE.
             OffsetCommit: REBALANCE_IN_PROGRESS.
    transition: leader's SyncGroup committed → STABLE; a member joins with new metadata,
             leaves or expires, or the pending-sync timer removes members that did not
             sync → PREPARING_REBALANCE (parked SyncGroups get REBALANCE_IN_PROGRESS).

STABLE — everyone has its assignment.
    action:  Heartbeat: NONE. SyncGroup answers the member's assignment. A follower's
             JoinGroup with unchanged metadata gets the current generation; a static
             member rejoining with a new member id replaces the old one without a
             rebalance when the chosen protocol stays the same. OffsetCommit from the
             current generation is accepted and counts as a heartbeat.
    transition: the leader rejoins, a member joins with new metadata, a new member
             joins, a member leaves or expires, or the pending-sync timer removes members
             → PREPARING_REBALANCE.

DEAD — the group is being removed (deleted, all offsets expired, partition unloaded).
    action:  every request: COORDINATOR_NOT_AVAILABLE (the client looks for the
             coordinator again); DescribeGroups/OffsetFetch treat it as unknown.
    transition: none.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalTransition(RuntimeError):
    """A move the state table forbids: a bug in the state machine, never a client error."""
