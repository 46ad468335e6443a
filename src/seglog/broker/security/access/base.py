"""What every authorization plan is made of: the request's :class:`Access`, the plan's
:class:`Decision`, and the resource types and error codes the plans answer with.

A *plan* reads one API's request body and returns a :class:`Decision`; a *fix*
is a function the decision applies to the handler's response (adding the error
entries of the items the plan removed, or leaving out what may not be seen).
Bodies are the generated types of :mod:`seglog.protocol.bodies`: a plan for
Produce takes a ``ProduceRequest`` and returns a ``Decision[ProduceResponse]``,
so mypy checks every field a plan reads or an answer it builds.
See :mod:`seglog.broker.security.access` for the theory of operation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from seglog.broker.security.authorizer import (
    CLUSTER_NAME,
    Authorizer,
    Operation,
    ResourceType,
)
from seglog.protocol import error_codes

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID

TOPIC_FAILED = error_codes.code_for("TOPIC_AUTHORIZATION_FAILED")
GROUP_FAILED = error_codes.code_for("GROUP_AUTHORIZATION_FAILED")
CLUSTER_FAILED = error_codes.code_for("CLUSTER_AUTHORIZATION_FAILED")
TXN_FAILED = error_codes.code_for("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")

R = TypeVar("R", bound=Mapping[str, Any])
"""An API's response body."""

Fix = Callable[[R], None]
"""Changes one API's response body in place."""


@dataclass
class Decision(Generic[R]):
    """What to do with a request: answer ``response`` at once, or run the handler then ``fix``."""

    response: R | None = None
    fixes: list[Fix[R]] = field(default_factory=list)
    close: str | None = None
    """Set when the request must not be answered at all (the connection closes)."""

    def fix(self, response: R) -> None:
        """Add the error entries of the items removed from the request."""
        for fix in self.fixes:
            fix(response)


@dataclass
class Access:
    """One request's principal, host and the broker's authorizer."""

    authorizer: Authorizer
    principal: str
    host: str
    topic_exists: Callable[[str], bool]
    topic_names: Callable[[], Iterable[str]] = tuple
    """Every topic's name, for the requests that ask about all of them."""

    def allowed(self, operation: Operation, resource_type: int, name: str) -> bool:
        """Whether the principal may do ``operation`` on the resource."""
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def cluster(self, operation: Operation) -> bool:
        """Whether the principal may do ``operation`` on the cluster."""
        return self.allowed(operation, CLUSTER, CLUSTER_NAME)


Plan = Callable[[Access, int, Any], Decision[Any]]
"""Reads one API's request body (items it removes are gone for the handler) and decides.

The body and the decision are of the API's own types (``ProduceRequest``,
``Decision[ProduceResponse]``); the table holds every API, hence ``Any`` here.
"""


def allow(access: Access, version: int, body: object) -> Decision[Any]:
    """The plan of the APIs every principal may call."""
    return Decision()


__all__ = [
    "CLUSTER",
    "CLUSTER_FAILED",
    "GROUP",
    "GROUP_FAILED",
    "TOPIC",
    "TOPIC_FAILED",
    "TXN",
    "TXN_FAILED",
    "Access",
    "Decision",
    "Fix",
    "Operation",
    "Plan",
    "allow",
]
