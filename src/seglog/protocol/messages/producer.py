"""InitProducerId (key 22): producer ids and epochs for idempotence and transactions.

v2 is the first flexible version; v3 lets a producer bump its epoch by
passing its current producer id and epoch.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

INIT_PRODUCER_ID = Api(
    22,
    "InitProducerId",
    "0-5",
    flexible=2,
    request=(
        F("transactional_id", "string", nullable="0+"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", "3+", default=-1),
        F("producer_epoch", "int16", "3+", default=-1),
    ),
    response=(
        F("throttle_time_ms", "int32", ignorable=True),
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16"),
    ),
)
