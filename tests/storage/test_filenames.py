"""File and directory names of a log directory, and Kafka's topic name rules."""

from __future__ import annotations

import string
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import InvalidTopicError
from seglog.storage import filenames

LEGAL_CHARS = string.ascii_letters + string.digits + "._-"
SUFFIXES = [".log", ".index", ".timeindex", ".txnindex", ".snapshot"]
TRANSIENT = ["", ".deleted", ".cleaned", ".swap"]

legal_topics = st.text(alphabet=LEGAL_CHARS, min_size=1, max_size=249).filter(
    lambda t: t not in (".", "..")
)


def is_legal_topic(name: str) -> bool:
    """Kafka's rules, written out independently of the code under test."""
    return 0 < len(name) <= 249 and name not in (".", "..") and all(c in LEGAL_CHARS for c in name)


def test_segment_paths() -> None:
    d = Path("/data/orders-0")
    assert filenames.offset_name(0) == "00000000000000000000"
    assert filenames.offset_name(42) == "00000000000000000042"
    assert filenames.offset_name(2**63 - 1) == "09223372036854775807"
    assert filenames.log_path(d, 42) == d / "00000000000000000042.log"
    assert filenames.index_path(d, 42) == d / "00000000000000000042.index"
    assert filenames.time_index_path(d, 42) == d / "00000000000000000042.timeindex"
    assert filenames.txn_index_path(d, 42) == d / "00000000000000000042.txnindex"
    assert filenames.snapshot_path(d, 42) == d / "00000000000000000042.snapshot"
    assert filenames.partition_dir_name("orders", 3) == "orders-3"


@given(
    offset=st.integers(0, 2**63 - 1),
    suffix=st.sampled_from(SUFFIXES),
    transient=st.sampled_from(TRANSIENT),
)
def test_parse_base_offset_round_trip(offset: int, suffix: str, transient: str) -> None:
    name = filenames.offset_name(offset) + suffix + transient
    assert len(name) == 20 + len(suffix) + len(transient)
    assert filenames.parse_base_offset(name) == offset


@pytest.mark.parametrize(
    "name",
    [
        "42.log",  # not 20 digits
        "000000000000000000042.log",  # 21 digits
        "00000000000000000042",  # no suffix
        "00000000000000000042.log.tmp",
        "00000000000000000042.LOG",
        "00000000000000000042.log\n",
        "00000000000000000042.log ",
        "x00000000000000000042.log",
        "\u0660" * 20 + ".log",  # Arabic-Indic digits
        "-0000000000000000042.log",
        "partition.metadata",
        "leader-epoch-checkpoint",
        "",
    ],
)
def test_parse_base_offset_rejects(name: str) -> None:
    assert filenames.parse_base_offset(name) is None


@given(st.text(max_size=40))
def test_parse_base_offset_accepts_only_what_offset_name_writes(name: str) -> None:
    offset = filenames.parse_base_offset(name)
    if offset is not None:
        assert name.startswith(filenames.offset_name(offset))
        assert name[20:] in {s + t for s in SUFFIXES for t in TRANSIENT}


@given(topic=legal_topics, partition=st.integers(0, 2**31 - 1))
def test_partition_dir_round_trip(topic: str, partition: int) -> None:
    name = filenames.partition_dir_name(topic, partition)
    assert filenames.parse_partition_dir(name) == (topic, partition)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("my-topic-3", ("my-topic", 3)),
        ("a-0", ("a", 0)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("t-0.abc-delete", None),
        ("t-0.0123456789abcdef0123456789abcdef-future", None),
        ("t-0.0123456789abcdef0123456789abcdef-stray", None),
        ("nodash", None),
        ("-3", None),  # no topic
        ("t-", None),  # no partition
        ("t--1", ("t-", 1)),  # topic "t-", not partition -1
        ("t.-0", ("t.", 0)),
        ("t-x", None),
        ("t-\u0663", None),  # a non-ASCII digit
        ("t-\u00b2", None),  # superscript two: isdigit() but not a number
        ("t-03", None),  # partition_dir_name would write "t-3"
        ("bad topic-0", None),
        ("..-0", None),
        ("x" * 250 + "-0", None),
    ],
)
def test_parse_partition_dir(name: str, expected: tuple[str, int] | None) -> None:
    assert filenames.parse_partition_dir(name) == expected


@given(st.text(max_size=30))
def test_parse_partition_dir_never_raises_and_round_trips(name: str) -> None:
    parsed = filenames.parse_partition_dir(name)
    if parsed is not None:
        topic, partition = parsed
        assert is_legal_topic(topic) and partition >= 0
        assert filenames.partition_dir_name(topic, partition) == name


@pytest.mark.parametrize("name", ["a", "a.b_c-9", "__consumer_offsets", "x" * 249, "...", ".a"])
def test_legal_topic_names(name: str) -> None:
    filenames.validate_topic_name(name)


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a/b", "a b", "x" * 250, "caf\u00e9", "tab\t", "a\n", "a:b", "a*", "\u0661"],
)
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        filenames.validate_topic_name(name)


@given(st.text(max_size=260) | st.text(alphabet=LEGAL_CHARS, min_size=245, max_size=255))
def test_validate_topic_name_matches_kafkas_rules(name: str) -> None:
    if is_legal_topic(name):
        filenames.validate_topic_name(name)
    else:
        with pytest.raises(InvalidTopicError):
            filenames.validate_topic_name(name)


@given(legal_topics, st.integers(0, 2**31 - 1), st.uuids())
def test_delete_dir_name_fits_a_file_name(topic: str, partition: int, unique: uuid.UUID) -> None:
    name = filenames.delete_dir_name(topic, partition, unique)
    assert len(name.encode()) <= 255
    assert name.endswith(f"-{partition}.{unique.hex}-delete")
    assert topic.startswith(name[: -len(f"-{partition}.{unique.hex}-delete")])
    # Never taken for a live partition.
    assert filenames.parse_partition_dir(name) is None


def test_delete_dir_name_keeps_short_topics_whole() -> None:
    unique = uuid.UUID(int=1)
    assert filenames.delete_dir_name("orders", 3, unique) == f"orders-3.{unique.hex}-delete"
    long = "t" * 249
    assert len(filenames.delete_dir_name(long, 0, unique)) == 255


def test_internal_topics_and_collisions() -> None:
    assert filenames.is_internal("__consumer_offsets")
    assert filenames.is_internal("__transaction_state")
    assert not filenames.is_internal("__mine")
    assert filenames.unify_collision_chars("a.b_c") == "a_b_c"
    assert filenames.has_collision_chars("a.b") and not filenames.has_collision_chars("a-b")
