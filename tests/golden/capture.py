"""Capture the request frames real clients send, for the golden tests.

    .venv/bin/python -m tests.golden.capture [--out tests/golden] [--timeout 20]

A loopback server on 127.0.0.1 (free port) plays a one-broker cluster with one topic:
it answers ApiVersions (our ranges), Metadata, FindCoordinator, JoinGroup (v4+ first
with MEMBER_ID_REQUIRED, as Kafka does), SyncGroup (hands back the leader's assignment),
Heartbeat, OffsetFetch (nothing committed), OffsetCommit, LeaveGroup, ListGroups,
DescribeGroups and DeleteGroups, using the protocol package itself. Anything else (Fetch,
ListOffsets) closes the connection, as kgc does without an upstream.

Clients, one after another, each bounded by `--timeout` seconds:
- kafka-python `KafkaConsumer` with a group: subscribe, poll, commit, close;
- aiokafka `AIOKafkaConsumer` with a group: the same;
- confluent-kafka `Consumer` with a group: the same; then its `AdminClient`: list,
  describe and delete groups.

The first frame of each (api, version, client) for an API kgc serves is written whole
(size prefix included) as `<api>_request_v<N>_<client>.bin` (Tansu's naming).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kafka.protocol.api_key import ApiKey

from protocol.answers.local import api_versions_response
from protocol.api_keys import LOCAL_VERSIONS
from protocol.error_responses import api_versions_error_response, error_response
from protocol.errors import ErrorCode
from protocol.framing import FrameError, FrameReader
from protocol.headers import HeaderError, parse_request_header
from protocol.messages import MalformedRequest, decode_request, encode_response, response_class

log = logging.getLogger("golden.capture")

NODE_ID = 1
TOPIC = "golden-topic"
CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka")
# Forwarded APIs a real cluster lists; without them the clients assume an ancient broker.
FORWARDED_RANGES = {
    ApiKey.Produce: (3, 11),
    ApiKey.Fetch: (4, 16),
    ApiKey.ListOffsets: (1, 9),
    ApiKey.OffsetForLeaderEpoch: (2, 4),
}


def snake_name(api_key: int) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", ApiKey(api_key).name).lower()


def frame_file_name(api_key: int, version: int, client: str) -> str:
    return f"{snake_name(api_key)}_request_v{version}_{client}.bin"


def frame_file_pattern(api_key: int, client: str) -> str:
    """Glob for a client's frames of one API, any version."""
    return f"{snake_name(api_key)}_request_v*_{client}.bin"


class Unserved(Exception):
    pass


