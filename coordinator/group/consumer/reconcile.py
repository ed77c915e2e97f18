"""A member's next current assignment on its way to its target (Kafka's
`CurrentAssignmentBuilder`), with the fixes of Kafka 4.3 that clients see: a member that
must revoke keeps its epoch while it does (KAFKA-19974).

Revocation first: partitions the member holds but no longer targets go to
`pending_revocation` and the member waits in UNREVOKED_PARTITIONS, at its epoch, until a
heartbeat shows it let them go. Then it moves to the target epoch with the target
partitions that are free; those still held by another member leave it in
UNRELEASED_PARTITIONS, and it picks them up on a later heartbeat once released.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from coordinator.group.consumer.group import Assignment, ConsumerGroupMember, MemberState


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    if owned is None:   # the heartbeat did not say: assume it still holds them
        return bool(partitions)
    return any(parts & owned.get(topic_id, frozenset()) for topic_id, parts in partitions.items())


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment, owned: Assignment | None,
              subscribed: frozenset[uuid.UUID], subscription_changed: bool,
              is_free: Callable[[uuid.UUID, int], bool]) -> ConsumerGroupMember:
    """`is_free(topic, p)`: nobody else holds the partition (Kafka's partition epoch -1)."""
    state = member.state
    if state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, owned, subscribed, is_free)
        if subscription_changed:
            return _drop_unsubscribed(member, owned, subscribed)
        return member
    if state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return _drop_unsubscribed(member, owned, subscribed) if subscription_changed else member
        return _next(member, member.member_epoch, target_epoch, target, owned, subscribed, is_free)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, owned, subscribed, is_free)
    # UNKNOWN (a state written by a newer coordinator): start over from nothing held.
    return _next(member.with_epoch(member.member_epoch, assigned={}, pending_revocation={}),
                 member.member_epoch, target_epoch, target, owned, subscribed, is_free)


def _drop_unsubscribed(member: ConsumerGroupMember, owned: Assignment | None,
                       subscribed: frozenset[uuid.UUID]) -> ConsumerGroupMember:
    keep = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    dropped = {t: ps for t, ps in member.assigned.items() if t not in subscribed}
    if not dropped:
        return member
    pending = dict(member.pending_revocation)
    for t, ps in dropped.items():
        pending[t] = pending.get(t, frozenset()) | ps
    if _owns_any(owned, pending):
        return member.with_epoch(member.member_epoch, state=MemberState.UNREVOKED_PARTITIONS,
                                 assigned=keep, pending_revocation=pending)
    return member.with_epoch(member.member_epoch, assigned=keep)


def _next(member: ConsumerGroupMember, epoch_for_revocation: int, target_epoch: int, target: Assignment,
          owned: Assignment | None, subscribed: frozenset[uuid.UUID],
          is_free: Callable[[uuid.UUID, int], bool]) -> ConsumerGroupMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    adding: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    current = member.assigned
    for topic_id in set(target) | set(current):
        wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        have = current.get(topic_id, frozenset())
        keep = have & wanted
        if keep:
            assigned[topic_id] = keep
        if have - keep:
            revoking[topic_id] = have - keep
        new = frozenset(p for p in wanted - keep if is_free(topic_id, p))
        if len(new) != len(wanted - keep):
            unreleased = True
        if new:
            adding[topic_id] = new
    if revoking and _owns_any(owned, revoking):
        return member.with_epoch(epoch_for_revocation, state=MemberState.UNREVOKED_PARTITIONS,
                                 assigned=assigned, pending_revocation=revoking)
    for topic_id, ps in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(target_epoch, state=state, assigned=assigned, pending_revocation={})
