"""`authorizer = "upstream"`: the upstream cluster's own ACLs, read with DescribeAcls.

kgc asks for every binding (resource type, pattern, operation and permission ANY) on its
own upstream connection, as its own identity, which needs DESCRIBE on the cluster, and
builds an immutable snapshot the authorizer decides over; every `interval_ms` it asks
again. Super users and `allow.everyone.if.no.acl.found` are not in DescribeAcls: they
come from kgc's settings and must match the cluster's.

- Until the first answer every group API is refused (fail closed).
- SECURITY_DISABLED: the cluster has no authorizer, so neither does kgc: all allowed.
- Any other error, or no answer: the last snapshot stays (refused entirely if there was
  none), and the status says why.

This is sound when the cluster uses Kafka's ACL authorizer and its default principal
builder (the principal is `User:<SASL user>`), as with passthrough of PLAIN or SCRAM.
"""

from __future__ import annotations

import asyncio
import logging

from kafka.protocol.admin import DescribeAclsRequest, DescribeAclsResponse
from kafka.protocol.api_key import ApiKey

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable
from coordinator.periodic import run_every
from coordinator.security.acl import AclBinding, AclSnapshot, Operation, PatternType, Permission, ResourceType
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ANY = 1
_PATTERNS = {3: PatternType.LITERAL, 4: PatternType.PREFIXED}
_PERMISSIONS = {2: Permission.DENY, 3: Permission.ALLOW}
_TYPES = {int(t): t for t in ResourceType}
_OPERATIONS = {int(o): o for o in Operation}


class UpstreamAcls:
    def __init__(self, cluster: UpstreamCluster, super_users: frozenset[str], allow_everyone_if_no_acl_found: bool,
                 interval_ms: int):
        self._cluster = cluster
        self._super_users = super_users
        self._allow_default = allow_everyone_if_no_acl_found
        self._interval_ms = interval_ms
        self.snapshot = AclSnapshot((), super_users, False)     # refused until the first answer
        self.status = "not read yet"
        self._connection: UpstreamConnection | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    def current(self) -> AclSnapshot:
        return self.snapshot

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        await self._cluster.wait_reachable()
        await self.refresh()
        await run_every(self._interval_ms, self._stop, self.refresh, "upstream ACL refresh")

    async def refresh(self) -> None:
        try:
            response = await self._describe()
        except (UpstreamUnavailable, OSError, TimeoutError) as exc:
            self.status = f"cannot read the upstream's ACLs: {exc}"
            log.warning("%s; keeping the last ones", self.status)
            return
        if response.error_code == ErrorCode.SECURITY_DISABLED:
            self.snapshot = AclSnapshot((), self._super_users, True)
            self.status = "the upstream has no authorizer: every group API allowed"
        elif response.error_code:
            self.status = (f"the upstream refused DescribeAcls ({ErrorCode(response.error_code).name}): "
                           "kgc's user needs DESCRIBE on the cluster")
            log.error("%s; keeping the last ACLs", self.status)
            return
        else:
            bindings = tuple(_bindings(response))
            self.snapshot = AclSnapshot(bindings, self._super_users, self._allow_default)
            self.status = f"{len(bindings)} upstream ACL bindings"
        log.debug("%s", self.status)

    async def _describe(self) -> DescribeAclsResponse:
        if self._connection is None or self._connection.failure is not None:
            address = self._cluster.live_broker()
            if address is None:
                raise UpstreamUnavailable(self._cluster.status)
            self._connection = await self._cluster.own_connection(*address)
        low, high = self._cluster.api_versions.get(ApiKey.DescribeAcls, (0, -1))
        version = min(high, DescribeAclsRequest.max_version)
        if version < max(low, 1):
            raise UpstreamUnavailable(f"the upstream serves DescribeAcls {low}-{high}: kgc needs 1 or later")
        request = DescribeAclsRequest[version](resource_type_filter=ANY, resource_name_filter=None,
                                               pattern_type_filter=ANY, principal_filter=None, host_filter=None,
                                               operation=ANY, permission_type=ANY)
        request.with_header(correlation_id=1, client_id="kgc-acls")
        payload = await asyncio.wait_for(self._connection.send(1, request.encode(header=True), True), 10)
        return DescribeAclsResponse.decode(payload, version=version, header=True)

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._connection is not None:
            await self._connection.close()


def _bindings(response: DescribeAclsResponse):
    """The bindings kgc can use; types it has no use for (USER, DELEGATION_TOKEN) are left out."""
    for resource in response.resources:
        rtype, pattern = _TYPES.get(resource.resource_type), _PATTERNS.get(resource.pattern_type)
        if rtype is None or pattern is None:
            continue
        for acl in resource.acls:
            operation, permission = _OPERATIONS.get(acl.operation), _PERMISSIONS.get(acl.permission_type)
            if operation is not None and permission is not None:
                yield AclBinding(acl.principal, acl.host, operation, permission, rtype, resource.resource_name,
                                 pattern)
