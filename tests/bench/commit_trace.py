"""Where the time of one synchronous OffsetCommit goes inside kgc, stage by stage.

kgc runs in this process (uvloop, a fresh data dir, the given fsync policy) with its
functions wrapped to stamp `perf_counter_ns` at each stage boundary; a client in a
child process (a blocking socket, no event loop) keeps exactly one OffsetCommit of K
partitions in flight, so each request's stamps form one timeline. The medians over
all requests are printed per stage, beside the client's round trip: what is left is
the kernel's share (loopback, waking each side).

    .venv/bin/python -m tests.bench.commit_trace --fsync always --seconds 3
    .venv/bin/python -m tests.bench.commit_trace --fsync never --version 3   # aiokafka's OffsetCommit

By default the client sends OffsetCommit v7 (the bench workloads' own encoder, a new
offset each time); `--version N` sends kafka-python's encoding of vN instead (the same
offset each time), so the versions real clients send can be compared: aiokafka 0.14
sends v3, confluent-kafka v9.

A benchmark tool, not a test: the wrappers cost a few microseconds of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import multiprocessing
import socket
import statistics
import struct
import sys
import tempfile
import time

STAGES = [
    ("decode", "received", "decoded"),
    ("route to the group's partition", "decoded", "decide_start"),
    ("decide (the group's op)", "decide_start", "decided"),
    ("serialize + replay", "decided", "append_start"),
    ("encode the batch", "append_start", "submit"),
    ("inline write + release (never) / queue the batch (always)", "submit", "handed"),
    ("to the writer's start: the rest of this loop turn", "handed", "start"),
    ("hand-off to the writer thread (thread switch; ~0 when fsynced on the loop)", "start", "thread_start"),
    ("write", "thread_start", "written"),
    ("fsync", "written", "fsynced"),
    ("wake-up of the loop (~0 when fsynced on the loop)", "fsynced", "group_done"),
    ("release: durable callbacks to the response", "group_done", "encode_start"),
    ("encode the response", "encode_start", "encoded"),
    ("to the socket write", "encoded", "socket_write"),
    ("socket write", "socket_write", "sent"),
]


def _versioned_frames(version: int, partitions: int):
    """`(correlation id, offset) -> frame` for OffsetCommit `version`, encoded once by
    kafka-python (the offset stays that of the first frame)."""
    from kafka.protocol.consumer.group import OffsetCommitRequest

    from coordinator.bench import messages
    from coordinator.bench.wire import Template

    cls = OffsetCommitRequest[version]
    topic_cls = cls.OffsetCommitRequestTopic
    partition_cls = topic_cls.OffsetCommitRequestPartition
    request = cls(group_id="trace-group", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                  retention_time_ms=-1, topics=[topic_cls(name="trace-topic", partitions=[
                      partition_cls(partition_index=p, committed_offset=1, committed_leader_epoch=-1,
                                    commit_timestamp=-1, committed_metadata="") for p in range(partitions)])])
    template = Template(messages.encode(request, 0))
    return lambda correlation_id, _offset: template.frame(correlation_id)


def _client(port: int, partitions: int, seconds: float, version: int | None, out) -> None:
    from coordinator.bench import messages

    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if version is None:
        frame_of = messages.OffsetCommitEncoder("trace-group", "trace-topic", partitions).frame
    else:
        frame_of = _versioned_frames(version, partitions)
    rtts = []
    end = time.perf_counter() + seconds
    offset = 0
    while time.perf_counter() < end:
        offset += 1
        frame = frame_of(offset & 0x7FFFFFFF, offset)
        started = time.perf_counter_ns()
        sock.sendall(frame)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        _recv(sock, size)
        rtts.append(time.perf_counter_ns() - started)
    sock.close()
    out.send(rtts)


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("kgc closed the connection")
        buf += chunk
    return buf


def _instrument(timelines: list[dict[str, int]]) -> None:
    """Wrap the commit path's functions to stamp the current request's timeline."""
    from coordinator.net import codec, connection
    from coordinator.runtime import partition
    from coordinator.service import group_coordinator
    from storage import file_store, group_commit, partition_log

    now = time.perf_counter_ns
    current: dict[str, int] = {}

    def stamp(name: str) -> None:
        current.setdefault(name, now())

    def around(owner, name: str, before: str | None, after: str | None) -> None:
        original = getattr(owner, name, None)
        if original is None:
            # A tree without this step (an older writer) shows no stage for it; said aloud,
            # so a step that moved is not mistaken for one that is gone.
            print(f"not traced: {owner.__name__}.{name}", file=sys.stderr)
            return
        static = isinstance(inspect.getattr_static(owner, name), staticmethod)

        def wrapped(*args, **kw):
            if before:
                stamp(before)
            try:
                return original(*args, **kw)
            finally:
                if after:
                    stamp(after)
        setattr(owner, name, staticmethod(wrapped) if static else wrapped)

    received = connection.KafkaConnection.data_received

    def data_received(self, data):
        current.clear()
        stamp("received")
        received(self, data)
    connection.KafkaConnection.data_received = data_received
    write = connection.KafkaConnection._write

    def socket_write(self, ready):
        if ready and "socket_write" not in current:
            stamp("socket_write")
            write(self, ready)
            stamp("sent")
            timelines.append(dict(current))
        else:
            write(self, ready)
    connection.KafkaConnection._write = socket_write
    around(codec, "decode", None, "decoded")
    around(group_coordinator, "_offset_commit", "decide_start", "decided")
    around(file_store.FileLogStore, "append", "append_start", None)
    around(group_commit.GroupCommitWriter, "submit", "submit", "handed")
    around(group_commit.GroupCommitWriter, "_start", "start", None)
    around(group_commit.GroupCommitWriter, "_write_group", "thread_start", None)
    around(partition_log.PartitionLog, "write_group", None, "written")
    around(partition_log.PartitionLog, "fsync", None, "fsynced")
    around(group_commit.GroupCommitWriter, "_group_done", "group_done", None)
    around(codec, "encode_response", "encode_start", "encoded")
    assert partition  # imported so the runtime is the one wrapped above


async def _serve_and_trace(fsync: str, partitions: int, seconds: float,
                           version: int | None) -> tuple[list[dict[str, int]], list[int]]:
    from coordinator.app import KgcApp
    from coordinator.settings import ServerConfig
    from tests.support.kgc import TEST_GROUP_CONFIG

    timelines: list[dict[str, int]] = []
    _instrument(timelines)
    with tempfile.TemporaryDirectory(prefix="kgc-trace-") as data_dir:
        app = KgcApp(ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, data_dir=data_dir, fsync=fsync))
        await app.start()
        await app.runtime.wait_loaded()
        try:
            receiver, sender = multiprocessing.Pipe(duplex=False)
            child = multiprocessing.get_context("spawn").Process(
                target=_client, args=(app.port, partitions, seconds, version, sender))
            child.start()
            if not await asyncio.to_thread(receiver.poll, seconds + 30):
                raise TimeoutError(f"the client sent no round trips (exit code {child.exitcode})")
            rtts = receiver.recv()
            await asyncio.to_thread(child.join, 30)
        finally:
            await app.stop()
    return timelines[len(timelines) // 10:], rtts[len(rtts) // 10:]   # the first tenth warms up


def main(argv: list[str] | None = None) -> None:
    import uvloop

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fsync", default="always")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--version", type=int, default=None,
                        help="OffsetCommit version, encoded by kafka-python (default: v7, the bench encoder)")
    args = parser.parse_args(argv)
    timelines, rtts = uvloop.run(_serve_and_trace(args.fsync, args.partitions, args.seconds, args.version))
    version = "v7" if args.version is None else f"v{args.version}"
    print(f"fsync {args.fsync}, 1 client, OffsetCommit {version} of {args.partitions} partitions, {len(rtts)} commits; "
          "medians in microseconds\n")
    print("| stage | median µs |")
    print("|---|---:|")
    total = 0.0
    for name, start, end in STAGES:
        spans = [t[end] - t[start] for t in timelines if start in t and end in t]
        if len(spans) < len(timelines) // 2:
            continue
        median = statistics.median(spans) / 1000
        total += median
        print(f"| {name} | {median:.1f} |")
    inside = statistics.median(t["sent"] - t["received"] for t in timelines) / 1000
    rtt = statistics.median(rtts) / 1000
    print(f"| **inside kgc, received to sent** | **{inside:.1f}** |")
    synced = [t for t in timelines if "fsynced" in t]
    if len(synced) >= len(timelines) // 2:
        # Per request, so that a disk whose fsync time swings from one second to the next
        # (a shared one) does not hide what kgc itself adds around it.
        around = statistics.median(t["sent"] - t["received"] - (t["fsynced"] - t["written"]) for t in synced) / 1000
        after = statistics.median(t["sent"] - t["fsynced"] for t in synced) / 1000
        print(f"| inside kgc less its fsync (per request) | {around:.1f} |")
        print(f"| of which from the fsync's end to sent | {after:.1f} |")
    print(f"| client round trip | {rtt:.1f} |")
    print(f"| kernel and client: loopback, waking each side | {rtt - inside:.1f} |")


if __name__ == "__main__":
    main()
