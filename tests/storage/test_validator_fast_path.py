"""The single-batch fast path of the validator gives the full path's answer, error or not."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.config import LONG_MAX, LogConfig
from seglog.errors import SeglogError
from seglog.records import batch
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.storage.validator import fast_rules, validate_and_assign, validate_single_batch

NOW = 1_700_000_000_000


def _outcome(records: bytes, config: LogConfig, *, fast: bool) -> Any:
    rules = fast_rules(config) if fast else None
    try:
        got = None if rules is None else validate_single_batch(records, rules, 1000, NOW)
        if got is None:
            got = validate_and_assign(records, config, 1000, NOW, "t-0")
    except SeglogError as exc:
        return (type(exc), str(exc), exc.record_errors if hasattr(exc, "record_errors") else None)
    return (b"".join(bytes(c) for c in got.chunks), got._replace(chunks=None))


@st.composite
def _appends(draw: st.DrawFn) -> tuple[bytes, LogConfig]:
    count = draw(st.integers(1, 5))
    timestamp = draw(st.sampled_from([-1, -5, NOW - 10, NOW, NOW + 7_200_000]))
    producer = draw(st.sampled_from([-1, 7]))
    keys = draw(st.lists(st.sampled_from([None, b"k"]), min_size=count, max_size=count))
    data = build_batch(
        [SimpleRecord(value=b"v%d" % i, key=keys[i], timestamp=timestamp) for i in range(count)],
        codec=draw(st.sampled_from([Codec.NONE, Codec.GZIP])),
        producer_id=producer,
        producer_epoch=0 if producer >= 0 else -1,
        base_sequence=draw(st.sampled_from([-1, 0]) | st.integers(2**31 - 6, 2**31 - 1))
        if producer >= 0
        else -1,
        is_transactional=producer >= 0 and draw(st.booleans()),
        is_control=draw(st.booleans()) and draw(st.booleans()),
    )
    buf = bytearray(data)
    damage = "none"
    if draw(st.booleans()):
        damage = draw(st.sampled_from(["byte", "count", "length", "two batches", "cut"]))
    if damage == "byte":
        buf[draw(st.integers(batch.ATTRIBUTES_OFFSET, len(buf) - 1))] ^= 0x01
    elif damage == "count":
        buf[batch.HEADER_SIZE - 1] ^= 0x02
    elif damage == "length":
        buf[11] ^= 0x01
    elif damage == "two batches":
        buf += data
    elif damage == "cut":
        del buf[draw(st.integers(1, len(buf) - 1)) :]
    if draw(st.booleans()):
        # The configs the fast path takes (and the topic codec it may refuse).
        config = LogConfig(
            compression_type=draw(st.sampled_from(["producer", "uncompressed", "gzip"])),
            message_timestamp_after_max_ms=draw(st.sampled_from([3_600_000, LONG_MAX])),
        )
        return bytes(buf), config
    config = LogConfig(
        compression_type=draw(st.sampled_from(["producer", "uncompressed", "gzip"])),
        max_message_bytes=draw(st.sampled_from([1_048_588, 80])),
        message_timestamp_after_max_ms=draw(st.sampled_from([3_600_000, LONG_MAX])),
        message_timestamp_before_max_ms=draw(st.sampled_from([LONG_MAX, 60_000])),
        message_timestamp_type=draw(st.sampled_from(["CreateTime", "LogAppendTime"])),
        cleanup_policy=draw(st.sampled_from(["delete", "compact"])),
    )
    return bytes(buf), config


@settings(max_examples=400, deadline=None)
@given(_appends())
def test_fast_path_answers_as_the_full_path(case: tuple[bytes, LogConfig]) -> None:
    records, config = case
    assert _outcome(records, config, fast=True) == _outcome(records, config, fast=False)


def test_fast_path_refuses_a_corrupt_batch() -> None:
    data = bytearray(build_batch([SimpleRecord(value=b"x" * 100, timestamp=NOW)]))
    data[-1] ^= 0xFF
    config = LogConfig()
    rules = fast_rules(config)
    assert rules is not None
    assert validate_single_batch(bytes(data), rules, 0, NOW) is None
    try:
        validate_and_assign(bytes(data), config, 0, NOW, "t-0")
    except SeglogError as exc:
        assert exc.kafka_error == "CORRUPT_MESSAGE"
    else:
        raise AssertionError("a corrupt batch was accepted")


def test_fast_path_wraps_sequence_numbers_as_the_full_path() -> None:
    config = LogConfig()
    for base_sequence in range(2**31 - 6, 2**31):
        for count in (1, 2, 3, 6):
            data = build_batch(
                [SimpleRecord(value=b"v", timestamp=NOW)] * count,
                producer_id=3,
                producer_epoch=0,
                base_sequence=base_sequence,
            )
            assert _outcome(data, config, fast=True) == _outcome(data, config, fast=False)
