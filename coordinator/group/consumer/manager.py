"""`ConsumerGroups`: the KIP-848 consumer group protocol of one partition (Kafka's
`GroupMetadataManager.consumerGroupHeartbeat` and friends), beside the classic
`Membership` and the `OffsetManager`.

Decide, then replay: a heartbeat reads the replayed state, computes the member's next
state, the group's new epoch and target assignment if needed, and returns them as records
in Kafka's write order; `replay` (on the write path and on load) is the only place state
changes. Timers (session, rebalance) are scheduled here and fire as writes on the
partition; a timer re-checks that the member is still the one it was armed for.

One heartbeat, in order (records in this order, one batch):
1. the member: found or created (a static member replacing its departed self, epoch -2,
   inherits its partitions), its epoch checked, the request's non-null fields applied
   → `MemberMetadata` if it changed;
2. regular expressions (v1) resolved with RE2 full-match against the upstream topics
   the member may describe (`regex.py`) → `RegularExpression` records, and tombstones for
   regexes nobody uses any more;
3. a new group epoch when the member's subscribed topics, a regex's topics, or the
   metadata hash of the group's subscribed topics changed → `GroupMetadata`;
4. a new target assignment when the group epoch is ahead of the assignment epoch
   (`target_assignment.py`, the assignors in `assignors.py`) →
   `TargetAssignmentMember` for each changed member, `TargetAssignmentMetadata`;
5. the member reconciled towards its target (`reconcile.py`) → `CurrentMemberAssignment`.

Kafka 4.3 behaviours adopted: an epoch-0 rejoin with a known member id is accepted (the
member starts over holding nothing); identical heartbeats write nothing; a revoking
member keeps its epoch.
"""

from __future__ import annotations

import collections
import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace

from coordinator.common.result import EMPTY_RESULT, Result
from coordinator.common.timer import Timer
from coordinator.group.config import GroupConfig
from coordinator.group.consumer.assignors import ASSIGNORS
from coordinator.group.consumer.group import (
    EMPTY_ASSIGNMENT,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    from_topic_partitions,
    is_subset,
    to_topic_partitions,
)
from coordinator.group.consumer.reconcile import reconcile
from coordinator.group.consumer.regex import refresh_regexes
from coordinator.group.consumer.target_assignment import (
    assignment_spec,
    target_assignment_records,
    target_record,
)
from coordinator.group.context import RequestContext
from coordinator.group.timer import classic_join_key, classic_sync_key, rebalance_key, session_key
from coordinator.group.topics import TopicImage, metadata_hash
from coordinator.records import (
    CoordinatorRecord,
    new_consumer_group_current_assignment_record,
    new_consumer_group_current_assignment_tombstone,
    new_consumer_group_epoch_record,
    new_consumer_group_epoch_tombstone,
    new_consumer_group_member_subscription_record,
    new_consumer_group_member_subscription_tombstone,
    new_consumer_group_regular_expression_tombstone,
    new_consumer_group_target_assignment_epoch_record,
    new_consumer_group_target_assignment_epoch_tombstone,
    new_consumer_group_target_assignment_tombstone,
)
from protocol.answers.consumer import consumer_group_heartbeat_response
from protocol.errors import ApiError, ErrorCode

log = logging.getLogger(__name__)

# The shortest heartbeat interval a member is given while its group waits for the
# assignment interval: members come back about when the assignment is due, not in a burst.
MIN_EARLY_HEARTBEAT_MS = 100
# The heartbeat interval, at most, of a member of a settling group: one waiting for
# partitions that others still hold, or one whose group's target assignment changed within
# the last regular heartbeat interval. A member learns of partitions freed for it, or
# taken from it, only from a heartbeat's answer, so at the regular interval (5 s) every
# step of a rebalance waits for it: a first member gives partitions up at its next
# heartbeat, and the heartbeat after that gives them to the next member.
SETTLING_HEARTBEAT_MS = 500


