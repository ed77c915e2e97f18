"""Kafka's ACLs: bindings, an immutable snapshot, and the authorizer's decision over it.

The semantics are Kafka's `StandardAuthorizer`:
- a super user (exact principal) may do anything;
- the ACLs that apply to a resource are those of its type whose pattern is the LITERAL
  name, the LITERAL wildcard `*`, or a PREFIXED prefix of the name;
- one applies to a request when its principal is the request's or `User:*`, and its host
  is `*` or the client's address;
- its operation matches when it is the same or ALL, and, for ALLOW only, when the request
  asks DESCRIBE and the ACL allows READ, WRITE, DELETE or ALTER (or DESCRIBE_CONFIGS and
  it allows ALTER_CONFIGS); a DENY of READ does not deny DESCRIBE;
- any matching DENY refuses; else any matching ALLOW allows;
- else: refused if the resource has any ACL at all (for anyone), otherwise
  `allow_everyone_if_no_acl_found` decides (Kafka's `allow.everyone.if.no.acl.found`).

The ACL file is TOML in Kafka's binding model, one table per binding:

    [[acl]]
    principal = "User:orders-app"     # or "User:*"
    host = "*"                         # or one exact IP, as Kafka (no CIDR)
    operation = "read"                 # all read write create delete alter describe ...
    permission = "allow"               # allow | deny
    resource_type = "group"            # topic | group | cluster | transactional_id
    resource_name = "orders-"          # "*" with literal: every resource of the type
    pattern_type = "prefixed"          # literal | prefixed

The file is read again when it changes (checked at most once a second); an invalid file
keeps the last good snapshot and logs why.
"""

from __future__ import annotations

import enum
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.security.files import read_toml, stamp

log = logging.getLogger(__name__)

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"


class ResourceType(enum.IntEnum):
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class Operation(enum.IntEnum):
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"


class PatternType(enum.Enum):
    LITERAL = "literal"
    PREFIXED = "prefixed"


# What an ALLOW of the key also allows (Kafka's AclEntry implied operations).
_IMPLIES = {
    Operation.READ: {Operation.DESCRIBE}, Operation.WRITE: {Operation.DESCRIBE},
    Operation.DELETE: {Operation.DESCRIBE}, Operation.ALTER: {Operation.DESCRIBE},
    Operation.ALTER_CONFIGS: {Operation.DESCRIBE_CONFIGS},
}
# The operations a GROUP supports, for DescribeGroups' authorized_operations.
GROUP_OPERATIONS = (Operation.READ, Operation.DELETE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                    Operation.ALTER_CONFIGS)


class AclError(ValueError):
    """The ACL file cannot be used; the message names the file and the entry."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    principal: str
    host: str
    operation: Operation
    permission: Permission
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType = PatternType.LITERAL

    def grants(self, operation: Operation) -> bool:
        if self.operation in (operation, Operation.ALL):
            return True
        return self.permission is Permission.ALLOW and operation in _IMPLIES.get(self.operation, ())


@dataclass(frozen=True)
class AclSnapshot:
    """Immutable: a new file makes a new snapshot; decisions never see half of one."""
    bindings: tuple[AclBinding, ...] = ()
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    _literal: dict = field(default_factory=dict, repr=False, compare=False)
    _prefixed: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        literal, prefixed = defaultdict(list), defaultdict(list)
        for b in self.bindings:
            if b.pattern_type is PatternType.LITERAL:
                literal[(b.resource_type, b.resource_name)].append(b)
            else:
                prefixed[b.resource_type].append(b)
        self._literal.update(literal)
        self._prefixed.update(prefixed)

    def applicable(self, rtype: ResourceType, name: str) -> list[AclBinding]:
        found = self._literal.get((rtype, name), []) + self._literal.get((rtype, WILDCARD), [])
        found += [b for b in self._prefixed.get(rtype, ()) if name.startswith(b.resource_name)]
        return found

    def authorize(self, principal: str, host: str, operation: Operation, rtype: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self.applicable(rtype, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        allowed = False
        for acl in acls:
            if acl.principal not in (principal, "User:*") or acl.host not in (host, WILDCARD):
                continue
            if not acl.grants(operation):
                continue
            if acl.permission is Permission.DENY:
                return False
            allowed = True
        return allowed

    def authorized_operations(self, principal: str, host: str, rtype: ResourceType, name: str,
                              operations=GROUP_OPERATIONS) -> set[int]:
        """DescribeGroups' bitfield, as kafka-python models it: the set of allowed op codes."""
        return {int(op) for op in operations if self.authorize(principal, host, op, rtype, name)}


