"""DescribeClientQuotas and AlterClientQuotas (KIP-546), checked as Kafka's controller does.

Enforcement is in :mod:`seglog.broker.dispatch`; settings, rates and throttle
times in :mod:`seglog.broker.quotas`.
"""

from __future__ import annotations

import functools
import ipaddress
import math
from typing import Any

from seglog.broker import quotas
from seglog.broker.blocking import run_blocking
from seglog.broker.nodes.shared import change_shared
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader

_INVALID_REQUEST = error_codes.code_for("INVALID_REQUEST")
_EXACT, _DEFAULT, _ANY = 0, 1, 2
_LONG_MAX = 2**63 - 1


class _Invalid(Exception):
    """A quota request Kafka refuses with INVALID_REQUEST and this message."""


def _entity(pairs: list[dict[str, Any]]) -> quotas.Entity:
    """A request's entity, checked (Kafka's ClientQuotaControlManager.validateEntity)."""
    if not pairs:
        raise _Invalid("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for pair in pairs:
        kind, name = pair["entity_type"], pair["entity_name"]
        if kind in seen:
            raise _Invalid(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in quotas.ENTITY_TYPES:
            raise _Invalid(f"Unhandled client quota entity type: {kind}")
        if name == "":
            raise _Invalid(f"Empty {kind} not supported")
        seen[kind] = name
    if quotas.IP in seen:
        if len(seen) > 1:
            raise _Invalid(  # Kafka's words, its missing space included
                "Invalid quota entity combination, IP entity shouldnot be combined with User "
                "or ClientId"
            )
        name = seen[quotas.IP]
        if name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise _Invalid(f"{name} is not a valid IP or resolvable host.") from None
    return quotas.make_entity(seen.items())


def _check_value(entity: quotas.Entity, key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue."""
    keys = quotas.IP_KEYS if any(kind == quotas.IP for kind, _ in entity) else quotas.CLIENT_KEYS
    if key not in keys:
        raise _Invalid(f"Invalid configuration key {key}")
    if not value > 0.0:
        raise _Invalid(f"Quota {key} must be greater than 0")
    if keys[key]:
        if value > _LONG_MAX:
            raise _Invalid(f"Proposed value for {key} is too large for a LONG.")
        if not math.isclose(value, round(value), rel_tol=0, abs_tol=1e-9):
            raise _Invalid(f"{key} cannot be a fractional value.")


async def alter_client_quotas(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """AlterClientQuotas: set or remove quotas, all or none of an entry; persisted."""
    answers = []
    changes: dict[quotas.Entity, dict[str, float | None]] = {}
    for entry in body["entries"]:
        answer: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "entity": entry["entity"],
        }
        try:
            entity = _entity(entry["entity"])
            ops: dict[str, float | None] = {}
            for op in entry["ops"]:
                if op["remove"]:
                    ops[op["key"]] = None
                    keys = (
                        quotas.IP_KEYS
                        if any(k == quotas.IP for k, _ in entity)
                        else quotas.CLIENT_KEYS
                    )
                    if op["key"] not in keys:
                        raise _Invalid(f"Invalid configuration key {op['key']}")
                else:
                    _check_value(entity, op["key"], op["value"])
                    ops[op["key"]] = op["value"]
            changes.setdefault(entity, {}).update(ops)
        except _Invalid as exc:
            answer["error_code"] = _INVALID_REQUEST
            answer["error_message"] = str(exc)
        answers.append(answer)
    if changes and not body.get("validate_only"):
        try:
            await run_blocking(
                state.log_dir.env,
                change_shared,
                state,
                state.quotas.reload,
                functools.partial(state.quotas.alter, changes),
            )
        except SeglogError as exc:
            for answer in answers:
                if answer["error_code"] == 0:
                    answer["error_code"] = error_codes.code_for_exception(exc)
                    answer["error_message"] = str(exc)
    return {"throttle_time_ms": 0, "entries": answers}


def _matches(entity: quotas.Entity, components: list[dict[str, Any]], strict: bool) -> bool:
    names = dict(entity)
    for component in components:
        kind = component["entity_type"]
        if kind not in names:
            return False
        match_type = component["match_type"]
        if match_type == _EXACT and names[kind] != component["match"]:
            return False
        if match_type == _DEFAULT and names[kind] is not None:
            return False
    return not strict or len(names) == len(components)


async def describe_client_quotas(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DescribeClientQuotas: the entities whose quotas match every component of the filter."""
    components = body["components"]
    kinds = [c["entity_type"] for c in components]
    error: str | None = None
    if len(set(kinds)) != len(kinds):
        error = "Duplicate entity type in filter"
    elif any(kind not in quotas.ENTITY_TYPES for kind in kinds):
        error = f"Unknown entity type: {next(k for k in kinds if k not in quotas.ENTITY_TYPES)}"
    elif any(c["match_type"] not in (_EXACT, _DEFAULT, _ANY) for c in components):
        error = "Unknown match type"
    elif any(c["match_type"] == _EXACT and c["match"] is None for c in components):
        error = "Exact match requires a name"
    elif quotas.IP in kinds and len(kinds) > 1:
        error = "Invalid entity filter component combination, IP filter component should not "
        error += "be used with user or clientId filter component."
    if error is not None:
        return {
            "throttle_time_ms": 0,
            "error_code": _INVALID_REQUEST,
            "error_message": error,
            "entries": None,
        }
    entries = [
        {
            "entity": [{"entity_type": k, "entity_name": v} for k, v in entity],
            "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
        }
        for entity, values in sorted(state.quotas.entries().items(), key=lambda e: str(e[0]))
        if _matches(entity, components, bool(body.get("strict")))
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}
