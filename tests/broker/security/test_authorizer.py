"""The authorization decision (StandardAuthorizer's semantics), without a broker."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from seglog.broker.security.authorizer import (
    AclBinding,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    validate,
)

TOPIC = ResourceType.TOPIC
ALICE = "User:alice"


def acl(
    name: str,
    operation: Operation,
    permission: Permission = Permission.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
    principal: str = ALICE,
    host: str = "*",
    resource: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def test_deny_wins_over_allow(tmp_path: Path) -> None:
    authorizer = Authorizer(tmp_path)
    authorizer.create(
        [
            acl("pay", Operation.ALL, pattern=PatternType.PREFIXED),
            acl("payments", Operation.WRITE, Permission.DENY),
        ]
    )
    assert authorizer.authorize(ALICE, "1.2.3.4", Operation.READ, TOPIC, "payments")
    assert not authorizer.authorize(ALICE, "1.2.3.4", Operation.WRITE, TOPIC, "payments")
    assert authorizer.authorize(ALICE, "1.2.3.4", Operation.WRITE, TOPIC, "payouts")


def test_prefixed_literal_and_wildcard(tmp_path: Path) -> None:
    authorizer = Authorizer(tmp_path)
    authorizer.create(
        [
            acl("orders-", Operation.WRITE, pattern=PatternType.PREFIXED),
            acl("*", Operation.READ, principal="User:*"),
        ]
    )
    assert authorizer.authorize(ALICE, "h", Operation.WRITE, TOPIC, "orders-eu")
    assert not authorizer.authorize(ALICE, "h", Operation.WRITE, TOPIC, "order")
    assert authorizer.authorize("User:bob", "h", Operation.READ, TOPIC, "anything")
    assert not authorizer.authorize("User:bob", "h", Operation.WRITE, TOPIC, "orders-eu")


def test_implied_operations_and_hosts(tmp_path: Path) -> None:
    authorizer = Authorizer(tmp_path)
    authorizer.create(
        [
            acl("t", Operation.READ, host="10.0.0.1"),
            acl("t", Operation.ALTER_CONFIGS),
        ]
    )
    assert authorizer.authorize(ALICE, "10.0.0.1", Operation.DESCRIBE, TOPIC, "t")
    assert not authorizer.authorize(ALICE, "10.0.0.2", Operation.READ, TOPIC, "t")
    assert authorizer.authorize(ALICE, "10.0.0.2", Operation.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not authorizer.authorize(ALICE, "10.0.0.1", Operation.WRITE, TOPIC, "t")


def test_no_acl_found_and_super_users(tmp_path: Path) -> None:
    closed = Authorizer(tmp_path, ["User:admin"])
    assert not closed.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    cluster = ResourceType.CLUSTER
    assert closed.authorize("User:admin", "h", Operation.ALTER, cluster, "kafka-cluster")
    opened = Authorizer(tmp_path, allow_if_no_acl=True)
    assert opened.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    opened.create([acl("t", Operation.READ, principal="User:bob")])
    # Once any ACL matches the resource, only the ACLs decide.
    assert not opened.authorize(ALICE, "h", Operation.READ, TOPIC, "t")


def test_acls_persist_and_delete_by_filter(tmp_path: Path) -> None:
    authorizer = Authorizer(tmp_path)
    a = acl("t", Operation.READ)
    b = acl("u-", Operation.WRITE, pattern=PatternType.PREFIXED)
    authorizer.create([a, b, a])
    again = Authorizer(tmp_path)
    assert again.acls() == [a, b]
    assert again.acls(AclFilter(resource_name="u-x", pattern_type=PatternType.MATCH)) == [b]
    assert again.delete([AclFilter(operation=Operation.READ)]) == [[a]]
    assert Authorizer(tmp_path).acls() == [b]


def test_validation() -> None:
    assert validate(acl("t", Operation.READ)) is None
    assert validate(acl("t", Operation.ANY)) == "Invalid operation"
    assert validate(acl("t", Operation.READ, principal="alice")) is not None
    cluster = acl("other", Operation.ALTER, resource=ResourceType.CLUSTER)
    assert validate(cluster) is not None


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "ab", "abc", "*", "b"]),
            st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
            st.sampled_from([Operation.READ, Operation.WRITE, Operation.ALL]),
            st.sampled_from([Permission.ALLOW, Permission.DENY]),
        ),
        max_size=6,
    ),
    st.sampled_from(["a", "ab", "abc", "b", "c"]),
    st.sampled_from([Operation.READ, Operation.WRITE]),
)
def test_a_matching_deny_always_wins(
    entries: list[tuple[str, PatternType, Operation, Permission]],
    name: str,
    operation: Operation,
) -> None:
    authorizer = Authorizer.__new__(Authorizer)
    authorizer.super_users = frozenset()
    authorizer.allow_if_no_acl = False
    authorizer._acls = [acl(n, o, perm, p) for n, p, o, perm in entries]
    decision = authorizer.authorize(ALICE, "h", operation, TOPIC, name)
    denied = any(
        a.permission == Permission.DENY
        and a.operation in (Operation.ALL, operation)
        and a.matches_resource(TOPIC, name)
        for a in authorizer._acls
    )
    if denied:
        assert not decision
    if decision:
        assert any(
            a.permission == Permission.ALLOW and a.matches_resource(TOPIC, name)
            for a in authorizer._acls
        )
