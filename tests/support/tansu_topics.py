"""Topics made with records straight on a Tansu broker's own port, past any front in its way."""

from __future__ import annotations

from kafka.protocol.admin import CreateTopicsResponse
from kafka.protocol.producer import ProduceResponse

from tests.support.admin import new_name
from tests.support.gateway_client import create_topic, produce
from tests.support.tansu import request_response


def created_topic(broker) -> str:
    """A new topic of one partition, made straight on Tansu's own port: its Metadata names
    the front, which wants a login."""
    name = new_name("e2e")
    created = request_response(broker.address, create_topic(name), CreateTopicsResponse)
    assert created.topics[0].error_code == 0, created
    return name


def topic_with_records(broker, count: int) -> str:
    name = created_topic(broker)
    produced = request_response(broker.address, produce(name, *(b"%d" % i for i in range(count))), ProduceResponse)
    assert produced.responses[0].partition_responses[0].error_code == 0, produced
    return name