def successor_of(departed: ConsumerGroupMember, member_id: str) -> ConsumerGroupMember:
    """A departed static member's successor: its subscription and partitions, a new id."""
    return replace(departed, member_id=member_id, member_epoch=0, previous_member_epoch=0,
                   state=MemberState.STABLE, pending_revocation={}, assignment_epochs={})


def _blank(s: str | None) -> bool:
    return s is None or not s.strip()


class ConsumerGroups:
    def __init__(self, groups: dict[str, ConsumerGroup], config: GroupConfig, timer: Timer,
                 clock: Callable[[], int], new_member_id: Callable[[str], str],
                 topics: Callable[[], TopicImage], stopwatch: Callable[[], float] | None = None):
        self.groups = groups
        self.config = config
        self.timer = timer
        self.clock = clock
        self.new_member_id = new_member_id
        self.topics = topics
        # Assignor runs (name, seconds) for the metrics sampler to take; only with a stopwatch.
        self.stopwatch = stopwatch
        self.assignor_runs: collections.deque[tuple[str, float]] = collections.deque(maxlen=1024)
        # (group, members leaving) → the Result that makes the rest a classic group; the
        # shard sets it (`migration.Migration.downgrade`), as it owns the classic side.
        self.downgrade: Callable[..., Result] | None = None

    # ------------------------------------------------------------ validation

    def validate(self, version: int, request) -> None:
        """Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`: nothing is touched yet."""
        epoch = request.member_epoch
        invalid = ErrorCode.INVALID_REQUEST
        if (version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH) and _blank(request.member_id):
            raise ApiError(invalid, "MemberId can't be empty.")
        if _blank(request.group_id):
            raise ApiError(invalid, "GroupId can't be empty.")
        if request.instance_id is not None and _blank(request.instance_id):
            raise ApiError(invalid, "InstanceId can't be empty.")
        if request.rack_id is not None and _blank(request.rack_id):
            raise ApiError(invalid, "RackId can't be empty.")
        regex = request.subscribed_topic_regex if version >= 1 else None
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise ApiError(invalid, "RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise ApiError(invalid, "TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and regex is None:
                raise ApiError(invalid, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == STATIC_LEAVE_EPOCH:
            if request.instance_id is None:
                raise ApiError(invalid, "InstanceId can't be null.")
        elif epoch < STATIC_LEAVE_EPOCH:
            raise ApiError(invalid, f"MemberEpoch is invalid: {epoch}.")
        if request.server_assignor is not None and request.server_assignor not in self.config.consumer_assignors:
            raise ApiError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                           f"ServerAssignor {request.server_assignor} is not supported. "
                           f"Supported assignors: {', '.join(self.config.consumer_assignors)}.")

    # ------------------------------------------------------------ heartbeat

    def heartbeat(self, ctx: RequestContext, request, group: ConsumerGroup,
                  records: list[CoordinatorRecord]) -> Result:
        """`group` may be new (not yet in `groups`: its records create it on replay);
        `records` may already hold a converted classic group's records."""
        epoch = request.member_epoch
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(ctx, request, group)
        image = self.loaded_topics()
        version = ctx.api_version
        member_id = request.member_id or self.new_member_id(ctx.client_id or "consumer")
        old, replaced = self._member_for(group, member_id, request)
        if old is None and replaced is None:
            self.check_size(group)
        regex = request.subscribed_topic_regex if version >= 1 else None
        base = old or ConsumerGroupMember(member_id)
        if replaced is not None:
            base = successor_of(replaced, member_id)
        elif epoch == 0 and old is not None:
            # A known member rejoining holds nothing (it dropped its partitions when fenced).
            base = old.with_epoch(0, state=MemberState.STABLE, assigned={}, pending_revocation={})
        updated = _apply_request(base, request, regex, ctx)
        owned = None if request.topic_partitions is None else from_topic_partitions(
            (t.topic_id, t.partitions) for t in request.topic_partitions)
        reconciled, come_back_ms = self.advance(group, image, old, base, updated, replaced, owned, records,
                                                ctx.may_describe_topic)

        full = (request.rebalance_timeout_ms != -1 and request.topic_partitions is not None
                and (request.subscribed_topic_names is not None or regex is not None))
        send = epoch == 0 or full or old is None or reconciled.assigned != old.assigned
        interval_ms = self.config.consumer_heartbeat_interval_ms
        if come_back_ms is not None:
            interval_ms = min(interval_ms, come_back_ms)
        response = consumer_group_heartbeat_response(
            version, member_id, reconciled.member_epoch, interval_ms,
            to_topic_partitions(reconciled.assigned) if send else None)
        return Result(records=tuple(records), response=response)

    def loaded_topics(self) -> TopicImage:
        image = self.topics()
        if image.version == 0:
            raise ApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                           "kgc has not read the upstream cluster's topics yet")
        return image

    def check_size(self, group: ConsumerGroup) -> None:
        """Before a new member joins."""
        if len(group.members) >= self.config.consumer_max_size:
            raise ApiError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                           f"The consumer group has reached its maximum capacity of "
                           f"{self.config.consumer_max_size} members.")

    def advance(self, group: ConsumerGroup, image: TopicImage, old: ConsumerGroupMember | None,
                base: ConsumerGroupMember, updated: ConsumerGroupMember, replaced: ConsumerGroupMember | None,
                owned: Assignment | None, records: list[CoordinatorRecord],
                may_describe: Callable[[str], bool] | None = None) -> tuple[ConsumerGroupMember, int | None]:
        """Steps 1-5 for one member, whichever protocol it speaks: `old` is the member as
        the group knows it (None: new), `base` what the request starts from, `updated` with
        the request applied, `replaced` a departed static member it succeeds; `owned` the
        partitions it says it holds (None: not said); `may_describe` the member's DESCRIBE
        right on a topic, which filters the regexes resolved now. Appends the records, arms
        its timers, and returns the member reconciled, and how soon it should heartbeat again
        when that is sooner than its regular interval (else None)."""
        member_id = updated.member_id
        is_new = old is None

        # 1. the member (a static replacement first retires its departed predecessor)
        if replaced is not None:
            records += _member_tombstones(group.group_id, replaced.member_id)
            self.cancel_timers(group.group_id, replaced.member_id)
        if is_new or updated.metadata_value() != base.metadata_value() or replaced is not None:
            records.append(new_consumer_group_member_subscription_record(group.group_id, member_id,
                                                                         updated.metadata_value()))

        members = dict(group.members)
        if replaced is not None:
            del members[replaced.member_id]
        members[member_id] = updated

        # 2. regular expressions
        image_changed = group.checked_image_version != image.version
        in_use = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        regex_topics, regexes_changed = refresh_regexes(group, in_use, image, image_changed, self.clock, records,
                                                          may_describe)

        def subscribed(m: ConsumerGroupMember) -> frozenset[str]:
            extra = regex_topics.get(m.subscribed_topic_regex, ()) if m.subscribed_topic_regex else ()
            return frozenset(m.subscribed_topic_names) | frozenset(extra)

        # 3. the group epoch
        if replaced is not None:
            old_subscription = subscribed(replaced)
        else:
            old_subscription = frozenset() if is_new else subscribed(base)
        subscription_changed = subscribed(updated) != old_subscription
        bump = group.group_epoch == 0 or subscription_changed or regexes_changed
        group_epoch, hash_ = group.group_epoch, group.metadata_hash
        if bump or image_changed:
            hash_ = metadata_hash(image, (n for m in members.values() for n in subscribed(m)))
            bump = bump or hash_ != group.metadata_hash
        group.checked_image_version = image.version
        if bump:
            group_epoch += 1
            records.append(new_consumer_group_epoch_record(group.group_id, group_epoch, hash_))

        # 4. the target assignment
        targets = dict(group.target)
        if replaced is not None and replaced.member_id in targets:
            targets[member_id] = targets.pop(replaced.member_id)
            records.append(target_record(group.group_id, member_id, targets[member_id]))
        target_epoch = group.assignment_epoch
        assignment_in_ms = None
        settling = self._recently_assigned(group)
        if group_epoch > group.assignment_epoch:
            assignment_in_ms = self._assignment_in_ms(group)
            if assignment_in_ms == 0:
                new_targets = self._assign(group, members, image, subscribed, targets)
                records += target_assignment_records(group.group_id, targets, new_targets, group_epoch, self.clock())
                targets, target_epoch, assignment_in_ms, settling = new_targets, group_epoch, None, True

        # 5. the member's current assignment
        ids = frozenset(image.by_name[n].topic_id for n in subscribed(updated) if n in image.by_name)
        predecessor = replaced.member_id if replaced is not None else None

        def is_free(topic_id, partition) -> bool:
            holder = group.owners.get((topic_id, partition))
            return holder is None or holder == member_id or holder == predecessor

        reconciled = reconcile(updated, target_epoch, targets.get(member_id, EMPTY_ASSIGNMENT), owned, ids,
                               subscription_changed and not is_new, is_free)
        if old is None or replaced is not None or not reconciled.same_assignment(old):
            records.append(new_consumer_group_current_assignment_record(group.group_id, member_id,
                                                                        reconciled.assignment_value()))
            if old is None or reconciled.member_epoch != old.member_epoch or reconciled.state != old.state:
                log.debug("[group=%s] member %s now at epoch %d, %s (group epoch %d, target %d)", group.group_id,
                          member_id, reconciled.member_epoch, reconciled.state.name, group_epoch, target_epoch)
        self.schedule_session(group.group_id, reconciled)
        self._arm_rebalance_timer(group.group_id, old, reconciled)
        if assignment_in_ms is not None:
            # The group's next assignment waits for the assignment interval: come back when
            # it is due, so that a burst of joins is assigned (and its members' revocations
            # learnt) within about that interval.
            return reconciled, max(assignment_in_ms, MIN_EARLY_HEARTBEAT_MS)
        if settling or reconciled.state == MemberState.UNRELEASED_PARTITIONS:
            return reconciled, SETTLING_HEARTBEAT_MS
        return reconciled, None

    def _member_for(self, group: ConsumerGroup, member_id: str, request
                    ) -> tuple[ConsumerGroupMember | None, ConsumerGroupMember | None]:
        """(the member as it is, a departed static member it replaces); raises on bad epochs."""
        epoch = request.member_epoch
        instance_id = request.instance_id
        if instance_id is not None:
            holder_id = group.static_members.get(instance_id)
            if epoch == 0:
                if holder_id is not None and holder_id != member_id:
                    holder = group.members[holder_id]
                    if holder.member_epoch != STATIC_LEAVE_EPOCH:
                        raise ApiError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                       f"Static member {holder_id} with instance id {instance_id} is present "
                                       f"in the consumer group.")
                    return group.members.get(member_id), holder
                return group.members.get(member_id), None
            check_static_holder(group, instance_id, member_id)
        if epoch == 0:
            return group.members.get(member_id), None
        member = _known_member(group, member_id)
        if epoch > member.member_epoch:
            raise ApiError(ErrorCode.FENCED_MEMBER_EPOCH,
                           f"The consumer group member has a greater member epoch ({epoch}) than the one known "
                           f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                           f"partitions and rejoin.")
        if epoch < member.member_epoch:
            owned = request.topic_partitions
            # A retried heartbeat whose answer was lost still carries the previous epoch.
            if not (epoch == member.previous_member_epoch and owned is not None and is_subset(
                    from_topic_partitions((t.topic_id, t.partitions) for t in owned), member.assigned)):
                raise ApiError(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                               f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                               f"all its partitions and rejoin.")
        return member, None

    def _assignment_in_ms(self, group: ConsumerGroup) -> int:
        """In how many milliseconds the group's next target assignment may be computed; 0:
        now (Kafka's `canComputeNextTargetAssignment`). Not within
        `consumer_assignment_interval_ms` of the last: the members that join in a burst are
        then assigned together, and the members already assigned are not moved again for each
        of them, nor the assignor run for each. A group with no known last assignment (new,
        emptied, converted: timestamp 0) computes at once, and so does one whose last is
        stamped later than now: the wall clock went back, or another instance's ran ahead,
        and waiting for it could hold the group for that long (Kafka waits)."""
        since = self._since_assignment_ms(group)
        interval = self.config.consumer_assignment_interval_ms
        return 0 if since is None or since >= interval else interval - since

    def _recently_assigned(self, group: ConsumerGroup) -> bool:
        """The group's target assignment was computed within the last regular heartbeat
        interval: joins may still be arriving, and any member may be moved again."""
        since = self._since_assignment_ms(group)
        return since is not None and since < self.config.consumer_heartbeat_interval_ms

    def _since_assignment_ms(self, group: ConsumerGroup) -> int | None:
        """How long ago the group's last target assignment was computed; None when that is
        not known (timestamp 0) or stamped later than now."""
        last = group.assignment_timestamp_ms
        since = self.clock() - last
        return None if last == 0 or since < 0 else since

    def _assign(self, group: ConsumerGroup, members: dict[str, ConsumerGroupMember], image: TopicImage,
                subscribed: Callable[[ConsumerGroupMember], frozenset[str]],
                previous: dict[str, Assignment]) -> dict[str, Assignment]:
        name = group.preferred_assignor(members.values(), self.config.consumer_assignors[0])
        inputs, partitions = assignment_spec(members.values(), image, subscribed)
        if self.stopwatch is None:
            return ASSIGNORS[name](inputs, partitions, previous)
        started = self.stopwatch()
        targets = ASSIGNORS[name](inputs, partitions, previous)
        self.assignor_runs.append((name, self.stopwatch() - started))
        return targets

    # ------------------------------------------------------------ leaving and fencing

    def _leave(self, ctx: RequestContext, request, group: ConsumerGroup) -> Result:
        member_id = request.member_id
        if request.instance_id is not None:
            check_static_holder(group, request.instance_id, member_id)
        member = _known_member(group, member_id)
        epoch = request.member_epoch
        response = consumer_group_heartbeat_response(ctx.api_version, member_id, epoch, 0, None)
        if epoch == STATIC_LEAVE_EPOCH:
            # A static member leaving for a while keeps its partitions until its session ends.
            # Its partitions count as given at epoch 0, so that its successor (a new member
            # id) may commit them from its first epoch on (Kafka's static member leave).
            away = member.with_epoch(STATIC_LEAVE_EPOCH, pending_revocation={}, assignment_epochs={})
            self.timer.cancel(rebalance_key(group.group_id, member_id))
            return Result(records=(new_consumer_group_current_assignment_record(
                group.group_id, member_id, away.assignment_value()),), response=response)
        log.info("[group=%s] member %s left", group.group_id, member_id)
        return replace(self.fence(group, [member_id]), response=response)

    def fence(self, group: ConsumerGroup, member_ids: Iterable[str]) -> Result:
        """Members leave or are fenced (Kafka's `consumerGroupFenceMembers`): when only
        classic members would remain and the policy allows it, the group becomes a classic
        group instead (`downgrade`, set by the shard)."""
        gone = set(member_ids)
        if not gone:
            return EMPTY_RESULT
        if self.downgrade is not None and self.may_downgrade(group, gone):
            for mid in group.members:
                self.cancel_timers(group.group_id, mid)
            return self.downgrade(group, gone)
        return Result(records=tuple(self.fence_records(group, gone)))

    def may_downgrade(self, group: ConsumerGroup, gone: set[str],
                      joining: ConsumerGroupMember | None = None) -> bool:
        """Kafka's `validateOnlineDowngradeWithFencedMembers` (members leaving) and
        `...WithReplacedMember` (a classic static member `joining` in place of one)."""
        remaining = [m for mid, m in group.members.items() if mid not in gone]
        if joining is not None:
            remaining.append(joining)
        if not remaining or not all(m.uses_classic_protocol for m in remaining):
            return False
        if not self.config.downgrade_enabled:
            log.info("[group=%s] not downgraded to a classic group: the migration policy (%s) does not allow it",
                     group.group_id, self.config.consumer_migration_policy)
            return False
        if len(remaining) > self.config.group_max_size:
            log.info("[group=%s] not downgraded to a classic group: %d members exceed group_max_size %d",
                     group.group_id, len(remaining), self.config.group_max_size)
            return False
        return True

    def fence_records(self, group: ConsumerGroup, member_ids: Iterable[str]) -> list[CoordinatorRecord]:
        """Kafka's order: per member current, target, metadata tombstones; regexes nobody
        uses any more; then a new group epoch (and, the group now empty, the assignment
        epoch with it, so an empty group is not left Assigning)."""
        gone = set(member_ids)
        records: list[CoordinatorRecord] = []
        for mid in sorted(gone):
            records += _member_tombstones(group.group_id, mid)
            self.cancel_timers(group.group_id, mid)
        remaining = [m for mid, m in group.members.items() if mid not in gone]
        in_use = {m.subscribed_topic_regex for m in remaining if m.subscribed_topic_regex}
        for rx in sorted(group.regexes.keys() - in_use):
            records.append(new_consumer_group_regular_expression_tombstone(group.group_id, rx))
        image = self.topics()
        names = {n for m in remaining for n in m.subscribed_topic_names}
        names |= {n for rx in in_use for n in (group.regexes[rx].topics if rx in group.regexes else ())}
        epoch = group.group_epoch + 1
        records.append(new_consumer_group_epoch_record(group.group_id, epoch, metadata_hash(image, names)))
        if not remaining:
            records.append(new_consumer_group_target_assignment_epoch_record(group.group_id, epoch))
        return records

    def group_tombstones(self, group: ConsumerGroup, renamed: dict[str, str] | None = None) -> list[CoordinatorRecord]:
        """The group's deletion, in Kafka's order (DeleteGroups of an empty group, or a
        downgrade); `renamed`: member ids written in place of others earlier in the same
        batch (a static member's successor)."""
        gid = group.group_id
        renamed = renamed or {}
        members = sorted(renamed.get(m, m) for m in group.members)
        targets = sorted(renamed.get(m, m) for m in group.target)
        records = [new_consumer_group_current_assignment_tombstone(gid, m) for m in members]
        records += [new_consumer_group_target_assignment_tombstone(gid, m) for m in targets]
        records.append(new_consumer_group_target_assignment_epoch_tombstone(gid))
        records += [new_consumer_group_member_subscription_tombstone(gid, m) for m in members]
        records += [new_consumer_group_regular_expression_tombstone(gid, rx) for rx in sorted(group.regexes)]
        records.append(new_consumer_group_epoch_tombstone(gid))
        return records

    # ------------------------------------------------------------ timers

    def schedule_session(self, group_id: str, member: ConsumerGroupMember) -> None:
        """A classic member's session is the one it joined with; everyone else's the group's."""
        timeout_ms = member.classic.session_timeout_ms if member.classic is not None \
            else self.config.consumer_session_timeout_ms
        self.timer.schedule(session_key(group_id, member.member_id), timeout_ms,
                            functools.partial(self._session_expired, group_id, member.member_id))

    def _arm_rebalance_timer(self, group_id: str, old: ConsumerGroupMember | None,
                             new: ConsumerGroupMember) -> None:
        key = rebalance_key(group_id, new.member_id)
        if new.state != MemberState.UNREVOKED_PARTITIONS:
            self.timer.cancel(key)
            return
        if old is not None and old.state == MemberState.UNREVOKED_PARTITIONS and old.member_epoch == new.member_epoch \
                and self.timer.is_scheduled(key):
            return
        self.timer.schedule(key, max(new.rebalance_timeout_ms, 0),
                            functools.partial(self._rebalance_expired, group_id, new.member_id, new.member_epoch))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        for key in (session_key, rebalance_key, classic_join_key, classic_sync_key):
            self.timer.cancel(key(group_id, member_id))

    def _session_expired(self, group_id: str, member_id: str) -> Result:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return EMPTY_RESULT
        log.info("[group=%s] member %s fenced: no heartbeat within its session timeout", group_id, member_id)
        return self.fence(group, [member_id])

    def _rebalance_expired(self, group_id: str, member_id: str, epoch: int) -> Result:
        group = self.groups.get(group_id)
        if group is None:
            return EMPTY_RESULT
        member = group.members.get(member_id)
        if member is None or member.state != MemberState.UNREVOKED_PARTITIONS or member.member_epoch != epoch:
            return EMPTY_RESULT
        log.info("[group=%s] member %s fenced: it did not revoke its partitions within its rebalance timeout",
                 group_id, member_id)
        return self.fence(group, [member_id])

    def on_loaded(self) -> None:
        """Fresh session timers for every member; a rebalance timer for every member revoking."""
        for group in self.groups.values():
            for member in group.members.values():
                self.schedule_session(group.group_id, member)
                self._arm_rebalance_timer(group.group_id, None, member)

    def on_unloaded(self) -> None:
        for group in self.groups.values():
            for member_id in group.members:
                self.cancel_timers(group.group_id, member_id)
        self.groups.clear()

    # ------------------------------------------------------------ offsets

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, epoch: int, version: int,
                               committed: Iterable[tuple[str | None, Iterable[int]]]) -> ErrorCode:
        """Kafka's `ConsumerGroup.validateOffsetCommit` (member epochs instead of
        generations), with KIP-1251 (Kafka 4.3+): a commit at an epoch older than the
        member's is accepted when the member still holds every partition it commits and
        was given each at that epoch or before. A commit sent before the answer that moved
        the member on is then not refused with STALE_MEMBER_EPOCH (a classic member's with
        ILLEGAL_GENERATION); it cannot overwrite another member's commit, since nobody else
        has held those partitions since that epoch (a partition changes owner only after
        its owner let it go)."""
        if epoch < 0 and group.is_empty():
            return ErrorCode.NONE   # admin tools and assign() consumers
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not member.uses_classic_protocol and version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if epoch == member.member_epoch:
            return ErrorCode.NONE
        fenced = ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
        if epoch > member.member_epoch:
            return fenced
        image = self.topics()
        for name, partitions in committed:
            topic = image.by_name.get(name) if name is not None else None   # None: an unknown topic id
            for p in partitions:
                given_at = None if topic is None else member.assignment_epoch(topic.topic_id, p)
                if given_at is None or epoch < given_at:
                    return fenced
        return ErrorCode.NONE

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, epoch: int) -> ErrorCode:
        if member_id is None and epoch < 0:
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE


