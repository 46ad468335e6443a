"""Handlers of the security APIs: SASL, SCRAM credentials (KIP-554), ACLs."""

from __future__ import annotations

import asyncio
import functools
import hashlib
from pathlib import Path
from typing import Any

from seglog.broker.nodes.shared import change_shared
from seglog.broker.security import sasl
from seglog.broker.security.authorizer import (
    AclBinding,
    AclFilter,
    PatternType,
    validate,
)
from seglog.broker.security.credentials import ScramStore
from seglog.broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_salted,
)
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader


async def sasl_handshake(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """SaslHandshake: choose the mechanism of the exchange to come."""
    if session.security is None or session.security.sasl is None:
        # Not a SASL listener: as Kafka answers a handshake that reaches its API layer.
        return {"error_code": error_codes.code_for("ILLEGAL_SASL_STATE"), "mechanisms": []}
    return sasl.handshake(session, header.api_version, str(body["mechanism"]))


async def sasl_authenticate(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """SaslAuthenticate: one token of the exchange."""
    if session.security is None or session.security.sasl is None:
        return {
            "error_code": error_codes.code_for("ILLEGAL_SASL_STATE"),
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"",
            "session_lifetime_ms": 0,
        }
    return sasl.authenticate(session, bytes(body["auth_bytes"]))


_TYPE_MECHANISMS = {code: name for name, code in MECHANISM_TYPES.items()}
_stores: dict[Path, ScramStore] = {}


def _store(state: BrokerState) -> ScramStore:
    path = Path(state.settings.log_dir)
    store = _stores.get(path)
    if store is None:
        store = _stores[path] = ScramStore(path)
    return store


def _user_error(user: str, error: str, message: str | None) -> dict[str, Any]:
    return {
        "user": user,
        "error_code": error_codes.code_for(error),
        "error_message": message,
        "credential_infos": [],
    }


async def describe_user_scram_credentials(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DescribeUserScramCredentials (KIP-554): mechanisms and iterations, never keys."""
    users = _store(state).users()
    requested = body.get("users")
    names = sorted(users) if not requested else [u["name"] for u in requested]
    results = []
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            results.append(
                _user_error(
                    name,
                    "DUPLICATE_RESOURCE",
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {name}",
                )
            )
        elif name not in users:
            results.append(
                _user_error(
                    name,
                    "RESOURCE_NOT_FOUND",
                    f"Attempt to describe a user credential that does not exist: {name}",
                )
            )
        else:
            results.append(
                {
                    "user": name,
                    "error_code": 0,
                    "error_message": None,
                    "credential_infos": [
                        {"mechanism": MECHANISM_TYPES[m], "iterations": c.iterations}
                        for m, c in sorted(users[name].items())
                    ],
                }
            )
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


def _check_upsertion(item: dict[str, Any]) -> tuple[str, str] | None:
    if not item["name"]:
        return "UNACCEPTABLE_CREDENTIAL", "Username must not be empty"
    if item["mechanism"] not in _TYPE_MECHANISMS:
        return "UNSUPPORTED_SASL_MECHANISM", "Unknown SCRAM mechanism"
    if item["iterations"] < MIN_ITERATIONS:
        return "UNACCEPTABLE_CREDENTIAL", "Too few iterations"
    if item["iterations"] > MAX_ITERATIONS:
        return "UNACCEPTABLE_CREDENTIAL", "Too many iterations"
    # Kafka stores what it is given; an empty salt or a salted password of the wrong
    # length makes a credential no client can ever use, so it is refused here.
    if not item["salt"]:
        return "UNACCEPTABLE_CREDENTIAL", "Salt must not be empty"
    mechanism = _TYPE_MECHANISMS[item["mechanism"]]
    size = hashlib.new(MECHANISMS[mechanism]).digest_size
    if len(item["salted_password"]) != size:
        return "UNACCEPTABLE_CREDENTIAL", f"Salted password must be {size} bytes for {mechanism}"
    return None


async def alter_user_scram_credentials(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """AlterUserScramCredentials (KIP-554): a user's changes apply together or not at all."""
    deletions = body.get("deletions") or []
    upsertions = body.get("upsertions") or []
    errors: dict[str, tuple[str, str]] = {}
    seen: set[tuple[str, int]] = set()
    order: list[str] = []
    for item in [*deletions, *upsertions]:
        name = item["name"]
        order.append(name)
        key = (name, item["mechanism"])
        if key in seen:
            errors.setdefault(
                name,
                (
                    "DUPLICATE_RESOURCE",
                    "A user credential cannot be altered twice in the same request",
                ),
            )
        seen.add(key)
        if item["mechanism"] not in _TYPE_MECHANISMS:
            errors.setdefault(name, ("UNSUPPORTED_SASL_MECHANISM", "Unknown SCRAM mechanism"))
        elif not name:
            errors.setdefault(name, ("UNACCEPTABLE_CREDENTIAL", "Username must not be empty"))
    for item in upsertions:
        problem = _check_upsertion(item)
        if problem is not None:
            errors.setdefault(item["name"], problem)
    store = _store(state)
    existing = store.users()
    for item in deletions:
        mechanism = _TYPE_MECHANISMS.get(item["mechanism"])
        if mechanism is not None and mechanism not in existing.get(item["name"], {}):
            errors.setdefault(
                item["name"],
                (
                    "RESOURCE_NOT_FOUND",
                    "Attempt to delete a user credential that does not exist",
                ),
            )
    upserts = [
        (
            item["name"],
            _TYPE_MECHANISMS[item["mechanism"]],
            credential_from_salted(
                _TYPE_MECHANISMS[item["mechanism"]],
                bytes(item["salted_password"]),
                bytes(item["salt"]),
                item["iterations"],
            ),
        )
        for item in upsertions
        if item["name"] not in errors
    ]
    removals = [
        (item["name"], _TYPE_MECHANISMS[item["mechanism"]])
        for item in deletions
        if item["name"] not in errors
    ]
    if upserts or removals:
        await asyncio.to_thread(store.change, upserts, removals)
    results = []
    for name in dict.fromkeys(order):
        error, message = errors.get(name, ("NONE", None))
        results.append(
            {"user": name, "error_code": error_codes.code_for(error), "error_message": message}
        )
    return {"throttle_time_ms": 0, "results": results}


# --------------------------------------------------------------------- ACLs

# Kafka's own messages (DescribeAcls words it differently from the other two).
_NO_AUTHORIZER = "No Authorizer is configured."
_NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"


def _filter(item: dict[str, Any]) -> AclFilter:
    return AclFilter(
        resource_type=item["resource_type_filter"],
        resource_name=item.get("resource_name_filter"),
        pattern_type=item.get("pattern_type_filter", PatternType.LITERAL),
        principal=item.get("principal_filter"),
        host=item.get("host_filter"),
        operation=item["operation"],
        permission=item["permission_type"],
    )


def _binding_fields(acl: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": acl.resource_type,
        "resource_name": acl.resource_name,
        "pattern_type": acl.pattern_type,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation,
        "permission_type": acl.permission,
    }


async def create_acls(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """CreateAcls: each ACL validated, all valid ones persisted before the answer."""
    authorizer = state.authorizer
    creations = body.get("creations") or []
    if authorizer is None:
        code = error_codes.code_for("SECURITY_DISABLED")
        results = [{"error_code": code, "error_message": _NO_AUTHORIZER} for _ in creations]
        return {"throttle_time_ms": 0, "results": results}
    valid: list[AclBinding] = []
    results = []
    for item in creations:
        acl = AclBinding(
            item["resource_type"],
            item["resource_name"],
            item.get("resource_pattern_type", PatternType.LITERAL),
            item["principal"],
            item["host"],
            item["operation"],
            item["permission_type"],
        )
        problem = validate(acl)
        if problem is None:
            valid.append(acl)
            results.append({"error_code": 0, "error_message": None})
        else:
            results.append(
                {"error_code": error_codes.code_for("INVALID_REQUEST"), "error_message": problem}
            )
    if valid:
        await asyncio.to_thread(
            change_shared, state, authorizer.reload, functools.partial(authorizer.create, valid)
        )
    return {"throttle_time_ms": 0, "results": results}


async def describe_acls(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DescribeAcls: the ACLs a filter selects, grouped by resource pattern."""
    authorizer = state.authorizer
    if authorizer is None:
        return {
            "throttle_time_ms": 0,
            "error_code": error_codes.code_for("SECURITY_DISABLED"),
            "error_message": _NO_AUTHORIZER_DESCRIBE,
            "resources": [],
        }
    grouped: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for acl in authorizer.acls(_filter(body)):
        key = (acl.resource_type, acl.resource_name, acl.pattern_type)
        grouped.setdefault(key, []).append(
            {
                "principal": acl.principal,
                "host": acl.host,
                "operation": acl.operation,
                "permission_type": acl.permission,
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in grouped.items()
        ],
    }


async def delete_acls(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DeleteAcls: per filter, the ACLs it removed."""
    authorizer = state.authorizer
    filters = body.get("filters") or []
    if authorizer is None:
        code = error_codes.code_for("SECURITY_DISABLED")
        return {
            "throttle_time_ms": 0,
            "filter_results": [
                {"error_code": code, "error_message": _NO_AUTHORIZER, "matching_acls": []}
                for _ in filters
            ],
        }
    removed = await asyncio.to_thread(
        change_shared,
        state,
        authorizer.reload,
        functools.partial(authorizer.delete, [_filter(f) for f in filters]),
    )
    return {
        "throttle_time_ms": 0,
        "filter_results": [
            {
                "error_code": 0,
                "error_message": None,
                "matching_acls": [
                    {"error_code": 0, "error_message": None, **_binding_fields(acl)}
                    for acl in group
                ],
            }
            for group in removed
        ],
    }
