"""Answers kgc gives without the coordinator: ApiVersions, and Metadata when standalone."""

from __future__ import annotations

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

    def metadata(self, request):
        return standalone_metadata(request.version, self._node, CLUSTER_ID, request)
