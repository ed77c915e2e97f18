"""Answers kgc gives without the coordinator: ApiVersions, and Metadata when standalone."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from kafka.protocol.api_key import ApiKey

from coordinator.node import CoordinatorNode
from protocol.answers.local import api_versions_response, standalone_metadata
from protocol.api_keys import LOCAL_VERSIONS, SASL_VERSIONS, STANDALONE_APIS

CLUSTER_ID = "kgc-standalone"


class LocalAnswers:
    def __init__(self, node: CoordinatorNode, gateway=None,
                 versions: Mapping[ApiKey, tuple[int, int]] = LOCAL_VERSIONS, *, sasl_enabled: bool = False):
        self._node = node
        self._gateway = gateway
        self.versions = versions    # the local APIs' ranges (`protocol.api_keys.local_versions`)
        # With SASL, SaslHandshake v1 only: after v0, SASL tokens travel as raw frames
        # without a Kafka header, which kgc's framing does not read.
        self.sasl_ranges = {**SASL_VERSIONS, ApiKey.SaslHandshake: (1, 1)} if sasl_enabled else dict(SASL_VERSIONS)

    def served_ranges(self) -> dict[int, tuple[int, int]]:
        local = {**self.versions, **self.sasl_ranges}
        if self._gateway is None:
            return local
        if self._gateway.cluster.api_versions:
            # Upstream known: Metadata is forwarded and rewritten, so upstream's range holds.
            for api_key in STANDALONE_APIS:
                local.pop(api_key, None)
        return self._gateway.api_versions(local)

    def api_versions(self, request):
        if self._gateway is None:
            return api_versions_response(request.version, self.served_ranges())
        features = self._gateway.cluster.features
        return api_versions_response(request.version, self.served_ranges(), supported_features=features.supported,
                                     finalized_features=features.finalized, features_epoch=features.epoch)

    @property
    def upstream_unknown(self) -> bool:
        """An upstream kgc has not reached yet since it started: what a client may send
        through kgc (upstream's ranges) is not known."""
        return self._gateway is not None and not self._gateway.cluster.api_versions

    async def api_versions_once_known(self, request):
        """The answer once the upstream's ranges are known, waited for at most one connection
        attempt's bound, the attempt made now. A client told only kgc's own ranges would hold
        them for the life of its connection: librdkafka's transactional producer, for one,
        fails fatally ("no broker supports transactions"). Still unknown: ConnectionError,
        which closes the connection, and the client connects and asks again."""
        cluster = self._gateway.cluster
        cluster.refresh_soon()  # an attempt now, not when the retries' backoff ends
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(cluster.wait_reachable(), cluster.connect_timeout_ms / 1000)
        if not cluster.api_versions:
            raise ConnectionError(f"upstream's API ranges unknown ({cluster.status}): asked again on a new connection")
        return self.api_versions(request)

    def metadata(self, request):
        return standalone_metadata(request.version, self._node, CLUSTER_ID, request)
