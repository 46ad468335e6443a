"""Kafka's small text files: offset checkpoints, the clean-shutdown marker, partition.metadata
and meta.properties, byte for byte as Kafka writes them."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptCheckpointError, StorageError
from seglog.storage import checkpoints, io

topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=20)


def test_offset_checkpoint_text_is_kafkas(tmp_path: Path) -> None:
    path = tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT
    checkpoints.write_offset_checkpoint(path, {("orders", 1): 980, ("orders", 0): 1200})
    assert path.read_bytes() == b"0\n2\norders 0 1200\norders 1 980\n"
    assert checkpoints.read_offset_checkpoint(path) == {("orders", 0): 1200, ("orders", 1): 980}
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no .tmp left


def test_empty_and_missing_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / checkpoints.LOG_START_OFFSET_CHECKPOINT
    checkpoints.write_offset_checkpoint(path, {})
    assert path.read_bytes() == b"0\n0\n"
    assert checkpoints.read_offset_checkpoint(path) == {}
    assert checkpoints.read_offset_checkpoint(tmp_path / "missing") == {}
    # As Kafka reads them: a file it just created (empty), or with only a version line.
    for content in (b"", b"0\n"):
        path.write_bytes(content)
        assert checkpoints.read_offset_checkpoint(path) == {}


def test_checkpoints_are_sorted_by_topic_then_partition(tmp_path: Path) -> None:
    path = tmp_path / checkpoints.CLEANER_OFFSET_CHECKPOINT
    entries = {("b", 10): 1, ("a", 2): 2, ("b", 9): 3, ("a", 10): 4}
    checkpoints.write_offset_checkpoint(path, entries)
    assert path.read_text() == "0\n4\na 2 2\na 10 4\nb 9 3\nb 10 1\n"  # numeric partitions


def test_reads_what_kafka_writes(tmp_path: Path) -> None:
    """Kafka writes entries unsorted; any whitespace separates the fields."""
    path = tmp_path / checkpoints.REPLICATION_OFFSET_CHECKPOINT
    path.write_bytes(b"0\n3\nz 1 5\na 0 0\n__consumer_offsets 49 123456789012\n")
    assert checkpoints.read_offset_checkpoint(path) == {
        ("z", 1): 5,
        ("a", 0): 0,
        ("__consumer_offsets", 49): 123456789012,
    }


@settings(max_examples=50)
@given(
    st.dictionaries(
        st.tuples(topics, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1), max_size=30
    )
)
def test_round_trip(
    tmp_path_factory: pytest.TempPathFactory, entries: dict[tuple[str, int], int]
) -> None:
    path = tmp_path_factory.mktemp("cp") / "recovery-point-offset-checkpoint"
    checkpoints.write_offset_checkpoint(path, entries)
    assert checkpoints.read_offset_checkpoint(path) == entries
    lines = path.read_text().split("\n")
    assert lines[:2] == ["0", str(len(entries))] and lines[-1] == ""
    assert lines[2:-1] == [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]


@pytest.mark.parametrize(
    "content",
    [
        b"1\n0\n",  # unknown version
        b"x\n0\n",
        b"0\nx\n",  # bad count
        b"0\n2\norders 0 1\n",  # fewer entries than the count
        b"0\n1\norders 0 1\norders 1 2\n",  # more entries than the count
        b"0\n1\norders zero 1\n",
        b"0\n1\norders 0 one\n",
        b"0\n1\norders 0\n",  # a field missing
        b"0\n1\norders 0 1 2\n",  # a field too many
        b"\xff\xfe0\n0\n",  # not UTF-8
        b"0\n1\nor\xe9ders 0 1\n",
    ],
)
def test_corrupt_checkpoints(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cp"
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError):
        checkpoints.read_offset_checkpoint(path)


@given(st.binary(max_size=60) | st.text(alphabet="0123 \nab", max_size=40).map(str.encode))
def test_any_content_reads_or_is_corrupt(
    tmp_path_factory: pytest.TempPathFactory, content: bytes
) -> None:
    path = tmp_path_factory.mktemp("cp") / "cp"
    path.write_bytes(content)
    try:
        entries = checkpoints.read_offset_checkpoint(path)
    except CorruptCheckpointError:
        return
    # Whatever reads back is what a rewrite would write.
    checkpoints.write_offset_checkpoint(path, entries)
    assert checkpoints.read_offset_checkpoint(path) == entries


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    marker = tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE
    assert marker.name == ".kafka_cleanshutdown"
    assert not checkpoints.consume_clean_shutdown(tmp_path)
    checkpoints.write_clean_shutdown(tmp_path)
    assert marker.read_bytes() == b'{"version":0,"brokerEpoch":0}'
    assert checkpoints.consume_clean_shutdown(tmp_path)
    assert not marker.exists()
    assert not checkpoints.consume_clean_shutdown(tmp_path)
    checkpoints.write_clean_shutdown(tmp_path, broker_epoch=17)
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": 17}
    assert marker.read_text() == '{"version":0,"brokerEpoch":17}'


def test_partition_metadata(tmp_path: Path) -> None:
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert checkpoints.read_partition_metadata(tmp_path) is None
    checkpoints.write_partition_metadata(tmp_path, topic_id)
    path = tmp_path / checkpoints.PARTITION_METADATA_FILE
    assert path.name == "partition.metadata"
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding.
    assert path.read_bytes() == b"version: 0\ntopic_id: EjRWeBI0VngSNFZ4EjRWeA"
    assert checkpoints.read_partition_metadata(tmp_path) == topic_id


@given(st.uuids().filter(lambda u: u.int != 0))
def test_partition_metadata_round_trip(
    tmp_path_factory: pytest.TempPathFactory, topic_id: uuid.UUID
) -> None:
    directory = tmp_path_factory.mktemp("p")
    checkpoints.write_partition_metadata(directory, topic_id)
    text = (directory / "partition.metadata").read_text()
    encoded = text.split("topic_id: ")[1]
    assert len(encoded) == 22 and "=" not in encoded and "+" not in encoded
    assert "/" not in encoded
    assert checkpoints.read_partition_metadata(directory) == topic_id


@pytest.mark.parametrize(
    "content",
    [
        b"version: 1\ntopic_id: EjRWeBI0VngSNFZ4EjRWeA",
        b"version: 0\n",
        b"version: 0\ntopic_id: not-base64!",
        b"version: 0\ntopic_id: EjRW",  # too short for a UUID
        b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",  # the zero UUID
        b"\xff\xfe",
    ],
)
def test_corrupt_partition_metadata(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "partition.metadata").write_bytes(content)
    with pytest.raises(CorruptCheckpointError):
        checkpoints.read_partition_metadata(tmp_path)


def test_meta_properties(tmp_path: Path) -> None:
    assert checkpoints.read_meta_properties(tmp_path) == {}
    checkpoints.write_meta_properties(tmp_path, 1, "abc", None)
    text = (tmp_path / checkpoints.META_PROPERTIES_FILE).read_text()
    lines = text.split("\n")
    assert lines[0].startswith("#")  # the timestamp comment Java's Properties.store writes
    assert lines[1:] == ["cluster.id=abc", "node.id=1", "version=1", ""]
    assert checkpoints.read_meta_properties(tmp_path) == {
        "cluster.id": "abc",
        "node.id": "1",
        "version": "1",
    }
    directory_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    checkpoints.write_meta_properties(tmp_path, 7, "Zx_9-AbC", directory_id)
    assert checkpoints.read_meta_properties(tmp_path) == {
        "cluster.id": "Zx_9-AbC",
        "directory.id": "EjRWeBI0VngSNFZ4EjRWeA",
        "node.id": "7",
        "version": "1",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.properties"]


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b"0\n1\n orders 0 1\n", 3),  # leading whitespace makes an empty first field
        (b"0\n2\norders 0 1\n\norders 1 1\n", 4),  # a blank line
        (b"0\n1\norders 0 1_0\n", 3),  # Python's int() would take it; Java's does not
        (b"0\n1\norders 2147483648 1\n", 3),  # partition beyond int32
        (b"0\n1\norders 0 9223372036854775808\n", 3),  # offset beyond int64
        (b"0\n-1\n", 2),
        (b" 0\n0\n", 1),
    ],
)
def test_errors_name_the_file_and_line(tmp_path: Path, content: bytes, line: int) -> None:
    path = tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError, match=f"{path.name}, line {line}:"):
        checkpoints.read_offset_checkpoint(path)


def test_windows_line_endings_and_tabs_are_read(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\r\n2\r\na\t0  7\r\nb 1 -1\r\n")
    assert checkpoints.read_offset_checkpoint(path) == {("a", 0): 7, ("b", 1): -1}


def test_a_directory_in_the_way_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "cp").mkdir()
    with pytest.raises(StorageError, match="cp"):
        checkpoints.read_offset_checkpoint(tmp_path / "cp")
    (tmp_path / "partition.metadata").mkdir()
    with pytest.raises(StorageError):
        checkpoints.read_partition_metadata(tmp_path)


def test_writes_are_atomic_and_reject_unwritable_topics(tmp_path: Path) -> None:
    written: list[tuple[Path, str]] = []

    class Recording(io.Env):
        def atomic_write_text(self, path: Path, text: str) -> None:
            written.append((path, text))
            super().atomic_write_text(path, text)

    env = Recording()
    path = tmp_path / "cp"
    checkpoints.write_offset_checkpoint(path, {("t", 0): 1}, env=env)
    checkpoints.write_clean_shutdown(tmp_path, 3, env=env)
    checkpoints.write_partition_metadata(tmp_path, uuid.UUID(int=1), env=env)
    checkpoints.write_meta_properties(tmp_path, 1, "c", None, env=env)
    assert [p.name for p, _ in written] == [
        "cp",
        ".kafka_cleanshutdown",
        "partition.metadata",
        "meta.properties",
    ]
    for bad in ("", "a b", "a\nb"):
        with pytest.raises(ValueError, match="cannot be written"):
            checkpoints.write_offset_checkpoint(path, {(bad, 0): 1}, env=env)
    assert checkpoints.read_offset_checkpoint(path, env=env) == {("t", 0): 1}


def test_consuming_the_marker_is_made_durable(tmp_path: Path) -> None:
    """If the removal were lost in a crash, the next start would skip recovery."""
    events: list[str] = []

    class Recording(io.Env):
        def unlink(self, path: Path | str) -> bool:
            events.append(f"unlink {Path(path).name}")
            return super().unlink(path)

        def fsync_dir(self, path: Path | str) -> None:
            events.append("fsync_dir")
            super().fsync_dir(path)

    checkpoints.write_clean_shutdown(tmp_path, 5)
    assert checkpoints.consume_clean_shutdown(tmp_path, env=Recording())
    assert events == ["unlink .kafka_cleanshutdown", "fsync_dir"]


def test_clean_shutdown_epoch(tmp_path: Path) -> None:
    assert checkpoints.read_clean_shutdown_epoch(tmp_path) is None
    checkpoints.write_clean_shutdown(tmp_path, 2**40)
    assert checkpoints.read_clean_shutdown_epoch(tmp_path) == 2**40
    marker = tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE
    # Like Kafka, an unreadable epoch is only "unknown": the marker still counts.
    for content in (b"", b"{", b'{"version":0}', b'{"brokerEpoch":"7"}', b"[1]", b"\xff"):
        marker.write_bytes(content)
        assert checkpoints.read_clean_shutdown_epoch(tmp_path) is None
    assert checkpoints.consume_clean_shutdown(tmp_path)


def test_partition_metadata_as_kafka_may_leave_it(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    path.write_bytes(b"version: 0\r\ntopic_id: EjRWeBI0VngSNFZ4EjRWeA\n")
    expected = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert checkpoints.read_partition_metadata(tmp_path) == expected
    for content in (
        b"version:0\ntopic_id: EjRWeBI0VngSNFZ4EjRWeA",  # Kafka splits on ": "
        b"topic_id: EjRWeBI0VngSNFZ4EjRWeA\nversion: 0",
        b"version: 0\ntopic_id: EjRWeBI0VngSNFZ4EjRWe+",  # not URL-safe base64
        b"version: 0\ntopic_id: EjRWeBI0VngSNFZ4EjRWeA==",
    ):
        path.write_bytes(content)
        with pytest.raises(CorruptCheckpointError, match=r"partition\.metadata"):
            checkpoints.read_partition_metadata(tmp_path)
    with pytest.raises(ValueError, match="zero UUID"):
        checkpoints.write_partition_metadata(tmp_path, uuid.UUID(int=0))


def test_uuid_encoding_is_kafkas() -> None:
    assert checkpoints.encode_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    value = uuid.UUID("ffffffff-ffff-ffff-ffff-ffffffffffff")
    assert checkpoints.encode_uuid(value) == "_____________________w"
    assert checkpoints.decode_uuid("_____________________w") == value
    for bad in ("", "EjRW", "EjRWeBI0VngSNFZ4EjRWe/", "EjRWeBI0VngSNFZ4EjRWeA="):
        with pytest.raises(ValueError):
            checkpoints.decode_uuid(bad)


def test_meta_properties_as_kafka_writes_them(tmp_path: Path) -> None:
    """Java's Properties.store: comment lines first, keys in any order."""
    (tmp_path / "meta.properties").write_bytes(
        b"#\n#Tue Feb 27 14:35:14 UTC 2024\nnode.id=1\ndirectory.id=ZgWDaoY0TSCm93e5JFibxg\n"
        b"version=1\ncluster.id=2P7BfyupSvWdjPbmZLxx5g\n"
    )
    assert checkpoints.read_meta_properties(tmp_path) == {
        "node.id": "1",
        "directory.id": "ZgWDaoY0TSCm93e5JFibxg",
        "version": "1",
        "cluster.id": "2P7BfyupSvWdjPbmZLxx5g",
    }
    checkpoints.write_meta_properties(tmp_path, 2, "2P7BfyupSvWdjPbmZLxx5g", None)
    first = (tmp_path / "meta.properties").read_text().split("\n")[0]
    assert re.fullmatch(
        r"#(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d UTC \d{4}", first
    )
    for bad in ("", "a b", "back\\slash", "caf\u00e9", "a\nb"):
        with pytest.raises(ValueError, match="cluster id"):
            checkpoints.write_meta_properties(tmp_path, 1, bad, None)