def _enum(enum_cls, raw, what: str):
    if not isinstance(raw, str):
        raise AclError(f"{what} must be a string, got {raw!r}")
    key = raw.strip().lower()
    for member in enum_cls:
        if member.name.lower() == key or str(member.value) == key:
            return member
    raise AclError(f"unknown {what} {raw!r}: expected one of {', '.join(m.name.lower() for m in enum_cls)}")


def parse_bindings(document: dict, where: str) -> tuple[AclBinding, ...]:
    unknown = set(document) - {"acl"}
    if unknown:
        raise AclError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    bindings = []
    for n, entry in enumerate(document.get("acl", []), 1):
        at = f"{where}, acl {n}"
        try:
            extra = set(entry) - {"principal", "host", "operation", "permission", "resource_type",
                                  "resource_name", "pattern_type"}
            if extra:
                raise AclError(f"unknown key(s) {', '.join(sorted(extra))}")
            principal = entry["principal"]
            if not isinstance(principal, str) or ":" not in principal:
                raise AclError(f"principal must look like User:NAME, got {principal!r}")
            rtype = _enum(ResourceType, entry["resource_type"], "resource_type")
            name = entry["resource_name"]
            if rtype is ResourceType.CLUSTER and name != CLUSTER_NAME:
                raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}")
            pattern = _enum(PatternType, entry.get("pattern_type", "literal"), "pattern_type")
            if pattern is PatternType.PREFIXED and (name == WILDCARD or not name):
                raise AclError("a prefixed pattern needs a non-empty prefix other than *")
            bindings.append(AclBinding(principal, str(entry.get("host", WILDCARD)),
                                       _enum(Operation, entry["operation"], "operation"),
                                       _enum(Permission, entry["permission"], "permission"), rtype, str(name),
                                       pattern))
        except KeyError as exc:
            raise AclError(f"{at}: missing {exc.args[0]!r}") from None
        except AclError as exc:
            raise AclError(f"{at}: {exc}") from None
    return tuple(bindings)


def load_acl_file(path: str) -> tuple[AclBinding, ...]:
    return parse_bindings(read_toml(path, "ACL file", AclError), f"ACL file {path}")


class AclSource(Protocol):
    """Where the authorizer's snapshot comes from: a file, or the upstream's DescribeAcls."""

    def current(self) -> AclSnapshot: ...


class FileAuthorizer:
    """The snapshot of an ACL file, rebuilt when the file changes."""

    CHECK_INTERVAL_S = 1.0

    def __init__(self, path: str, super_users: frozenset[str], allow_everyone_if_no_acl_found: bool,
                 clock=time.monotonic):
        self._path = path
        self._super_users = super_users
        self._allow_default = allow_everyone_if_no_acl_found
        self._clock = clock
        self._stamp = stamp(path)
        self.snapshot = AclSnapshot(load_acl_file(path), super_users, allow_everyone_if_no_acl_found)
        self._checked = clock()

    def current(self) -> AclSnapshot:
        now = self._clock()
        if now - self._checked >= self.CHECK_INTERVAL_S:
            self._checked = now
            changed = stamp(self._path)
            if changed is not None and changed != self._stamp:
                self._stamp = changed
                try:
                    self.snapshot = AclSnapshot(load_acl_file(self._path), self._super_users, self._allow_default)
                    log.info("ACL file %s reloaded: %d bindings", self._path, len(self.snapshot.bindings))
                except AclError as exc:
                    log.error("keeping the previous ACLs: %s", exc)
        return self.snapshot
