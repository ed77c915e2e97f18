"""The authorizer's decisions, case by case, with Kafka's StandardAuthorizer semantics."""

from __future__ import annotations

import pytest

from coordinator.security.acl import (
    AclBinding,
    AclError,
    AclSnapshot,
    FileAuthorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    load_acl_file,
)

G, T, C = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER
ALLOW, DENY = Permission.ALLOW, Permission.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(principal, op, permission=ALLOW, rtype=G, name="g", pattern=LIT, host="*"):
    return AclBinding(principal, host, op, permission, rtype, name, pattern)


def snapshot(*bindings, super_users=(), allow_default=False):
    return AclSnapshot(tuple(bindings), frozenset(super_users), allow_default)


def ok(snap, principal="User:alice", op=Operation.READ, rtype=G, name="g", host="10.0.0.1"):
    return snap.authorize(principal, host, op, rtype, name)


@pytest.mark.parametrize("binding, name, expected", [
    (acl("User:alice", Operation.READ), "g", True),
    (acl("User:alice", Operation.READ), "g2", False),                            # literal is exact
    (acl("User:alice", Operation.READ, name="*"), "anything", True),             # wildcard
    (acl("User:alice", Operation.READ, name="team-", pattern=PRE), "team-a", True),
    (acl("User:alice", Operation.READ, name="team-", pattern=PRE), "tea", False),
    (acl("User:*", Operation.READ), "g", True),                                   # any principal
    (acl("User:bob", Operation.READ), "g", False),
    (acl("User:alice", Operation.ALL), "g", True),
    (acl("User:alice", Operation.WRITE), "g", False),
    (acl("User:alice", Operation.READ, host="10.0.0.1"), "g", True),
    (acl("User:alice", Operation.READ, host="10.0.0.2"), "g", False),
])
def test_which_bindings_apply(binding, name, expected):
    assert ok(snapshot(binding), name=name) is expected


def test_deny_wins_over_allow():
    snap = snapshot(acl("User:*", Operation.ALL), acl("User:alice", Operation.READ, DENY, name="g", pattern=LIT))
    assert not ok(snap)
    assert ok(snap, principal="User:bob")
    assert not ok(snapshot(acl("User:alice", Operation.READ), acl("User:alice", Operation.ALL, DENY, name="*")))
    assert not ok(snapshot(acl("User:alice", Operation.READ, name="*"), acl("User:alice", Operation.READ, DENY)))


@pytest.mark.parametrize("granted", [Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER])
def test_allow_implies_describe_but_deny_does_not_deny_it(granted):
    assert ok(snapshot(acl("User:alice", granted)), op=Operation.DESCRIBE)
    snap = snapshot(acl("User:alice", Operation.DESCRIBE), acl("User:alice", granted, DENY))
    assert ok(snap, op=Operation.DESCRIBE)
    assert ok(snapshot(acl("User:alice", Operation.ALTER_CONFIGS)), op=Operation.DESCRIBE_CONFIGS)
    assert not ok(snapshot(acl("User:alice", Operation.DESCRIBE)), op=granted)


def test_the_default_rule_when_no_binding_matches():
    assert not ok(snapshot())
    assert ok(snapshot(allow_default=True))
    # ACLs exist for the resource (for someone else): no default, denied.
    assert not ok(snapshot(acl("User:bob", Operation.READ), allow_default=True))
    # ACLs for other resources only: the default applies.
    assert ok(snapshot(acl("User:bob", Operation.READ, name="other"), allow_default=True))


def test_super_users_may_do_anything():
    snap = snapshot(acl("User:admin", Operation.ALL, DENY, name="*"), super_users=["User:admin"])
    assert ok(snap, principal="User:admin", op=Operation.DELETE)
    assert not ok(snap, principal="User:alice")


def test_authorized_operations_of_a_group():
    everything = snapshot(acl("User:alice", Operation.ALL))
    bits = everything.authorized_operations("User:alice", "h", G, "g")
    assert sum(1 << op for op in bits) == 3400       # Kafka's value for every group operation
    reader = snapshot(acl("User:alice", Operation.READ))
    assert reader.authorized_operations("User:alice", "h", G, "g") == {Operation.READ, Operation.DESCRIBE}


def test_the_acl_file_and_its_errors(tmp_path):
    path = tmp_path / "acls.toml"
    path.write_text('[[acl]]\nprincipal = "User:alice"\noperation = "read"\npermission = "allow"\n'
                    'resource_type = "group"\nresource_name = "team-"\npattern_type = "prefixed"\n')
    [binding] = load_acl_file(str(path))
    assert binding == acl("User:alice", Operation.READ, name="team-", pattern=PRE)
    for bad, error in [('[[acl]]\nprincipal = "alice"\n', "User:NAME"),
                       ('[[acl]]\nprincipal = "User:a"\noperation = "fly"\npermission = "allow"\n'
                        'resource_type = "group"\nresource_name = "g"\n', "unknown operation"),
                       ('[[acl]]\nprincipal = "User:a"\noperation = "read"\npermission = "allow"\n'
                        'resource_type = "cluster"\nresource_name = "c"\n', "kafka-cluster"),
                       ('[[acl]]\nprincipal = "User:a"\noperation = "read"\npermission = "allow"\n'
                        'resource_type = "group"\nresource_name = "*"\npattern_type = "prefixed"\n', "prefix")]:
        path.write_text(bad)
        with pytest.raises(AclError, match=error):
            load_acl_file(str(path))


def test_a_changed_file_is_a_new_snapshot(tmp_path):
    path = tmp_path / "acls.toml"
    path.write_text("")
    now = [0.0]
    authorizer = FileAuthorizer(str(path), frozenset(), False, clock=lambda: now[0])
    first = authorizer.current()
    assert not first.authorize("User:alice", "h", Operation.READ, G, "g")
    path.write_text('[[acl]]\nprincipal = "User:alice"\noperation = "read"\npermission = "allow"\n'
                    'resource_type = "group"\nresource_name = "g"\n')
    now[0] = 2.0
    second = authorizer.current()
    assert second.authorize("User:alice", "h", Operation.READ, G, "g")
    assert not first.authorize("User:alice", "h", Operation.READ, G, "g")      # snapshots never change
    path.write_text("garbage =")
    now[0] = 4.0
    assert authorizer.current() is second                                      # a bad file keeps the last good


def test_upstream_acls_refuse_everything_until_read():
    from coordinator.gateway.upstream_acls import UpstreamAcls

    acls = UpstreamAcls(None, frozenset({"User:admin"}), True, 1000)
    assert not ok(acls.current())                                       # fail closed, even with the default
    assert ok(acls.current(), principal="User:admin")                   # super users still are
