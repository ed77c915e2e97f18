"""The address rewriters against kafka-python: generated responses at every version.

Each case encodes an upstream response with kafka-python, rewrites it, and compares the
result byte for byte with kafka-python's encoding of the response we expect (addresses
replaced, kgc's node appended to Metadata), then decodes it as a client would.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import FindCoordinatorResponse, MetadataResponse
from kafka.protocol.producer import ProduceResponse

from coordinator.gateway.rewrite import (
    Broker,
    MalformedResponse,
    rewrite_describe_cluster,
    rewrite_fetch,
    rewrite_find_coordinator,
    rewrite_metadata,
    rewrite_produce,
)
from protocol import wire

KGC_HOST = "kgc.example"
COORDINATOR = Broker(2_000_000_000, KGC_HOST, 9092)
CORRELATION_ID = 4242


def address_for(node_id: int) -> tuple[str, int]:
    return KGC_HOST, 20_000 + node_id


def encode(response) -> bytes:
    response.with_header(correlation_id=CORRELATION_ID)
    return bytes(response.encode(header=True))     # bytes, as kgc reads frames (kafka-python: bytearray)


hosts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=24)
racks = st.none() | hosts
node_ids = st.integers(0, 5000)
ports = st.integers(1, 65535)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
error_codes = st.integers(-1, 120)
messages = st.none() | st.text(max_size=20)
settings_per_version = settings(max_examples=10, deadline=None)


# -- Metadata ---------------------------------------------------------------------------

def metadata_brokers(version, brokers):
    return [MetadataResponse.MetadataResponseBroker(version=version, node_id=n, host=h, port=p, rack=r)
            for n, h, p, r in brokers]


@st.composite
def metadata_topics(draw, version):
    topics = []
    for name in draw(st.lists(st.text(min_size=1, max_size=12), max_size=3, unique=True)):
        partitions = [
            MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                version=version, error_code=draw(error_codes), partition_index=i, leader_id=draw(node_ids),
                leader_epoch=draw(int32s), replica_nodes=draw(st.lists(node_ids, max_size=3)),
                isr_nodes=draw(st.lists(node_ids, max_size=3)), offline_replicas=draw(st.lists(node_ids, max_size=2)))
            for i in range(draw(st.integers(0, 3)))]
        topics.append(MetadataResponse.MetadataResponseTopic(
            version=version, error_code=draw(error_codes), name=name, topic_id=uuid.UUID(int=draw(st.integers(0, 2**128 - 1))),
            is_internal=draw(st.booleans()), partitions=partitions, authorized_operations=None))
    return topics


@pytest.mark.parametrize("version", range(14))
@settings_per_version
@given(data=st.data())
def test_metadata_points_every_broker_at_kgc_and_lists_the_coordinator(version, data):
    upstream = data.draw(st.lists(st.tuples(node_ids, hosts, ports, racks), max_size=5, unique_by=lambda b: b[0]))
    if version == 0:
        upstream = [(n, h, p, None) for n, h, p, _ in upstream]
    common = dict(version=version, throttle_time_ms=data.draw(int32s), cluster_id=data.draw(st.none() | hosts),
                  controller_id=data.draw(node_ids), topics=data.draw(metadata_topics(version)),
                  authorized_operations=None, error_code=data.draw(error_codes))
    payload = encode(MetadataResponse(brokers=metadata_brokers(version, upstream), **common))

    rewritten, seen = rewrite_metadata(payload, version, address_for, (COORDINATOR,))

    expected_brokers = [(n, *address_for(n), r) for n, _, _, r in upstream]
    expected_brokers.append((COORDINATOR.node_id, COORDINATOR.host, COORDINATOR.port, None))
    assert rewritten == encode(MetadataResponse(brokers=metadata_brokers(version, expected_brokers), **common))
    assert seen == [Broker(n, h, p, r) for n, h, p, r in upstream]
    decoded = MetadataResponse.decode(rewritten, version=version, header=True)
    assert [(b.node_id, b.host, b.port) for b in decoded.brokers] == [b[:3] for b in expected_brokers]


def test_metadata_does_not_list_the_coordinator_twice():
    brokers = [(COORDINATOR.node_id, "up", 1, None), (1, "up", 2, None)]
    payload = encode(MetadataResponse(version=12, throttle_time_ms=0, brokers=metadata_brokers(12, brokers),
                                      cluster_id="c", controller_id=1, topics=[]))
    rewritten, _ = rewrite_metadata(payload, 12, address_for, (COORDINATOR,))
    decoded = MetadataResponse.decode(rewritten, version=12, header=True)
    assert [b.node_id for b in decoded.brokers] == [COORDINATOR.node_id, 1]


def test_metadata_lists_every_instances_coordinator_that_upstream_does_not():
    # Several instances over one replicated store: a FindCoordinator through any of them may
    # name any instance, so every Metadata lists them all (librdkafka drops unlisted brokers).
    others = (Broker(2_000_000_001, "kgc-b", 9093), Broker(2_000_000_002, "kgc-c", 9094))
    brokers = [(1, "up", 2, None), (others[1].node_id, "up", 3, None)]
    payload = encode(MetadataResponse(version=12, throttle_time_ms=0, brokers=metadata_brokers(12, brokers),
                                      cluster_id="c", controller_id=1, topics=[]))
    rewritten, _ = rewrite_metadata(payload, 12, address_for, (COORDINATOR, *others))
    decoded = MetadataResponse.decode(rewritten, version=12, header=True)
    assert [(b.node_id, b.host, b.port) for b in decoded.brokers] == [
        (1, *address_for(1)), (others[1].node_id, *address_for(others[1].node_id)),
        (COORDINATOR.node_id, KGC_HOST, 9092), (others[0].node_id, "kgc-b", 9093)]


def with_unknown_tag_at(payload: bytes, pos: int, tag: int, value: bytes) -> bytes:
    """Replaces the empty tagged-field section (one 0x00 byte) at `pos` with one unknown field."""
    assert payload[pos] == 0
    return payload[:pos] + wire.tagged([(tag, value)]) + payload[pos + 1:]


def test_metadata_keeps_unknown_tagged_fields_of_header_brokers_and_body():
    broker = MetadataResponse.MetadataResponseBroker(version=12, node_id=7, host="b1", port=9092, rack=None)
    payload = encode(MetadataResponse(version=12, throttle_time_ms=0, brokers=[broker], cluster_id="c",
                                      controller_id=7, topics=[]))
    # header: correlation id (4), tags (1); throttle (4); broker count (1); node id (4),
    # host "b1" (3), port (4), rack null (1): the broker's tags are at 22.
    payload = with_unknown_tag_at(payload, len(payload) - 1, 9, b"body")
    payload = with_unknown_tag_at(payload, 22, 5, b"brk")
    payload = with_unknown_tag_at(payload, 4, 3, b"hdr")
    upstream = MetadataResponse.decode(payload, version=12, header=True)
    assert upstream.brokers[0].unknown_tags == {"_5": b"brk"}
    assert upstream.unknown_tags == {"_9": b"body"}

    rewritten, _ = rewrite_metadata(payload, 12, address_for, (COORDINATOR,))

    assert rewritten[:12] == payload[:12]  # correlation id and the header's tagged field
    decoded = MetadataResponse.decode(rewritten, version=12, header=True)
    assert decoded.brokers[0].unknown_tags == {"_5": b"brk"}
    assert (decoded.brokers[0].host, decoded.brokers[0].port) == address_for(7)
    assert decoded.unknown_tags == {"_9": b"body"}


@pytest.mark.parametrize("cut", [0, 3, 9, 15, 28])
def test_metadata_truncated_before_its_brokers_end_is_refused(cut):
    # The rewriter reads no further than the brokers (bytes 8-29 here): the rest is copied.
    broker = MetadataResponse.MetadataResponseBroker(version=1, node_id=7, host="broker-1", port=9092, rack="r")
    payload = encode(MetadataResponse(version=1, brokers=[broker], controller_id=7, topics=[]))
    with pytest.raises(MalformedResponse):
        rewrite_metadata(payload[:cut], 1, address_for, (COORDINATOR,))


# -- DescribeCluster --------------------------------------------------------------------

@pytest.mark.parametrize("version", range(3))
@settings_per_version
@given(data=st.data())
def test_describe_cluster_points_every_broker_at_kgc(version, data):
    upstream = data.draw(st.lists(st.tuples(node_ids, hosts, ports, racks, st.booleans()), max_size=5,
                                  unique_by=lambda b: b[0]))
    common = dict(version=version, throttle_time_ms=data.draw(int32s), error_code=data.draw(error_codes),
                  error_message=data.draw(messages), endpoint_type=data.draw(st.integers(1, 2)),
                  cluster_id=data.draw(hosts), controller_id=data.draw(node_ids), authorized_operations=None)

    def response(brokers):
        return DescribeClusterResponse(brokers=[
            DescribeClusterResponse.DescribeClusterBroker(version=version, broker_id=n, host=h, port=p, rack=r,
                                                          is_fenced=f)
            for n, h, p, r, f in brokers], **common)

    rewritten = rewrite_describe_cluster(encode(response(upstream)), version, address_for)

    assert rewritten == encode(response([(n, *address_for(n), r, f) for n, _, _, r, f in upstream]))


# -- FindCoordinator --------------------------------------------------------------------

@pytest.mark.parametrize("version", range(4))
@settings_per_version
@given(node_id=st.integers(-1, 5000), host=hosts, port=ports, error_code=error_codes, message=messages,
       throttle=int32s)
def test_find_coordinator_v0_to_v3_rewrites_the_node_unless_it_is_an_error(version, node_id, host, port,
                                                                           error_code, message, throttle):
    def response(h, p):
        return FindCoordinatorResponse(version=version, throttle_time_ms=throttle, error_code=error_code,
                                       error_message=message, node_id=node_id, host=h, port=p)

    rewritten = rewrite_find_coordinator(encode(response(host, port)), version, address_for)

    expected = response(*address_for(node_id)) if node_id >= 0 else response(host, port)
    assert rewritten == encode(expected)


@pytest.mark.parametrize("version", range(4, 7))
@settings_per_version
@given(data=st.data())
def test_find_coordinator_v4_plus_rewrites_each_coordinator_that_names_a_node(version, data):
    entries = data.draw(st.lists(st.tuples(st.text(max_size=10), st.integers(-1, 5000), hosts, ports, error_codes,
                                           messages), max_size=5))

    def response(coordinators):
        return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(version=version, key=k, node_id=n, host=h, port=p, error_code=e,
                                                error_message=m)
            for k, n, h, p, e, m in coordinators])

    rewritten = rewrite_find_coordinator(encode(response(entries)), version, address_for)

    expected = [(k, n, *address_for(n), e, m) if n >= 0 else (k, n, h, p, e, m) for k, n, h, p, e, m in entries]
    assert rewritten == encode(response(expected))


# -- Produce and Fetch (KIP-951 NodeEndpoints) ------------------------------------------

def node_endpoints(cls, version, endpoints):
    return [cls.NodeEndpoint(version=version, node_id=n, host=h, port=p, rack=r) for n, h, p, r in endpoints]


endpoint_lists = st.lists(st.tuples(node_ids, hosts, ports, racks), max_size=4, unique_by=lambda e: e[0])


@st.composite
def produce_topics(draw, version):
    topic_cls = ProduceResponse.TopicProduceResponse
    partition_cls = topic_cls.PartitionProduceResponse
    topics = []
    for i in range(draw(st.integers(0, 2))):
        partitions = [
            partition_cls(
                version=version, index=p, error_code=draw(error_codes), base_offset=draw(int64s),
                log_append_time_ms=draw(int64s), log_start_offset=draw(int64s),
                record_errors=[partition_cls.BatchIndexAndErrorMessage(version=version, batch_index=b,
                                                                       batch_index_error_message=draw(messages))
                               for b in range(draw(st.integers(0, 2)))],
                error_message=draw(messages),
                current_leader=partition_cls.LeaderIdAndEpoch(version=version, leader_id=draw(node_ids),
                                                              leader_epoch=draw(int32s)))
            for p in range(draw(st.integers(0, 3)))]
        topics.append(topic_cls(version=version, name=f"topic-{i}", topic_id=uuid.UUID(int=i + 1),
                                partition_responses=partitions))
    return topics


@pytest.mark.parametrize("version", range(10, 14))
@settings_per_version
@given(data=st.data())
def test_produce_node_endpoints_point_at_kgc(version, data):
    endpoints = data.draw(endpoint_lists)
    topics = data.draw(produce_topics(version))
    throttle = data.draw(int32s)

    def response(eps):
        return ProduceResponse(version=version, responses=topics, throttle_time_ms=throttle,
                               node_endpoints=node_endpoints(ProduceResponse, version, eps))

    rewritten = rewrite_produce(encode(response(endpoints)), version, address_for)

    assert rewritten == encode(response([(n, *address_for(n), r) for n, _, _, r in endpoints]))


@st.composite
def fetch_topics(draw, version):
    topic_cls = FetchResponse.FetchableTopicResponse
    partition_cls = topic_cls.PartitionData
    topics = []
    for i in range(draw(st.integers(0, 2))):
        partitions = [
            partition_cls(
                version=version, partition_index=p, error_code=draw(error_codes), high_watermark=draw(int64s),
                last_stable_offset=draw(int64s), log_start_offset=draw(int64s),
                diverging_epoch=partition_cls.EpochEndOffset(version=version, epoch=draw(int32s),
                                                             end_offset=draw(int64s)),
                current_leader=partition_cls.LeaderIdAndEpoch(version=version, leader_id=draw(node_ids),
                                                              leader_epoch=draw(int32s)),
                aborted_transactions=draw(st.none() | st.just([
                    partition_cls.AbortedTransaction(version=version, producer_id=7, first_offset=9)])),
                preferred_read_replica=draw(st.integers(-1, 5)),
                records=draw(st.none() | st.binary(max_size=200)))
            for p in range(draw(st.integers(0, 3)))]
        topics.append(topic_cls(version=version, topic=f"topic-{i}", topic_id=uuid.UUID(int=i + 1),
                                partitions=partitions))
    return topics


@pytest.mark.parametrize("version", range(16, 19))
@settings_per_version
@given(data=st.data())
def test_fetch_node_endpoints_point_at_kgc(version, data):
    endpoints = data.draw(endpoint_lists)
    topics = data.draw(fetch_topics(version))
    common = dict(version=version, throttle_time_ms=data.draw(int32s), error_code=data.draw(error_codes),
                  session_id=data.draw(int32s), responses=topics)

    def response(eps):
        return FetchResponse(node_endpoints=node_endpoints(FetchResponse, version, eps), **common)

    rewritten = rewrite_fetch(encode(response(endpoints)), version, address_for)

    assert rewritten == encode(response([(n, *address_for(n), r) for n, _, _, r in endpoints]))


def test_produce_before_v10_and_fetch_before_v16_pass_untouched():
    payload = b"any bytes at all: these versions carry no addresses"
    assert rewrite_produce(payload, 9, address_for) is payload
    assert rewrite_fetch(payload, 15, address_for) is payload


@pytest.mark.parametrize(("cls", "version", "rewriter"), [(ProduceResponse, 10, rewrite_produce),
                                                          (FetchResponse, 16, rewrite_fetch)])
def test_node_endpoints_rewrite_keeps_unknown_top_level_tags(cls, version, rewriter):
    endpoints = node_endpoints(cls, version, [(3, "upstream-3", 9093, "rack-a")])
    empty = encode(cls(version=version, responses=[], throttle_time_ms=0, node_endpoints=[]))
    full = encode(cls(version=version, responses=[], throttle_time_ms=0, node_endpoints=endpoints))
    # The top-level tagged section is last: kafka-python wrote 0 fields, then 1 (tag 0).
    section = full[len(empty) - 1:]
    assert section[:2] == b"\x01\x00"
    node_endpoints_field = section[2:]  # size, then the array
    payload = empty[:-1] + b"\x02\x00" + node_endpoints_field + b"\x0d\x03xyz"
    upstream = cls.decode(payload, version=version, header=True)
    assert upstream.unknown_tags == {"_13": b"xyz"}
    assert upstream.node_endpoints[0].host == "upstream-3"

    decoded = cls.decode(rewriter(payload, version, address_for), version=version, header=True)

    assert decoded.unknown_tags == {"_13": b"xyz"}
    [endpoint] = decoded.node_endpoints
    assert (endpoint.node_id, endpoint.host, endpoint.port, endpoint.rack) == (3, *address_for(3), "rack-a")


def test_versions_newer_than_the_rewriter_knows_are_refused():
    with pytest.raises(MalformedResponse):
        rewrite_metadata(b"\x00" * 16, 14, address_for, (COORDINATOR,))
    with pytest.raises(MalformedResponse):
        rewrite_fetch(b"\x00" * 16, 19, address_for)
