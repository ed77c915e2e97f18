"""Online migration between the classic and the KIP-848 consumer group protocol (Kafka's
`convertToConsumerGroup` / `convertToClassicGroup`, under `group.consumer.migration.policy`).

Upgrade: a ConsumerGroupHeartbeat joins a classic `consumer` group that has members. The
group becomes a consumer group whose epoch (and assignment epoch) is the classic
generation; each classic member becomes a STABLE member at that epoch, its last assignment
both its current and its target assignment, and keeps its session timeout and JoinGroup
protocols (`ClassicMemberMetadata`). Records, in Kafka's order: the classic group's
tombstone, every member's metadata, the group epoch, every member's target, the
assignment epoch, every member's current assignment; then the joiner's heartbeat records.
Refused (GROUP_ID_NOT_FOUND, which the client treats as fatal) when the policy does not
allow upgrades, the group is not a `consumer` group, it has more members than
`consumer_max_size`, an assignment carries user data (a custom assignor's, which the
server-side assignors would lose), or the embedded protocol does not decode.

Downgrade: the last consumer-protocol member leaves (or is fenced), or a classic static
member takes its place, while classic members remain, the policy allows downgrades and
they are no more than `group_max_size`. The consumer group's tombstones (its delete
order), then a classic GroupMetadata record: generation = the group epoch, each remaining
member with its target assignment; once durable, a classic rebalance starts (after a
static replacement only if the target is older than the group epoch or a member was not
at it yet), so the classic members agree on an assignment among themselves again.

Classic membership is soft state (`classic/manager.py`): the upgrade answers the classic
group's parked JoinGroup/SyncGroup requests REBALANCE_IN_PROGRESS and cancels its timers
directly, as Kafka does; everything else is records.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordinator.common.result import EMPTY_RESULT, Result
from coordinator.group.classic.group import ClassicGroup, ClassicGroupMember
from coordinator.group.classic.manager import Membership, group_metadata_value
from coordinator.group.classic.state import GroupState
from coordinator.group.config import GroupConfig
from coordinator.group.consumer.consumer_protocol import decode_assignment, encode_assignment
from coordinator.group.consumer.group import Assignment, ConsumerGroup, ConsumerGroupMember, MemberState
from coordinator.group.consumer.manager import ConsumerGroups
from coordinator.group.consumer.target_assignment import target_record
from coordinator.group.subscription import MalformedProtocol, decode_subscription, subscription_version
from coordinator.group.timer import heartbeat_key, join_key, sync_key
from coordinator.group.topics import metadata_hash
from coordinator.records import (
    ClassicMemberMetadata,
    CoordinatorRecord,
    new_consumer_group_current_assignment_record,
    new_consumer_group_epoch_record,
    new_consumer_group_member_subscription_record,
    new_consumer_group_target_assignment_epoch_record,
    new_group_metadata_record,
    new_group_metadata_tombstone,
)
from protocol.answers.classic import JoinAnswer, SyncAnswer
from protocol.errors import ApiError, ErrorCode

log = logging.getLogger(__name__)


class Migration:
    def __init__(self, membership: Membership, consumer: ConsumerGroups, config: GroupConfig,
                 clock: Callable[[], int]):
        self.membership = membership
        self.consumer = consumer
        self.config = config
        self.clock = clock

    # ------------------------------------------------------------ classic → consumer

    def upgrade(self, classic: ClassicGroup) -> tuple[ConsumerGroup, list[CoordinatorRecord]]:
        """The consumer group a classic group with members becomes, and the records that
        make it so; nothing changes yet (`detach` does, once the joiner is accepted)."""
        group_id = classic.group_id

        def refuse(why: str) -> ApiError:
            log.info("[group=%s] cannot upgrade the classic group to a consumer group: %s", group_id, why)
            return ApiError(ErrorCode.GROUP_ID_NOT_FOUND,
                            f"Cannot upgrade classic group {group_id} to consumer group because {why}.")

        if not self.config.upgrade_enabled:
            raise refuse("online upgrade is disabled")
        if not classic.uses_consumer_protocol():
            raise refuse("the group does not use the consumer embedded protocol")
        if len(classic.members) > self.config.consumer_max_size:
            raise refuse("the group size exceeds the consumer group maximum size")
        image = self.consumer.loaded_topics()
        generation = classic.generation
        members: list[tuple[ConsumerGroupMember, Assignment]] = []
        for m in classic.members.values():
            protocol = classic.protocol_name or m.protocols[0][0]
            try:
                assigned, user_data = decode_assignment(m.assignment, image)
                subscription = decode_subscription(m.metadata(protocol))
            except MalformedProtocol:
                raise refuse("the embedded consumer protocol is malformed") from None
            if user_data:
                raise refuse("an unsupported custom assignor is in use (its user data would be lost); "
                             "switch to a default assignor before re-attempting the upgrade")
            members.append((ConsumerGroupMember(
                m.member_id, instance_id=m.group_instance_id, rack_id=getattr(subscription, "rack_id", None),
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(set(subscription.topics or ()))),
                rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=generation,
                previous_member_epoch=generation, state=MemberState.STABLE, assigned=assigned,
                classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols)), assigned))
        names = {n for member, _ in members for n in member.subscribed_topic_names}
        records = [new_group_metadata_tombstone(group_id, generation=generation)]
        records += [new_consumer_group_member_subscription_record(group_id, m.member_id, m.metadata_value())
                    for m, _ in members]
        records.append(new_consumer_group_epoch_record(group_id, generation, metadata_hash(image, names)))
        records += [target_record(group_id, m.member_id, assigned) for m, assigned in members]
        records.append(new_consumer_group_target_assignment_epoch_record(group_id, generation))
        records += [new_consumer_group_current_assignment_record(group_id, m.member_id, m.assignment_value())
                    for m, _ in members]
        group = ConsumerGroup(group_id)
        for record in records[1:]:
            group.replay(record.key, record.value)
        group.checked_image_version = image.version
        return group, records

    def detach(self, classic: ClassicGroup, converted: ConsumerGroup) -> None:
        """The classic group's soft state handed over: parked requests answered
        REBALANCE_IN_PROGRESS (the members rejoin, now into the consumer group), classic
        timers cancelled, consumer session timers started at each member's own timeout."""
        group_id = classic.group_id
        log.info("[group=%s] classic group with %d members becomes a consumer group at epoch %d",
                 group_id, len(classic.members), classic.generation)
        for member in list(classic.members.values()):
            self.membership.answer_join(classic, member, JoinAnswer(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            self.membership.answer_sync(classic, member, SyncAnswer(ErrorCode.REBALANCE_IN_PROGRESS))
            self.membership.timer.cancel(heartbeat_key(group_id, member.member_id))
        for member_id in classic.pending_join_members:
            self.membership.timer.cancel(heartbeat_key(group_id, member_id))
        self.membership.timer.cancel(join_key(group_id))
        self.membership.timer.cancel(sync_key(group_id))
        for consumer_member in converted.members.values():
            self.consumer.schedule_session(group_id, consumer_member)

    # ------------------------------------------------------------ consumer → classic

    def downgrade(self, group: ConsumerGroup, leaving: set[str], *,
                  succession: tuple[ConsumerGroupMember, ConsumerGroupMember] | None = None,
                  rebalance: bool = True) -> Result:
        """The consumer group's remaining (all classic) members as a classic group, then
        (`rebalance`) a rebalance among them. `succession` is (joining, replaced): a classic
        static member that took another's place in the same batch, and joins with its target."""
        group_id = group.group_id
        image = self.consumer.topics()
        classic = ClassicGroup(group_id, GroupState.STABLE, self.clock(), generation=group.group_epoch,
                               protocol_type="consumer")
        gone = leaving | ({succession[1].member_id} if succession is not None else set())
        remaining = [m for mid, m in sorted(group.members.items()) if mid not in gone]
        targets = dict(group.target)
        renamed = None
        if succession is not None:
            joining, replaced = succession
            remaining.append(joining)
            targets[joining.member_id] = targets.get(replaced.member_id, {})
            renamed = {replaced.member_id: joining.member_id}
        for m in remaining:
            assert m.classic is not None            # the remaining members are all classic
            classic.add(ClassicGroupMember(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.classic.session_timeout_ms, "consumer", m.classic.supported_protocols), None)
        classic.protocol_name = classic.select_protocol()
        assignments = {}
        for classic_member in classic.members.values():
            try:
                version = subscription_version(classic_member.metadata(classic.protocol_name))
            except MalformedProtocol:
                version = 0
            assignments[classic_member.member_id] = encode_assignment(
                targets.get(classic_member.member_id, {}), image, version)
        records = self.consumer.group_tombstones(group, renamed)
        records.append(new_group_metadata_record(group_id, group_metadata_value(classic, assignments)))
        log.info("[group=%s] no consumer-protocol member left: %d classic members continue as a "
                 "classic group at generation %d", group_id, len(remaining), classic.generation)

        def after_commit() -> Result:
            downgraded = self.membership.groups.get(group_id)
            if downgraded is None or not downgraded.is_in(GroupState.STABLE):
                return EMPTY_RESULT
            for member in downgraded.members.values():
                self.membership.reschedule_heartbeat(downgraded, member)
            if not rebalance:
                return EMPTY_RESULT
            return self.membership.finish(self.membership.prepare_rebalance(
                downgraded, "downgraded from a consumer group as its last consumer-protocol member left"))

        return Result(records=tuple(records), after_commit=after_commit)
