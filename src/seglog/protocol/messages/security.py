"""ACLs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31) and SCRAM credentials (KIP-554:
DescribeUserScramCredentials 50, AlterUserScramCredentials 51).

Codes used in these messages: resource types UNKNOWN 0, ANY 1, TOPIC 2, GROUP 3,
CLUSTER 4, TRANSACTIONAL_ID 5, DELEGATION_TOKEN 6, USER 7; pattern types
UNKNOWN 0, ANY 1, MATCH 2, LITERAL 3, PREFIXED 4; operations UNKNOWN 0, ANY 1,
ALL 2, READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12;
permission types UNKNOWN 0, ANY 1, DENY 2, ALLOW 3; SCRAM mechanisms
SCRAM-SHA-256 1, SCRAM-SHA-512 2.
"""

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
    "0-3",
    flexible=2,
    request=_FILTER,
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
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
    "0-3",
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
                F("error_message", "string", nullable="0+"),
            ),
        ),
    ),
)

DELETE_ACLS = Api(
    31,
    "DeleteAcls",
    "0-3",
    flexible=2,
    request=(F("filters", "[]struct", fields=_FILTER),),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "filter_results",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F(
                    "matching_acls",
                    "[]struct",
                    fields=(
                        F("error_code", "int16"),
                        F("error_message", "string", nullable="0+"),
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