class CaptureBroker:
    """Answers just enough for a consumer group to form; records every request frame."""

    def __init__(self):
        self.client = "unknown"  # which client the driver is running now
        self.frames: dict[tuple[int, int, str], bytes] = {}
        self.seen: set[tuple[int, str]] = set()
        self.port = 0
        self._member_ids = 0
        self._connections: set[asyncio.Task] = set()

    def seen_all(self, client: str, *api_keys: int) -> bool:
        return all((api_key, client) in self.seen for api_key in api_keys)

    async def serve(self, ready: threading.Event, stop: asyncio.Event) -> None:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        async with server:
            await stop.wait()
            for task in self._connections:
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(asyncio.current_task())
        frames = FrameReader(16 * 1024 * 1024)
        try:
            while data := await reader.read(65536):
                for payload in frames.feed(data):
                    writer.write(self._answer(payload))
                await writer.drain()
        except (FrameError, HeaderError, MalformedRequest, Unserved, ConnectionError) as exc:
            log.info("closing a %s connection: %s", self.client, exc)
        finally:
            self._connections.discard(asyncio.current_task())
            writer.close()

    def _answer(self, payload: bytes) -> bytes:
        header = parse_request_header(payload)
        api_key, version = header.api_key, header.api_version
        self.seen.add((api_key, self.client))
        if api_key not in LOCAL_VERSIONS:
            # as kgc does without an upstream: a later response must not take this one's place
            raise Unserved(f"{_name(api_key)} v{version} is not served here")
        self.frames.setdefault((api_key, version, self.client), len(payload).to_bytes(4, "big") + payload)
        if api_key == ApiKey.ApiVersions and version > LOCAL_VERSIONS[ApiKey.ApiVersions][1]:
            return encode_response(header, api_versions_error_response(), 0)
        request = decode_request(api_key, version, payload[header.header_len:])
        log.info("%s sent %s v%d", self.client, _name(api_key), version)
        return encode_response(header, self._respond(api_key, version, request), version)

    def _respond(self, api_key: int, version: int, request):
        answers: dict[int, Callable] = {
            ApiKey.ApiVersions: self._api_versions,
            ApiKey.Metadata: self._metadata,
            ApiKey.FindCoordinator: self._find_coordinator,
            ApiKey.JoinGroup: self._join_group,
            ApiKey.SyncGroup: self._sync_group,
            ApiKey.OffsetFetch: self._offset_fetch,
            ApiKey.ListGroups: self._list_groups,
            ApiKey.DescribeGroups: self._describe_groups,
        }
        answer = answers.get(api_key)
        if answer is None:
            # Heartbeat, OffsetCommit, LeaveGroup, DeleteGroups, OffsetDelete: all fine
            return error_response(api_key, version, request, ErrorCode.NONE)
        return answer(response_class(api_key), version, request)

    def _api_versions(self, cls, v, request):
        return api_versions_response(v, {**FORWARDED_RANGES, **LOCAL_VERSIONS})

    def _metadata(self, cls, v, request):
        topic_cls = cls.MetadataResponseTopic
        names = [t.name for t in request.topics] if request.topics else [TOPIC]
        topics = [topic_cls(version=v, error_code=0, name=name, is_internal=False, authorized_operations=None,
                            partitions=[topic_cls.MetadataResponsePartition(
                                version=v, error_code=0, partition_index=0, leader_id=NODE_ID, leader_epoch=0,
                                replica_nodes=[NODE_ID], isr_nodes=[NODE_ID], offline_replicas=[])])
                  for name in names]
        return cls(version=v, throttle_time_ms=0, cluster_id="golden", controller_id=NODE_ID,
                   authorized_operations=None, error_code=0, topics=topics,
                   brokers=[cls.MetadataResponseBroker(version=v, node_id=NODE_ID, host="127.0.0.1",
                                                       port=self.port, rack=None)])

    def _find_coordinator(self, cls, v, request):
        if v < 4:
            return cls(version=v, throttle_time_ms=0, error_code=0, error_message=None, node_id=NODE_ID,
                       host="127.0.0.1", port=self.port)
        return cls(version=v, throttle_time_ms=0, coordinators=[
            cls.Coordinator(version=v, key=key, node_id=NODE_ID, host="127.0.0.1", port=self.port, error_code=0,
                            error_message=None)
            for key in request.coordinator_keys])

    def _join_group(self, cls, v, request):
        if v >= 4 and not request.member_id and request.group_instance_id is None:
            # KIP-394: a dynamic member's first join gets its id and must join again with it
            return cls(version=v, throttle_time_ms=0, error_code=ErrorCode.MEMBER_ID_REQUIRED, generation_id=-1,
                       protocol_type=None, protocol_name=None if v >= 7 else "", leader="",
                       member_id=self._new_member_id(request), members=[])
        member_id = request.member_id or self._new_member_id(request)
        protocol = request.protocols[0]
        return cls(version=v, throttle_time_ms=0, error_code=0, generation_id=1,
                   protocol_type=request.protocol_type, protocol_name=protocol.name, leader=member_id,
                   skip_assignment=False, member_id=member_id, members=[
                       cls.JoinGroupResponseMember(version=v, member_id=member_id,
                                                   group_instance_id=request.group_instance_id,
                                                   metadata=protocol.metadata)])

    def _sync_group(self, cls, v, request):
        mine = [a.assignment for a in request.assignments if a.member_id == request.member_id]
        return cls(version=v, throttle_time_ms=0, error_code=0, protocol_type=request.protocol_type,
                   protocol_name=request.protocol_name, assignment=mine[0] if mine else b"")

    def _offset_fetch(self, cls, v, request):
        if v >= 8:
            group_cls = cls.OffsetFetchResponseGroup
            return cls(version=v, throttle_time_ms=0, groups=[
                group_cls(version=v, group_id=group.group_id, error_code=0, topics=[
                    group_cls.OffsetFetchResponseTopics(version=v, name=topic.name, partitions=[
                        group_cls.OffsetFetchResponseTopics.OffsetFetchResponsePartitions(
                            version=v, partition_index=index, committed_offset=-1, committed_leader_epoch=-1,
                            metadata="", error_code=0)
                        for index in topic.partition_indexes])
                    for topic in group.topics or []])
                for group in request.groups])
        topic_cls = cls.OffsetFetchResponseTopic
        return cls(version=v, throttle_time_ms=0, error_code=0, topics=[
            topic_cls(version=v, name=topic.name, partitions=[
                topic_cls.OffsetFetchResponsePartition(version=v, partition_index=index, committed_offset=-1,
                                                       committed_leader_epoch=-1, metadata="", error_code=0)
                for index in topic.partition_indexes])
            for topic in request.topics or []])

    def _list_groups(self, cls, v, request):
        return cls(version=v, throttle_time_ms=0, error_code=0, groups=[
            cls.ListedGroup(version=v, group_id="golden-confluent-kafka", protocol_type="consumer",
                            group_state="Empty", group_type="classic")])

    def _describe_groups(self, cls, v, request):
        return cls(version=v, throttle_time_ms=0, groups=[
            cls.DescribedGroup(version=v, error_code=0, error_message=None, group_id=group_id, group_state="Empty",
                               protocol_type="consumer", protocol_data="", members=[], authorized_operations=None)
            for group_id in request.groups])

    def _new_member_id(self, request) -> str:
        self._member_ids += 1
        return f"{self.client}-member-{self._member_ids}"


