"""ACLs and the authorization decision, with the semantics of Kafka's StandardAuthorizer.

Theory of operation
-------------------
An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an
entry (principal, host, operation, ALLOW or DENY). The decision for a
principal connected from a host, wanting an operation on a resource:

1. a super user (``super.users``, ``;``-separated principals) may do anything;
2. the ACLs that *match* the resource are those of its type whose pattern is
   the name itself (LITERAL), the wildcard ``*`` (LITERAL), or a prefix of it
   (PREFIXED);
3. if any matching ACL for this principal (or ``User:*``) and host (or ``*``)
   DENYs the operation (or ALL), the answer is no: DENY wins;
4. if one ALLOWs it (or ALL, or an operation that implies it: READ, WRITE,
   DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS),
   the answer is yes;
5. if no ACL at all matches the resource, ``allow.everyone.if.no.acl.found``
   decides (false by default); otherwise the answer is no.

ACLs are kept in ``acls.json`` in the log directory (owner-readable, replaced
whole with write, fsync, rename) and loaded at start.
"""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from seglog.broker.security.credentials import write_private

ACL_FILE = "acls.json"


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType`` codes."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes."""

    UNKNOWN = 0
    ANY = 1
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


class Permission(enum.IntEnum):
    """Kafka's ``AclPermissionType`` codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
"""The one CLUSTER resource's name, as Kafka names it."""
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

# An ALLOW of the key also allows each of these (Kafka's implied operations).
_IMPLIED: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


@dataclass(frozen=True)
class AclBinding:
    """One ACL."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def matches_resource(self, resource_type: int, name: str) -> bool:
        """Whether the pattern covers the resource ``name`` of ``resource_type``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return False

    def describe(self) -> str:
        """The ACL as ``kafka-acls`` prints it."""
        return (
            f"(principal={self.principal}, host={self.host}, "
            f"operation={Operation(self.operation).name}, "
            f"permissionType={Permission(self.permission).name}) on "
            f"{ResourceType(self.resource_type).name}:"
            f"{PatternType(self.pattern_type).name}:{self.resource_name}"
        )


