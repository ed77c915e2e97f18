"""Generated histories of a KIP-848 group: members join, heartbeat (acknowledging what they
were told to give up), leave, crash, and topics grow, in any order, on a manual clock.

Members behave as clients do: each holds exactly the assignment its last answer gave it,
sends what it holds, and after FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID drops everything
and rejoins at epoch 0 under the same id. A crashed member stops and holds nothing (a
real client stops consuming when its session is lost). Whatever the history:
- no two members ever hold the same partition, neither as clients nor in the
  coordinator's view (assigned or still being revoked);
- once everyone heartbeats for a while, the group is Stable and every partition is held
  by exactly one live member, within one partition of each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ErrorCode
from tests.support.group_context import GroupTestContext

REJOIN = {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID}
TOPICS = ["t", "u"]


@dataclass
class Client:
    member_id: str
    epoch: int = 0
    owned: dict[str, set[int]] = field(default_factory=dict)
    live: bool = True

    def heartbeat(self, ctx: GroupTestContext) -> None:
        if self.epoch == 0:
            call = ctx.consumer_heartbeat(member_id=self.member_id, subscribe=TOPICS)
        else:
            call = ctx.consumer_heartbeat(member_id=self.member_id, member_epoch=self.epoch, owned=self.owned)
        if call.error in REJOIN:
            self.epoch, self.owned = 0, {}
            call = ctx.consumer_heartbeat(member_id=self.member_id, subscribe=TOPICS)
        assert call.error == 0, call
        self.epoch = call.epoch
        if call.assignment is not None:
            self.owned = call.assignment


def clients_disjoint(clients: list[Client]) -> None:
    seen: dict = {}
    for c in clients:
        for topic, partitions in c.owned.items():
            for p in partitions:
                assert (topic, p) not in seen, f"{topic}-{p} held by {seen[topic, p]} and {c.member_id}"
                seen[topic, p] = c.member_id


def coordinator_disjoint(ctx: GroupTestContext) -> None:
    group = ctx.shard.consumer_groups.get("g")
    if group is None:
        return
    seen: dict = {}
    for member in group.members.values():
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    assert (topic_id, p) not in seen, (topic_id, p, seen[topic_id, p], member.member_id)
                    seen[topic_id, p] = member.member_id


ops = st.lists(st.one_of(
    st.tuples(st.just("join")),
    st.tuples(st.just("heartbeat"), st.integers(0, 9)),
    st.tuples(st.just("leave"), st.integers(0, 9)),
    st.tuples(st.just("crash"), st.integers(0, 9)),
    st.tuples(st.just("grow"), st.integers(1, 3)),
    st.tuples(st.just("tick"), st.integers(100, 3_000)),
), max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_no_partition_ever_has_two_owners_and_the_group_settles(history):
    ctx = GroupTestContext(consumer_session_timeout_ms=45_000)
    partitions = {"t": 6, "u": 2}
    ctx.set_topics(**partitions)
    clients: list[Client] = []
    for op in history:
        live = [c for c in clients if c.live]
        match op:
            case ("join",):
                client = Client(f"m{len(clients)}")
                clients.append(client)
                client.heartbeat(ctx)
            case ("heartbeat", i) if live:
                live[i % len(live)].heartbeat(ctx)
            case ("leave", i) if live:
                client = live[i % len(live)]
                assert ctx.consumer_heartbeat(member_id=client.member_id, member_epoch=-1).error in (0, *REJOIN)
                client.live, client.owned = False, {}
            case ("crash", i) if live:
                client = live[i % len(live)]
                client.live, client.owned = False, {}
            case ("grow", n):
                partitions["t"] += n
                ctx.set_topics(**partitions)
            case ("tick", ms):
                for c in live:   # live members keep their sessions
                    c.heartbeat(ctx)
                ctx.sleep(ms)
        clients_disjoint(clients)
        coordinator_disjoint(ctx)

    live = [c for c in clients if c.live]
    for _ in range(10):         # crashed members' sessions end; live ones keep theirs
        for c in live:
            c.heartbeat(ctx)
        ctx.sleep(5_000)
    for _ in range(6):
        for c in live:
            c.heartbeat(ctx)
            clients_disjoint(clients)
            coordinator_disjoint(ctx)
    if not live:
        return
    group = ctx.consumer_group()
    assert group.state == "Stable", {m.member_id: (m.member_epoch, m.state) for m in group.members.values()}
    held = sorted((t, p) for c in live for t, ps in c.owned.items() for p in ps)
    assert held == sorted((t, p) for t, n in partitions.items() for p in range(n))
    sizes = [sum(len(ps) for ps in c.owned.values()) for c in live]
    assert max(sizes) - min(sizes) <= 1