def check_static_holder(group: ConsumerGroup, instance_id: str, member_id: str) -> None:
    """A static member's heartbeat (not a join) must come from the member holding its instance id."""
    holder_id = group.static_members.get(instance_id)
    if holder_id is None:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if holder_id != member_id:
        raise ApiError(ErrorCode.FENCED_INSTANCE_ID,
                       f"Static member {member_id} with instance id {instance_id} was fenced by member {holder_id}.")


def _known_member(group: ConsumerGroup, member_id: str) -> ConsumerGroupMember:
    member = group.members.get(member_id)
    if member is None:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
    return member


def _apply_request(member: ConsumerGroupMember, request, regex: str | None,
                   ctx: RequestContext) -> ConsumerGroupMember:
    """Null request fields mean "unchanged"; a regex of "" removes it."""
    changes: dict = {"client_id": ctx.client_id, "client_host": ctx.client_host, "classic": None}
    if request.instance_id is not None:
        changes["instance_id"] = request.instance_id
    if request.rack_id is not None:
        changes["rack_id"] = request.rack_id
    if request.rebalance_timeout_ms != -1:
        changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
    if request.subscribed_topic_names is not None:
        changes["subscribed_topic_names"] = tuple(sorted(set(request.subscribed_topic_names)))
    if regex is not None:
        changes["subscribed_topic_regex"] = regex or None
    if request.server_assignor is not None:
        changes["server_assignor"] = request.server_assignor
    return replace(member, **changes)


def _member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    return [new_consumer_group_current_assignment_tombstone(group_id, member_id),
            new_consumer_group_target_assignment_tombstone(group_id, member_id),
            new_consumer_group_member_subscription_tombstone(group_id, member_id)]


