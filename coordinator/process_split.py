"""Several kgc processes on one machine, over one local store (`kgc serve --processes N`).

One process runs every request on one event loop, so on one core. With `processes = N`,
`kgc serve` starts N processes (`coordinator.commands.processes`), and process i serves
every partition p with p % N == i: its groups, their log (the data dir's partition locks
keep two processes off one partition) and their state. It is what the replicated store's
ownership group decides at run time, decided once from the process's index, so the
addressing is the same (DESIGN.md, "Growing past one machine"):

- Process i is coordinator node `node_id + i` on `port + i`. FindCoordinator, asked of
  any process, names the owner of the group's partition; Metadata lists every process's
  node (clients keep only brokers Metadata lists).
- A group request that reaches a process that does not own the group is answered
  NOT_COORDINATOR, and the client asks FindCoordinator again, as with several brokers.
- Every process opens the listeners for the upstream brokers on the same ports
  (SO_REUSEPORT): the kernel spreads clients' connections over the processes, and every
  process's Metadata names the same address for each broker, whichever one answers.
"""

from __future__ import annotations

from coordinator.partitioning import partition_for
from coordinator.replicated.ownership import Instance


class ProcessSplit:
    """Which process owns which partition: fixed for the life of the processes."""

    def __init__(self, index: int, instances: tuple[Instance, ...], num_partitions: int):
        if not 0 <= index < len(instances):
            raise ValueError(f"process {index} of {len(instances)}")
        self.index = index
        self.members = instances
        self.me = instances[index]
        self.num_partitions = num_partitions
        self.owners = {p: instances[p % len(instances)] for p in range(num_partitions)}
        self.owned = frozenset(p for p in range(num_partitions) if p % len(instances) == index)

    @classmethod
    def of(cls, index: int, count: int, num_partitions: int, *, node_id: int, host: str, port: int,
           broker_port_base: int, broker_ports: tuple[tuple[int, int], ...]) -> ProcessSplit:
        """Process i of `count`: node `node_id + i` on `host:port + i`; the broker listeners shared."""
        instances = tuple(Instance(node_id + i, host, port + i, broker_port_base, broker_ports) for i in range(count))
        return cls(index, instances, num_partitions)

    def serving(self) -> bool:
        return True         # no lease: nothing moves while the processes run

    def holds(self, partition: int) -> bool:
        return partition in self.owned

    def owner(self, group_id: str) -> Instance:
        return self.owners[partition_for(group_id, self.num_partitions)]

    def broker_instance(self, node_id: int) -> Instance | None:
        return None         # every process listens for every broker, on the same port