@dataclass(frozen=True)
class AclFilter:
    """A DescribeAcls/DeleteAcls filter: None or ANY fields match everything."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = Operation.ANY
    permission: int = Permission.ANY

    def matches(self, acl: AclBinding) -> bool:
        """Whether ``acl`` is selected by this filter (Kafka's ``AclBindingFilter.matches``)."""
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not (
                acl.resource_name == self.resource_name
                or (acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD)
                or (
                    acl.pattern_type == PatternType.PREFIXED
                    and self.resource_name.startswith(acl.resource_name)
                )
            ):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
                return False
            if self.resource_name is not None and self.resource_name != acl.resource_name:
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (Operation.ANY, acl.operation):
            return False
        return self.permission in (Permission.ANY, acl.permission)


def validate(acl: AclBinding) -> str | None:
    """Why Kafka would refuse to create ``acl``; None when it is acceptable."""
    if acl.resource_type not in (
        ResourceType.TOPIC,
        ResourceType.GROUP,
        ResourceType.CLUSTER,
        ResourceType.TRANSACTIONAL_ID,
        ResourceType.DELEGATION_TOKEN,
        ResourceType.USER,
    ):
        return "Invalid resource type"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid pattern type"
    if acl.operation in (Operation.ANY, Operation.UNKNOWN) or acl.operation > 12:
        return "Invalid operation"
    if acl.permission not in (Permission.ALLOW, Permission.DENY):
        return "Invalid permission type"
    if not acl.resource_name:
        return "Resource name must not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    principal_type, sep, principal_name = acl.principal.partition(":")
    if not sep or not principal_type or not principal_name:
        return f"Could not parse principal from `{acl.principal}` (no colon is present)."
    if not acl.host:
        return "Host must not be empty"
    return None


class Authorizer:
    """The broker's ACLs and its decisions."""

    def __init__(
        self, log_dir: Path, super_users: Iterable[str] = (), *, allow_if_no_acl: bool = False
    ) -> None:
        self.path = Path(log_dir) / ACL_FILE
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._lock = threading.Lock()
        self._acls: list[AclBinding] = []
        self._load()

    @classmethod
    def from_config(cls, config: Any, log_dir: Path) -> Authorizer | None:
        """The authorizer ``authorizer.class.name`` asks for (any value), else None."""
        if not (config["authorizer.class.name"] or "").strip():
            return None
        supers = [s.strip() for s in (config["super.users"] or "").split(";") if s.strip()]
        return cls(log_dir, supers, allow_if_no_acl=bool(config["allow.everyone.if.no.acl.found"]))

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        self._acls = [AclBinding(**item) for item in data.get("acls", [])]

    def reload(self) -> None:
        """Read the ACL file again (another process sharing the directory changed it)."""
        with self._lock:
            self._acls = []
            self._load()

    def _save(self) -> None:
        text = json.dumps({"version": 1, "acls": [asdict(a) for a in self._acls]}, indent=1)
        write_private(self.path, text + "\n")

    # ------------------------------------------------------------------ changes

    def acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """The ACLs a filter selects (all without one)."""
        return [a for a in self._acls if acl_filter is None or acl_filter.matches(a)]

    def create(self, acls: list[AclBinding]) -> None:
        """Add ACLs (already validated) and persist them before returning."""
        with self._lock:
            known = set(self._acls)
            self._acls += [a for a in dict.fromkeys(acls) if a not in known]
            self._save()

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove the ACLs each filter selects; per filter, those it removed."""
        with self._lock:
            removed = [[a for a in self._acls if f.matches(a)] for f in filters]
            gone = {a for group in removed for a in group}
            if gone:
                self._acls = [a for a in self._acls if a not in gone]
                self._save()
            return removed

    # ---------------------------------------------------------------- decisions

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: int, name: str
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        matching = [a for a in self._acls if a.matches_resource(resource_type, name)]
        if not matching:
            return self.allow_if_no_acl
        mine = [
            a
            for a in matching
            if a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD)
        ]
        for acl in mine:
            if acl.permission == Permission.DENY and acl.operation in (Operation.ALL, operation):
                return False
        allowed_by = _IMPLIED.get(operation, frozenset({operation}))
        return any(
            acl.permission == Permission.ALLOW
            and (acl.operation == Operation.ALL or acl.operation in allowed_by)
            for acl in mine
        )

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: int
    ) -> bool:
        """Whether some resource of the type allows it (Kafka's ``authorizeByResourceType``).

        An ALLOW counts only if no DENY covers everything it allows: a DENY of
        the wildcard covers every ALLOW; a DENY of the same literal name covers
        an ALLOW of that name; a DENY prefix covers the names and prefixes that
        start with it. (A DENY of one literal name does not cover a prefix.)
        """
        if principal in self.super_users:
            return True
        mine = [
            a
            for a in self._acls
            if a.resource_type == resource_type
            and a.principal in (principal, WILDCARD_PRINCIPAL)
            and a.host in (host, WILDCARD)
        ]
        denies = [
            d
            for d in mine
            if d.permission == Permission.DENY and d.operation in (Operation.ALL, operation)
        ]
        if any(
            d.pattern_type == PatternType.LITERAL and d.resource_name == WILDCARD for d in denies
        ):
            return False
        denied_names = {d.resource_name for d in denies if d.pattern_type == PatternType.LITERAL}
        denied_prefixes = [
            d.resource_name for d in denies if d.pattern_type == PatternType.PREFIXED
        ]
        allowed_by = _IMPLIED.get(operation, frozenset({operation}))
        for acl in mine:
            if acl.permission != Permission.ALLOW or not (
                acl.operation == Operation.ALL or acl.operation in allowed_by
            ):
                continue
            name = acl.resource_name
            if acl.pattern_type == PatternType.LITERAL:
                if name == WILDCARD:
                    return True
                if name in denied_names:
                    continue
            if not any(name.startswith(prefix) for prefix in denied_prefixes):
                return True
        return False
