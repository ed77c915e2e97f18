"""A classic group and its members: soft state, changed directly by the handlers.

Membership while rebalancing is not event-sourced (as in Kafka): the handlers mutate a
`ClassicGroup`, and a GroupMetadata record is written at stable points as a snapshot
that `replay` turns back into a STABLE or EMPTY group after a restart.

Protocol selection: the candidates are the protocols every member supports; each member
votes for the first candidate in its own preference order; most votes wins. A member
that lists a name twice supports it once, and its first entry (metadata and rank) is
the one that counts: Kafka reads a member's names as a set where it checks support, and
takes the first match where it votes or reads metadata; counting a repeated name twice
made a protocol look supported by all while one member lacked it, and the join could
then never complete. Kafka breaks
ties by hash-map order (arbitrary); we break them by the order in which votes were
first cast, which is member join order, so results are reproducible.

Leader: the first member added to a leaderless group; when the leader is removed, the
first remaining member in join order (Kafka: hash-map order).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections import Counter
from dataclasses import dataclass

from coordinator.common.result import ReplyHandle
from coordinator.common.timer import KeyedTimerOp
from coordinator.group.classic.state import VALID_PREVIOUS, GroupState, IllegalTransition
from coordinator.group.subscription import subscribed_topics
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Protocols = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Parked:
    """A JoinGroup or SyncGroup waiting for its answer, with the version to answer at."""

    handle: ReplyHandle
    api_version: int


class ClassicGroupMember:
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "awaiting_join",
                 "awaiting_sync", "is_new", "session_timer")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: Protocols, assignment: bytes = b""):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        # Interned: thousands of members repeat a few client ids, hosts and protocol names,
        # and each decoded request would otherwise leave every member its own copy.
        self.client_id = sys.intern(client_id)
        self.client_host = sys.intern(client_host)
        self.rebalance_timeout_ms = shared_int(rebalance_timeout_ms)
        self.session_timeout_ms = shared_int(session_timeout_ms)
        self.protocol_type = sys.intern(protocol_type)
        self.protocols = interned_names(protocols)
        self.assignment = assignment
        self.awaiting_join: Parked | None = None
        self.awaiting_sync: Parked | None = None
        # A new member may expire while its JoinGroup is parked (new-member join timeout).
        self.is_new = False
        # Its session timer's op and key (`membership.HeartbeatExpiry`), made on first use.
        self.session_timer: KeyedTimerOp | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def protocol_names(self) -> list[str]:
        """Each name once, in the member's preference order."""
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class ClassicGroup:
    def __init__(self, group_id: str, state: GroupState, now_ms: int, *, generation: int = 0,
                 protocol_type: str | None = None, protocol_name: str | None = None,
                 leader_id: str | None = None, current_state_timestamp_ms: int | None = None):
        self.group_id = group_id
        self.state = state
        self.previous_state: GroupState | None = None
        self.current_state_timestamp_ms = now_ms if current_state_timestamp_ms is None \
            else current_state_timestamp_ms
        self.generation = generation
        self.protocol_type = protocol_type or None
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        # Set when a member joins during the initial delay, so the delay is extended.
        self.new_member_added = False
        # None: unknown (not a "consumer" group, or a subscription we could not parse).
        self.subscribed_topics: frozenset[str] | None = None

    # ------------------------------------------------------------ state

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ------------------------------------------------------------ members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ClassicGroupMember:
        return self.members[member_id]

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's `ClassicGroup.validateMember`: fencing by instance id first, then membership."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                log.info("[group=%s] member %s with instance id %s is fenced by %s",
                         self.group_id, member_id, group_instance_id, existing)
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def add(self, member: ClassicGroupMember, parked: Parked | None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise IllegalTransition(f"static member {member.group_instance_id} is already in "
                                        f"group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.awaiting_join = parked
        if parked is not None:
            self.num_awaiting_join += 1
        if self.leader_id is None:
            self.leader_id = member.member_id
        discard_member_id(self.pending_join_members, member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self.supported_protocols.subtract(removed.protocol_names())
            if removed.is_awaiting_join:
                self.num_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        discard_member_id(self.pending_join_members, member_id)
        discard_member_id(self.pending_sync_members, member_id)

    def update_member(self, member: ClassicGroupMember, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, parked: Parked | None) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = interned_names(protocols)
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = shared_int(rebalance_timeout_ms)
        member.session_timeout_ms = shared_int(session_timeout_ms)
        if parked is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif parked is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.awaiting_join = parked

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> tuple[ClassicGroupMember, ClassicGroupMember]:
        """Give a static member a new member id; returns (old, new). The caller fences the old."""
        old = self.members.pop(old_member_id)
        if old.is_awaiting_join:
            self.num_awaiting_join -= 1
        new = ClassicGroupMember(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                                 old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                                 old.protocols, old.assignment)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return old, new

    def add_pending_member(self, member_id: str) -> None:
        self.pending_join_members.add(member_id)

    def take_join(self, member: ClassicGroupMember) -> Parked | None:
        """Detach the member's parked JoinGroup so the caller can answer it."""
        parked = member.awaiting_join
        if parked is not None:
            member.awaiting_join = None
            self.num_awaiting_join -= 1
        return parked

    @staticmethod
    def take_sync(member: ClassicGroupMember) -> Parked | None:
        parked = member.awaiting_sync
        member.awaiting_sync = None
        return parked

    # ------------------------------------------------------------ protocols

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return protocol_type != "" and len(protocol_names) > 0
        return (self.protocol_type == protocol_type
                and any(self.supported_protocols[name] == len(self.members) for name in protocol_names))

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        if not self.members:
            raise IllegalTransition(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        # Counter keeps first-vote order, and max() returns the first of equal counts.
        return max(votes, key=votes.__getitem__)

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == "consumer"

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != "consumer":
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                log.warning("[group=%s] cannot parse the consumer subscription of member %s; "
                            "treating the group as subscribed to every topic", self.group_id, m.member_id)
                return None
            topics.update(parsed)
        return frozenset(topics)


def discard_member_id(ids: set[str], member_id: str) -> None:
    ids.discard(member_id)
    if not ids:
        # A set emptied one id at a time keeps its grown table for good; clear() gives
        # it back. Every group empties its pending sets this way.
        ids.clear()


@functools.lru_cache(maxsize=64)
def shared_int(value: int) -> int:
    """One object per distinct timeout: CPython caches no int above 256, so every decoded
    request brings its own, and thousands of members repeat a few values."""
    return value


def interned_names(protocols: Protocols) -> Protocols:
    return tuple((sys.intern(name), metadata) for name, metadata in protocols)
