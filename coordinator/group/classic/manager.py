"""Classic group membership (the classic part of Kafka's GroupMetadataManager): the
rebalance machinery shared by JoinGroup, SyncGroup, LeaveGroup and the timers.

Classic membership is soft state: these methods change the live `ClassicGroup` directly
and return only GroupMetadata *snapshot* records (`Result(replay=False)`), as Kafka does.
Answers to parked JoinGroup/SyncGroup requests are collected in an outbox while a
handler or timer runs and handed out as `Reply`s by `finish`.

Timers (keys from `coordinator.group.timer`):
- `heartbeat_key(g, m)`: the member's session (or the new-member join timeout, or the
  pending-member timeout after MEMBER_ID_REQUIRED); on expiry the member is removed
  unless it is parked in a join or sync (a *new* member is removed even then).
- `join-<g>`: the initial delay (extended while members keep arriving, up to the group's
  rebalance timeout) or the join phase deadline (the group's rebalance timeout).
- `sync-<g>`: after the join phase, members that have not sent SyncGroup within the
  rebalance timeout are removed and a new rebalance starts.

Every timer op looks its group up again by id: the group may have been deleted,
reloaded or unloaded since the timer was armed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from coordinator.common.result import EMPTY_RESULT, Reply, Result
from coordinator.common.timer import Timer
from coordinator.group.classic.group import ClassicGroup, ClassicGroupMember, discard_member_id
from coordinator.group.classic.state import GroupState
from coordinator.group.config import GroupConfig
from coordinator.group.context import RequestContext
from coordinator.group.timer import heartbeat_key, join_key, sync_key
from coordinator.records import (
    GroupMetadataValue,
    MemberMetadata,
    new_group_metadata_record,
)
from protocol.answers.classic import JoinAnswer, SyncAnswer, join_response, sync_response
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

def group_metadata_value(group: ClassicGroup, assignment: dict[str, bytes]) -> GroupMetadataValue:
    members = []
    for m in group.members.values():
        if group.protocol_name is None:
            raise ValueError(f"group {group.group_id} has members but no protocol")
        members.append(MemberMetadata(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.session_timeout_ms, m.metadata(group.protocol_name), assignment[m.member_id]))
    return GroupMetadataValue(group.protocol_type or "", group.generation, group.protocol_name,
                              group.leader_id, group.current_state_timestamp_ms, tuple(members))


class HeartbeatExpiry:
    """A member's session-timeout op and the key it is scheduled under.

    A member keeps its own (`ClassicGroupMember.session_timer`), so the reschedule every
    heartbeat makes builds neither a key nor an op; slotted, because every member holds
    one (docs/benchmarks/notes.md, "Memory per member")."""

    __slots__ = ("membership", "key")

    def __init__(self, membership: Membership, group_id: str, member_id: str):
        self.membership = membership
        self.key = heartbeat_key(group_id, member_id)

    def __call__(self) -> Result:
        _, group_id, member_id = self.key
        return self.membership.finish(self.membership.expire_heartbeat(group_id, member_id))


class Membership:
    def __init__(self, groups: dict[str, ClassicGroup], config: GroupConfig, timer: Timer,
                 clock: Callable[[], int], new_member_id: Callable[[str], str]):
        self.groups = groups
        self.config = config
        self.timer = timer
        self.clock = clock
        self.new_member_id = new_member_id
        self._outbox: list[Reply] = []

    # ------------------------------------------------------------ results and replies

    def finish(self, result: Result = EMPTY_RESULT, response: object = None) -> Result:
        """Attach the replies collected so far; membership records are snapshots, never replayed."""
        replies = tuple(self._outbox)
        self._outbox.clear()
        if not replies and response is None and result is EMPTY_RESULT:
            return EMPTY_RESULT
        return dataclasses.replace(
            result, response=response if response is not None else result.response,
            replies=result.replies + replies, replay=False)

    def answer_join(self, group: ClassicGroup, member: ClassicGroupMember, answer: JoinAnswer) -> bool:
        parked = group.take_join(member)
        if parked is None:
            return False
        self._outbox.append(Reply(parked.handle, join_response(parked.api_version, answer)))
        return True

    def answer_sync(self, group: ClassicGroup, member: ClassicGroupMember, answer: SyncAnswer) -> bool:
        parked = group.take_sync(member)
        if parked is None:
            return False
        self._outbox.append(Reply(parked.handle, sync_response(parked.api_version, answer)))
        return True

    def take_outbox(self) -> list[Reply]:
        """The replies an interrupted handler collected and never handed out."""
        replies = list(self._outbox)
        self._outbox.clear()
        return replies

    def answer_superseded(self, handle: object, response: object) -> None:
        """Answer a parked request that a newer one from the same member replaced.

        Kafka drops the old future (its connection is gone in practice); we answer it so
        no waiter is left behind in the runtime.
        """
        self._outbox.append(Reply(handle, response))

    def snapshot_record(self, group: ClassicGroup, assignment: dict[str, bytes],
                        ctx: RequestContext | None = None, member_id: str = "") -> Result:
        value = group_metadata_value(group, assignment)
        return Result(records=(new_group_metadata_record(
            group.group_id, value, member_id=member_id, client_id=ctx.client_id if ctx else "",
            client_host=ctx.client_host if ctx else ""),), replay=False)

    # ------------------------------------------------------------ timers

    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember,
                             timeout_ms: int | None = None) -> None:
        op = member.session_timer
        if op is None:
            op = member.session_timer = HeartbeatExpiry(self, group.group_id, member.member_id)
        self.timer.schedule(op.key, member.session_timeout_ms if timeout_ms is None else timeout_ms, op)

    def schedule_pending_member_expiry(self, group: ClassicGroup, member_id: str, session_timeout_ms: int) -> None:
        # A pending member has no member object yet; its id's timer is taken over by the
        # member's own op (same key) once it rejoins.
        op = HeartbeatExpiry(self, group.group_id, member_id)
        self.timer.schedule(op.key, session_timeout_ms, op)

    def expire_heartbeat(self, group_id: str, member_id: str) -> Result:
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            log.debug("[group=%s] heartbeat expiry of %s after the group is gone", group_id, member_id)
            return EMPTY_RESULT
        if group.is_pending_member(member_id):
            log.info("[group=%s] pending member %s removed after its session timeout", group_id, member_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                return self.complete_join(group)
            return EMPTY_RESULT
        member = group.members.get(member_id)
        if member is None:
            log.debug("[group=%s] member %s already removed", group_id, member_id)
            return EMPTY_RESULT
        if member.has_satisfied_heartbeat():
            return EMPTY_RESULT
        log.info("[group=%s] member %s failed its session, removing it", group_id, member_id)
        return self.remove_member_and_update_group(group, member, "session expired")

    def schedule_pending_sync(self, group: ClassicGroup) -> None:
        group_id, generation = group.group_id, group.generation
        self.timer.schedule(sync_key(group_id), group.rebalance_timeout_ms(),
                            lambda: self.finish(self.expire_pending_sync(group_id, generation)))

    def expire_pending_sync(self, group_id: str, generation: int) -> Result:
        group = self.groups.get(group_id)
        if group is None or group.generation != generation:
            log.debug("[group=%s] stale pending-sync expiry for generation %s", group_id, generation)
            return EMPTY_RESULT
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or group.has_received_sync_from_all_members():
            return EMPTY_RESULT
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            group.remove(member_id)
            self.timer.cancel(heartbeat_key(group_id, member_id))
        log.info("[group=%s] removed members that did not sync in time: %s", group_id, missing)
        return self.prepare_rebalance(group, f"pending sync expired for {missing}")

    def remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        discard_member_id(group.pending_sync_members, member_id)
        if group.is_in(GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE) or group.has_received_sync_from_all_members():
            self.timer.cancel(sync_key(group.group_id))

    # ------------------------------------------------------------ join phase

    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> Result:
        if group.can_rebalance():
            return self.prepare_rebalance(group, reason)
        return self.maybe_complete_join_phase(group)

    def maybe_complete_join_phase(self, group: ClassicGroup) -> Result:
        # The initial rebalance completes only by its delay timer.
        if (group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is not GroupState.EMPTY
                and group.has_all_members_joined()):
            return self.complete_join(group)
        return EMPTY_RESULT

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> Result:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_with_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        self.timer.cancel(sync_key(group.group_id))
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            delay_ms = self.config.initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
            self._schedule_initial_delay(group.group_id, delay_ms, remaining_ms)
        old_state = group.state
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock())
        log.info("[group=%s] preparing to rebalance from %s, generation %d (reason: %s)",
                 group.group_id, old_state.value, group.generation, reason)
        if initial:
            return EMPTY_RESULT
        if group.has_all_members_joined():
            return self.complete_join(group)
        self._schedule_join_deadline(group)
        return EMPTY_RESULT

    def _schedule_join_deadline(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self.timer.schedule(join_key(group_id), group.rebalance_timeout_ms(),
                            lambda: self.finish(self._complete_join_by_id(group_id)))

    def _schedule_initial_delay(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        self.timer.schedule(join_key(group_id), delay_ms,
                            lambda: self.finish(self._initial_delay_expired(group_id, delay_ms, remaining_ms)))

    def _initial_delay_expired(self, group_id: str, delay_ms: int, remaining_ms: int) -> Result:
        group = self.groups.get(group_id)
        if group is None:
            return EMPTY_RESULT
        if group.new_member_added and remaining_ms != 0:
            # Members are still arriving: wait once more, never past the rebalance timeout.
            group.new_member_added = False
            new_delay_ms = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_delay(group_id, new_delay_ms, max(remaining_ms - delay_ms, 0))
            return EMPTY_RESULT
        return self.complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> Result:
        group = self.groups.get(group_id)
        return EMPTY_RESULT if group is None else self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> Result:
        group_id = group.group_id
        self.timer.cancel(join_key(group_id))
        # Dynamic members that did not rejoin are dropped; static ones keep their place.
        gone = [m.member_id for m in group.not_yet_rejoined() if not m.is_static]
        for member_id in gone:
            group.remove(member_id)
            self.timer.cancel(heartbeat_key(group_id, member_id))
        if gone:
            log.info("[group=%s] removed dynamic members that did not rejoin: %s", group_id, gone)
        if group.is_in(GroupState.DEAD):
            return EMPTY_RESULT
        if group.members and not self._elect_joined_leader(group):
            # Nobody rejoined: wait another rebalance timeout; sessions will expire the rest.
            log.warning("[group=%s] no member rejoined; waiting another rebalance timeout", group_id)
            self._schedule_join_deadline(group)
            return EMPTY_RESULT
        self._init_next_generation(group)
        if group.is_in(GroupState.EMPTY):
            log.info("[group=%s] generation %d is empty", group_id, group.generation)
            return self.snapshot_record(group, {})
        log.info("[group=%s] generation %d formed with %d members, protocol %s",
                 group_id, group.generation, len(group.members), group.protocol_name)
        leader_members = tuple((m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                               for m in group.members.values())
        for member in list(group.members.values()):
            self.answer_join(group, member, JoinAnswer(
                ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
                group.protocol_name, group.leader_id,
                members=leader_members if group.is_leader(member.member_id) else ()))
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.schedule_pending_sync(group)
        return EMPTY_RESULT

    @staticmethod
    def _elect_joined_leader(group: ClassicGroup) -> bool:
        if group.leader_id is None:
            return False
        if group.member(group.leader_id).is_awaiting_join:
            return True
        for member in group.members.values():
            if member.is_awaiting_join:
                log.info("[group=%s] leader %s did not rejoin; %s leads now",
                         group.group_id, group.leader_id, member.member_id)
                group.leader_id = member.member_id
                return True
        return False

    def _init_next_generation(self, group: ClassicGroup) -> None:
        group.generation += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition_to(GroupState.COMPLETING_REBALANCE, self.clock())
        else:
            group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition_to(GroupState.EMPTY, self.clock())
        group.pending_sync_members.clear()

    # ------------------------------------------------------------ member removal and assignment

    def reset(self, group: ClassicGroup, reason: str) -> Result:
        """Put a group whose last operation failed half-way back into a state it can serve
        from: every member and pending member removed (a parked JoinGroup or SyncGroup is
        answered UNKNOWN_MEMBER_ID, which every client meets by rejoining), its timers
        cancelled, and an Empty next generation written, so the log agrees and a stale
        generation cannot commit."""
        group_id = group.group_id
        log.error("[group=%s] resetting the group: %s", group_id, reason)
        for member in list(group.members.values()):
            self._answer_removed(group, member)
            self.timer.cancel(heartbeat_key(group_id, member.member_id))
            group.remove(member.member_id)
        for member_id in list(group.pending_join_members):
            self.timer.cancel(heartbeat_key(group_id, member_id))
            group.remove(member_id)
        self.timer.cancel(join_key(group_id))
        self.timer.cancel(sync_key(group_id))
        if group.is_in(GroupState.DEAD):
            return self.finish()
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            group.transition_to(GroupState.PREPARING_REBALANCE, self.clock())
        self._init_next_generation(group)
        return self.finish(self.snapshot_record(group, {}))

    def remove_member_and_update_group(self, group: ClassicGroup, member: ClassicGroupMember,
                                       reason: str) -> Result:
        self._answer_removed(group, member)
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return self.maybe_prepare_rebalance_or_complete_join(group, reason)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            return self.complete_join(group)
        return EMPTY_RESULT

    def remove_current_member(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        member = group.member(member_id)
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        log.info("[group=%s] member %s left (reason: %s)", group.group_id, member_id, reason)
        self._answer_removed(group, member)
        group.remove(member_id)

    def _answer_removed(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """A removed member's parked JoinGroup or SyncGroup is answered UNKNOWN_MEMBER_ID.
        Kafka answers only the JoinGroup: a leader that leaves while its assignment is being
        written never gets its SyncGroup answered there, and a closing Java consumer waits
        for it up to its close timeout. With a slow store that window is not small."""
        self.answer_join(group, member, JoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID))
        self.answer_sync(group, member, SyncAnswer(ErrorCode.UNKNOWN_MEMBER_ID))

    def reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error is ErrorCode.NONE
        for member in group.members.values():
            answered = self.answer_sync(group, member, SyncAnswer(
                error, group.protocol_type if ok else None, group.protocol_name if ok else None,
                member.assignment))
            if answered:
                # A session that expired while the member waited was ignored; start it afresh.
                self.reschedule_heartbeat(group, member)
