"""DescribeAcls, CreateAcls and DeleteAcls, answered as Kafka without an authorizer.

seglog authorizes nothing (every client may do everything), as a Kafka broker
without ``authorizer.class.name``; Kafka's tools then get SECURITY_DISABLED
from the ACL APIs, and so do they here.
"""

from __future__ import annotations

from typing import Any

from seglog.broker.state import BrokerState
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader

_SECURITY_DISABLED = error_codes.code_for("SECURITY_DISABLED")


async def describe_acls(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """DescribeAcls: SECURITY_DISABLED, with Kafka's message."""
    return {
        "throttle_time_ms": 0,
        "error_code": _SECURITY_DISABLED,
        "error_message": "No Authorizer is configured on the broker",
        "resources": [],
    }


async def create_acls(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """CreateAcls: SECURITY_DISABLED for each creation."""
    result = {"error_code": _SECURITY_DISABLED, "error_message": "No Authorizer is configured."}
    return {"throttle_time_ms": 0, "results": [dict(result) for _ in body["creations"]]}


async def delete_acls(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """DeleteAcls: SECURITY_DISABLED for each filter."""
    result = {
        "error_code": _SECURITY_DISABLED,
        "error_message": "No Authorizer is configured.",
        "matching_acls": [],
    }
    return {"throttle_time_ms": 0, "filter_results": [dict(result) for _ in body["filters"]]}
