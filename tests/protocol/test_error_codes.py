"""Kafka error codes: the table, lookups, exception mapping, and kafka-python's numbers."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import seglog.errors
import seglog.protocol.errors
from seglog.protocol import error_codes


def test_table_is_consistent() -> None:
    codes = [code for code, _ in error_codes.ERRORS.values()]
    assert len(codes) == len(set(codes))
    assert sorted(codes) == list(range(-1, 134))


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("UNKNOWN_SERVER_ERROR", -1),
        ("NONE", 0),
        ("OFFSET_OUT_OF_RANGE", 1),
        ("CORRUPT_MESSAGE", 2),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3),
        ("INVALID_FETCH_SIZE", 4),
        ("LEADER_NOT_AVAILABLE", 5),
        ("NOT_LEADER_OR_FOLLOWER", 6),
        ("REQUEST_TIMED_OUT", 7),
        ("MESSAGE_TOO_LARGE", 10),
        ("COORDINATOR_LOAD_IN_PROGRESS", 14),
        ("COORDINATOR_NOT_AVAILABLE", 15),
        ("NOT_COORDINATOR", 16),
        ("INVALID_TOPIC_EXCEPTION", 17),
        ("RECORD_LIST_TOO_LARGE", 18),
        ("INVALID_REQUIRED_ACKS", 21),
        ("ILLEGAL_GENERATION", 22),
        ("INCONSISTENT_GROUP_PROTOCOL", 23),
        ("INVALID_GROUP_ID", 24),
        ("UNKNOWN_MEMBER_ID", 25),
        ("INVALID_SESSION_TIMEOUT", 26),
        ("REBALANCE_IN_PROGRESS", 27),
        ("INVALID_COMMIT_OFFSET_SIZE", 28),
        ("INVALID_TIMESTAMP", 32),
        ("UNSUPPORTED_SASL_MECHANISM", 33),
        ("UNSUPPORTED_VERSION", 35),
        ("TOPIC_ALREADY_EXISTS", 36),
        ("INVALID_PARTITIONS", 37),
        ("INVALID_REPLICATION_FACTOR", 38),
        ("INVALID_CONFIG", 40),
        ("INVALID_REQUEST", 42),
        ("UNSUPPORTED_FOR_MESSAGE_FORMAT", 43),
        ("POLICY_VIOLATION", 44),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45),
        ("DUPLICATE_SEQUENCE_NUMBER", 46),
        ("INVALID_PRODUCER_EPOCH", 47),
        ("KAFKA_STORAGE_ERROR", 56),
        ("UNKNOWN_PRODUCER_ID", 59),
        ("NON_EMPTY_GROUP", 68),
        ("GROUP_ID_NOT_FOUND", 69),
        ("FETCH_SESSION_ID_NOT_FOUND", 70),
        ("INVALID_FETCH_SESSION_EPOCH", 71),
        ("FENCED_LEADER_EPOCH", 74),
        ("UNKNOWN_LEADER_EPOCH", 75),
        ("UNSUPPORTED_COMPRESSION_TYPE", 76),
        ("OFFSET_NOT_AVAILABLE", 78),
        ("MEMBER_ID_REQUIRED", 79),
        ("GROUP_MAX_SIZE_REACHED", 81),
        ("FENCED_INSTANCE_ID", 82),
        ("GROUP_SUBSCRIBED_TO_TOPIC", 86),
        ("INVALID_RECORD", 87),
        ("UNSTABLE_OFFSET_COMMIT", 88),
        ("UNKNOWN_TOPIC_ID", 100),
        ("INCONSISTENT_TOPIC_ID", 103),
        ("TRANSACTION_ABORTABLE", 120),
    ],
)
def test_codes(name: str, code: int) -> None:
    assert error_codes.code_for(name) == code
    assert error_codes.name_for(code) == name


def test_lookups() -> None:
    assert error_codes.name_for(9999) == "UNKNOWN(9999)"
    with pytest.raises(KeyError):
        error_codes.code_for("NO_SUCH_ERROR")
    assert error_codes.is_retriable(error_codes.code_for("NOT_LEADER_OR_FOLLOWER"))
    assert error_codes.is_retriable(error_codes.code_for("CORRUPT_MESSAGE"))
    assert error_codes.is_retriable(error_codes.code_for("UNKNOWN_TOPIC_ID"))
    assert not error_codes.is_retriable(error_codes.code_for("OFFSET_OUT_OF_RANGE"))
    assert not error_codes.is_retriable(error_codes.code_for("UNKNOWN_PRODUCER_ID"))
    assert not error_codes.is_retriable(9999)


def test_code_for_exception() -> None:
    assert error_codes.code_for_exception(seglog.errors.OffsetOutOfRangeError("x")) == 1
    assert error_codes.code_for_exception(seglog.errors.StorageError("x")) == 56
    assert error_codes.code_for_exception(seglog.protocol.errors.DecodeError("x")) == 42
    assert error_codes.code_for_exception(RuntimeError("x")) == -1

    class Odd(Exception):
        kafka_error = "NOT_A_KAFKA_ERROR"

    assert error_codes.code_for_exception(Odd()) == -1


@pytest.mark.parametrize("module", [seglog.errors, seglog.protocol.errors])
def test_every_error_class_names_a_known_kafka_error(module: object) -> None:
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if issubclass(cls, seglog.errors.SeglogError):
            assert cls.kafka_error in error_codes.ERRORS, cls


# kafka-python names a few codes by their older names.
_ALIASES = {
    -1: "UNKNOWN",
    0: "NO_ERROR",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC",
    39: "INVALID_REPLICATION_ASSIGNMENT",
}


def test_numbers_agree_with_kafka_python() -> None:
    import kafka.errors as kerrors

    def is_error_class(cls: Any) -> bool:
        return (
            isinstance(cls, type)
            and issubclass(cls, kerrors.BrokerResponseError)
            and isinstance(getattr(cls, "errno", None), int)
        )

    candidates: list[Any] = list(vars(kerrors).values())
    theirs: dict[int, Any] = {cls.errno: cls for cls in candidates if is_error_class(cls)}
    # kafka-python stops at 127; the newer codes are checked by their Kafka numbers above.
    ours = {code for code, _ in error_codes.ERRORS.values() if code in theirs or code < 128}
    assert set(theirs) >= ours
    for name, (code, retriable) in error_codes.ERRORS.items():
        if code not in theirs:
            continue
        assert theirs[code].message == _ALIASES.get(code, name), code
        # kafka-python's flags agree except where Kafka's own classification is followed.
        if code != 2:  # Kafka's CorruptRecordException is retriable
            assert theirs[code].retriable == retriable, name