def _name(api_key: int) -> str:
    return ApiKey(api_key).name


def _until(deadline: float, done: Callable[[], bool], step: Callable[[], None]) -> None:
    while time.monotonic() < deadline and not done():
        step()


def run_kafka_python(broker: CaptureBroker, bootstrap: str, timeout_s: float) -> None:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    group = "golden-kafka-python"
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=group,
                             enable_auto_commit=False, session_timeout_ms=10_000, heartbeat_interval_ms=500,
                             request_timeout_ms=5_000, reconnect_backoff_max_ms=500)
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + timeout_s
        _until(deadline, lambda: broker.seen_all("kafka-python", ApiKey.SyncGroup, ApiKey.OffsetFetch,
                                                 ApiKey.Heartbeat),
               lambda: consumer.poll(timeout_ms=200))
        consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(5, "golden", -1)})
    finally:
        consumer.close(autocommit=False)


def run_aiokafka(broker: CaptureBroker, bootstrap: str, timeout_s: float) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def scenario() -> None:
        group = "golden-aiokafka"
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group, client_id=group,
                                    enable_auto_commit=False, session_timeout_ms=10_000,
                                    heartbeat_interval_ms=500, request_timeout_ms=5_000)
        await asyncio.wait_for(consumer.start(), timeout_s)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and not broker.seen_all(
                    "aiokafka", ApiKey.SyncGroup, ApiKey.OffsetFetch, ApiKey.Heartbeat):
                await consumer.getmany(timeout_ms=200)
            await asyncio.wait_for(consumer.commit({TopicPartition(TOPIC, 0): 5}), 5)
        finally:
            await asyncio.wait_for(consumer.stop(), 10)

    asyncio.run(scenario())


def run_confluent_kafka(broker: CaptureBroker, bootstrap: str, timeout_s: float) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    group = "golden-confluent-kafka"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": group,
                         "enable.auto.commit": False, "session.timeout.ms": 10_000,
                         "heartbeat.interval.ms": 500, "socket.timeout.ms": 5_000})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + timeout_s
        _until(deadline, lambda: broker.seen_all("confluent-kafka", ApiKey.SyncGroup, ApiKey.OffsetFetch,
                                                 ApiKey.Heartbeat),
               lambda: consumer.poll(0.2))
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
    finally:
        consumer.close()

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": f"{group}-admin"})
    admin.list_consumer_groups(request_timeout=5).result(timeout=timeout_s)
    for future in admin.describe_consumer_groups([group], request_timeout=5).values():
        future.result(timeout=timeout_s)
    for future in admin.delete_consumer_groups([group], request_timeout=5).values():
        future.result(timeout=timeout_s)


RUNNERS = {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent-kafka": run_confluent_kafka}


def capture(out_dir: Path, timeout_s: float, clients: tuple[str, ...] = CLIENTS) -> list[Path]:
    broker = CaptureBroker()
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(broker.serve(ready, stop))

    server = threading.Thread(target=serve, name="capture-broker", daemon=True)
    server.start()
    if not ready.wait(10):
        raise RuntimeError("capture broker did not start")
    bootstrap = f"127.0.0.1:{broker.port}"
    try:
        for client in clients:
            broker.client = client
            started = time.monotonic()
            try:
                RUNNERS[client](broker, bootstrap, timeout_s)
            except Exception:
                log.exception("%s stopped early; keeping what it sent", client)
            log.info("%s done in %.1f s", client, time.monotonic() - started)
    finally:
        loop.call_soon_threadsafe(stop.set)
        server.join(10)

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for (api_key, version, client), frame in sorted(broker.frames.items()):
        path = out_dir / frame_file_name(api_key, version, client)
        path.write_bytes(frame)
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per client")
    parser.add_argument("--client", action="append", choices=CLIENTS, help="only these clients")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for path in capture(args.out, args.timeout, tuple(args.client or CLIENTS)):
        print(path)


if __name__ == "__main__":
    main()
