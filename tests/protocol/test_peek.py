import struct

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import ProduceRequest

from protocol.headers import HeaderError
from protocol.peek import peek_request, produce_expects_response


def _produce_payload(version: int, acks: int, transactional_id: str | None) -> bytes:
    request = ProduceRequest(version=version, transactional_id=transactional_id, acks=acks, timeout_ms=30_000,
                             topic_data=[])
    request.with_header(correlation_id=41, client_id="producer-1")
    return bytes(request.encode(header=True, framed=True))[4:]


@pytest.mark.parametrize("version", range(0, ProduceRequest.max_version + 1))
@pytest.mark.parametrize("transactional_id", [None, "", "txn-7"])
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_produce_expects_a_response_unless_acks_is_zero(version, transactional_id, acks):
    payload = _produce_payload(version, acks, transactional_id)
    assert produce_expects_response(version, payload) is (acks != 0)


def test_peek_reads_key_version_and_correlation_id_of_any_request():
    payload = _produce_payload(9, 1, None)
    assert peek_request(payload) == (ApiKey.Produce, 9, 41)
    assert peek_request(struct.pack(">hhi", 999, 3, -7)) == (999, 3, -7)


def test_peek_needs_eight_bytes():
    with pytest.raises(HeaderError):
        peek_request(b"\x00\x00\x00\x09\x00\x00\x00")


@pytest.mark.parametrize("version", [2, 3, 9])
def test_produce_cut_before_acks_is_refused(version):
    payload = _produce_payload(version, 0, "txn-7")
    header_and_txn = len(payload) - len(bytes(ProduceRequest(version=version, transactional_id="txn-7", acks=0,
                                                             timeout_ms=30_000, topic_data=[]).encode()))
    cut = header_and_txn + (0 if version < 3 else 2 + 5 if version < 9 else 1 + 5)
    with pytest.raises(HeaderError, match="acks|transactional_id"):
        produce_expects_response(version, payload[:cut + 1])
