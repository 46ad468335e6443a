"""ApiVersions (key 18): the first request on most connections.

v1 adds throttle_time_ms; v3 is the first flexible version and adds the
client's software name and version to the request, and supported and
finalized features (tagged) to the response. The response header of every
ApiVersions version is v0 (no tagged fields), see :mod:`seglog.protocol.headers`.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

API_VERSIONS = Api(
    18,
    "ApiVersions",
    "0-4",
    flexible=3,
    request=(
        F("client_software_name", "string", "3+", ignorable=True),
        F("client_software_version", "string", "3+", ignorable=True),
    ),
    response=(
        F("error_code", "int16"),
        F(
            "api_keys",
            "[]struct",
            fields=(
                F("api_key", "int16"),
                F("min_version", "int16"),
                F("max_version", "int16"),
            ),
        ),
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F(
            "supported_features",
            "[]struct",
            "3+",
            tag=0,
            ignorable=True,
            fields=(
                F("name", "string", "3+"),
                F("min_version", "int16", "3+"),
                F("max_version", "int16", "3+"),
            ),
        ),
        F("finalized_features_epoch", "int64", "3+", tag=1, default=-1, ignorable=True),
        F(
            "finalized_features",
            "[]struct",
            "3+",
            tag=2,
            ignorable=True,
            fields=(
                F("name", "string", "3+"),
                F("max_version_level", "int16", "3+"),
                F("min_version_level", "int16", "3+"),
            ),
        ),
        F("zk_migration_ready", "bool", "3+", tag=3, ignorable=True),
    ),
)
