"""How many of kgc's source files, and how many calls between them, one request crosses:
JoinGroup, OffsetCommit and ConsumerGroupHeartbeat, socket to answer, measured.

kgc runs in this process (standalone, a fresh data dir, `fsync always`, no initial
rebalance delay) with a profile hook on every thread; a blocking client thread sends each
request once to warm every lazy path, then once more while the hook records. Counted:
the kgc source files (`coordinator/`, `storage/`, `protocol/`) whose Python functions ran
for the recorded request, and the hops: distinct (caller, callee) function pairs where
the caller's nearest kgc frame lies in another file. Timers of other groups and the
periodic tasks do not run in the window (their intervals are long); a function kgc calls
through a C library (a callback from the loop) counts from its nearest kgc caller, or
as an entry with none.

    .venv/bin/python -m tests.bench.request_path            # counts per request
    .venv/bin/python -m tests.bench.request_path --list     # and the files and hops

A development tool for the architecture document (docs/ARCHITECTURE.md, "Three requests"),
not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import tempfile
import threading
from pathlib import Path

from kafka.protocol.consumer.group import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)

from coordinator.probe import request_response
from protocol.consumer_group_messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

ROOT = Path(__file__).resolve().parents[2]
SOURCES = tuple(str(ROOT / d) + os.sep for d in ("coordinator", "storage", "protocol"))
EXCLUDED = (str(ROOT / "coordinator" / "bench") + os.sep,)


class Recorder:
    def __init__(self) -> None:
        self.on = False
        self.files: set[str] = set()
        self.hops: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def __call__(self, frame, event, arg):
        if not self.on or event != "call":
            return
        callee = _ours(frame.f_code.co_filename)
        if callee is None:
            return
        caller = frame.f_back
        while caller is not None and _ours(caller.f_code.co_filename) is None:
            caller = caller.f_back
        with self._lock:
            self.files.add(callee)
            if caller is not None and _ours(caller.f_code.co_filename) != callee:
                self.hops.add((_name(caller), _name(frame)))


def _ours(filename: str) -> str | None:
    if filename.startswith(SOURCES) and not filename.startswith(EXCLUDED):
        return os.path.relpath(filename, ROOT)
    return None


def _name(frame) -> str:
    return f"{_ours(frame.f_code.co_filename)}:{frame.f_code.co_name}"


# ConsumerProtocolSubscription v0: topics ["orders"], no user data.
SUBSCRIPTION = struct.pack(">hih6si", 0, 1, 6, b"orders", -1)


def _requests(group: str):
    join = JoinGroupRequest[5](group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                               member_id="", group_instance_id=f"{group}-static", protocol_type="consumer",
                               protocols=[JoinGroupRequest[5].JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)])
    topic = OffsetCommitRequest[8].OffsetCommitRequestTopic
    commit = OffsetCommitRequest[8](group_id=f"{group}-offsets", generation_id_or_member_epoch=-1, member_id="",
                                    group_instance_id=None, topics=[topic(name="orders", partitions=[
                                        topic.OffsetCommitRequestPartition(partition_index=p, committed_offset=42,
                                                                           committed_leader_epoch=-1,
                                                                           committed_metadata="")
                                        for p in range(3)])])
    heartbeat = ConsumerGroupHeartbeatRequest[0](group_id=f"{group}-848", member_id="m-" + group, member_epoch=0,
                                                 instance_id=None, rack_id=None, rebalance_timeout_ms=10_000,
                                                 subscribed_topic_names=["orders"], server_assignor=None,
                                                 topic_partitions=[])
    return {"JoinGroup": (join, JoinGroupResponse), "OffsetCommit": (commit, OffsetCommitResponse),
            "ConsumerGroupHeartbeat": (heartbeat, ConsumerGroupHeartbeatResponse)}


def measure() -> dict[str, Recorder]:
    from coordinator.app import KgcApp
    from coordinator.group.config import GroupConfig
    from coordinator.settings import ServerConfig

    recorders = {name: Recorder() for name in _requests("g")}
    current: list[Recorder] = [Recorder()]

    def hook(frame, event, arg):
        return current[0](frame, event, arg)

    threading.setprofile(hook)
    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Event, int]] = []
    started = threading.Event()

    def serve(data_dir: str) -> None:
        async def main() -> None:
            sys.setprofile(hook)
            config = ServerConfig(host="127.0.0.1", port=0, data_dir=data_dir, fsync="always",
                                  group=GroupConfig(initial_rebalance_delay_ms=0))
            app = KgcApp(config)
            await app.start()
            stop = asyncio.Event()
            running.append((asyncio.get_running_loop(), stop, app.port))
            started.set()
            await stop.wait()
            await app.stop()
        asyncio.run(main())

    with tempfile.TemporaryDirectory() as data_dir:
        server = threading.Thread(target=serve, args=(data_dir,), daemon=True)
        server.start()
        if not started.wait(30):
            raise SystemExit("kgc did not start")
        loop, stop, port = running[0]
        address = ("127.0.0.1", port)
        for request, response in _requests("warm").values():
            request_response(address, request, response, timeout_s=10)
        for name, (request, response) in _requests("traced").items():
            current[0] = recorders[name]
            recorders[name].on = True
            request_response(address, request, response, timeout_s=10)
            recorders[name].on = False
        current[0] = Recorder()
        loop.call_soon_threadsafe(stop.set)
        server.join(timeout=30)
    threading.setprofile(None)
    return recorders


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the files and hops of each request")
    args = parser.parse_args(argv)
    for name, recorder in measure().items():
        print(f"{name}: {len(recorder.files)} files, {len(recorder.hops)} hops")
        if args.list:
            for file in sorted(recorder.files):
                print(f"    {file}")
            for caller, callee in sorted(recorder.hops):
                print(f"    {caller} -> {callee}")


if __name__ == "__main__":
    main()
