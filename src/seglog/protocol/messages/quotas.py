"""Client quotas (KIP-546): DescribeClientQuotas and AlterClientQuotas."""

from __future__ import annotations

from seglog.protocol.schema import Api, F

_ENTITY = (
    F("entity_type", "string"),
    F("entity_name", "string", nullable="0+"),
)

DESCRIBE_CLIENT_QUOTAS = Api(
    48,
    "DescribeClientQuotas",
    "0-1",
    flexible=1,
    request=(
        F(
            "components",
            "[]struct",
            fields=(
                F("entity_type", "string"),
                F("match_type", "int8"),
                F("match", "string", nullable="0+"),
            ),
        ),
        F("strict", "bool"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F(
            "entries",
            "[]struct",
            nullable="0+",
            fields=(
                F("entity", "[]struct", fields=_ENTITY),
                F(
                    "values",
                    "[]struct",
                    fields=(
                        F("key", "string"),
                        F("value", "float64"),
                    ),
                ),
            ),
        ),
    ),
)

ALTER_CLIENT_QUOTAS = Api(
    49,
    "AlterClientQuotas",
    "0-1",
    flexible=1,
    request=(
        F(
            "entries",
            "[]struct",
            fields=(
                F("entity", "[]struct", fields=_ENTITY),
                F(
                    "ops",
                    "[]struct",
                    fields=(
                        F("key", "string"),
                        F("value", "float64"),
                        F("remove", "bool"),
                    ),
                ),
            ),
        ),
        F("validate_only", "bool"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "entries",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
                F("entity", "[]struct", fields=_ENTITY),
            ),
        ),
    ),
)
