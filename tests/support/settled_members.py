"""Members (tests/support/clients.py) of one group on a topic of PARTITIONS partitions: when
they have settled (kgc says Stable with exactly them, and they own every partition once),
and closing those still running."""

from __future__ import annotations

from tests.support.admin import describe_group, member_assignments
from tests.support.clients import Member, wait_until

PARTITIONS = 6
FORM_TIMEOUT_S = 30


def owns_all_partitions(members: list[Member]) -> bool:
    assignments = [m.assignment for m in members]
    return all(assignments) and sorted(p for a in assignments for p in a) == list(range(PARTITIONS))


def wait_settled(kgc, group: str, members: list[Member]) -> float:
    """Until kgc says Stable with exactly these members and they own every partition once."""
    def settled() -> bool:
        if not owns_all_partitions(members):
            return False
        description = describe_group(kgc.bootstrap, group)
        return (description["group_state"] == "Stable"
                and member_assignments(description) == {m.name: m.assignment for m in members})
    return wait_until(settled, FORM_TIMEOUT_S, lambda: {m.name: m.assignment for m in members}, members)


def close_all(members: list[Member]) -> None:
    for m in members:
        if m.error is None and m.running:
            m.close()
