"""SCRAM credentials (KIP-554): DescribeUserScramCredentials 50, AlterUserScramCredentials 51.

SCRAM mechanism codes: SCRAM-SHA-256 1, SCRAM-SHA-512 2.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    50,
    "DescribeUserScramCredentials",
    "0",
    flexible=0,
    request=(F("users", "[]struct", nullable="0+", fields=(F("name", "string"),)),),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F(
            "results",
            "[]struct",
            fields=(
                F("user", "string"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F(
                    "credential_infos",
                    "[]struct",
                    fields=(F("mechanism", "int8"), F("iterations", "int32")),
                ),
            ),
        ),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    51,
    "AlterUserScramCredentials",
    "0",
    flexible=0,
    request=(
        F("deletions", "[]struct", fields=(F("name", "string"), F("mechanism", "int8"))),
        F(
            "upsertions",
            "[]struct",
            fields=(
                F("name", "string"),
                F("mechanism", "int8"),
                F("iterations", "int32"),
                F("salt", "bytes"),
                F("salted_password", "bytes"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "results",
            "[]struct",
            fields=(
                F("user", "string"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ),
        ),
    ),
)
