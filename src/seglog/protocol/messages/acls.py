"""ACLs (KIP-140): DescribeAcls, CreateAcls and DeleteAcls, from the oldest version Kafka 4
accepts."""

from __future__ import annotations

from seglog.protocol.schema import Api, F

_FILTER = (
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=3),
    F("principal_filter", "string", nullable="0+"),
    F("host_filter", "string", nullable="0+"),
    F("operation", "int8"),
    F("permission_type", "int8"),
)

DESCRIBE_ACLS = Api(
    29,
    "DescribeAcls",
    "1-3",
    flexible=2,
    request=_FILTER,
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F(
            "resources",
            "[]struct",
            fields=(
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("pattern_type", "int8", "1+", default=3),
                F(
                    "acls",
                    "[]struct",
                    fields=(
                        F("principal", "string"),
                        F("host", "string"),
                        F("operation", "int8"),
                        F("permission_type", "int8"),
                    ),
                ),
            ),
        ),
    ),
)

CREATE_ACLS = Api(
    30,
    "CreateAcls",
    "1-3",
    flexible=2,
    request=(
        F(
            "creations",
            "[]struct",
            fields=(
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("resource_pattern_type", "int8", "1+", default=3),
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "results",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
            ),
        ),
    ),
)

DELETE_ACLS = Api(
    31,
    "DeleteAcls",
    "1-3",
    flexible=2,
    request=(F("filters", "[]struct", fields=_FILTER),),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "filter_results",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
                F(
                    "matching_acls",
                    "[]struct",
                    fields=(
                        F("error_code", "int16"),
                        F("error_message", "string", nullable="0+", default=None),
                        F("resource_type", "int8"),
                        F("resource_name", "string"),
                        F("pattern_type", "int8", "1+", default=3),
                        F("principal", "string"),
                        F("host", "string"),
                        F("operation", "int8"),
                        F("permission_type", "int8"),
                    ),
                ),
            ),
        ),
    ),
)
