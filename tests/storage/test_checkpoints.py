from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from seglog.errors import CorruptCheckpointError, InvalidTopicError
from seglog.storage import checkpoints, filenames, io


def test_offset_checkpoint_text_is_kafkas(tmp_path: Path) -> None:
    path = tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT
    checkpoints.write_offset_checkpoint(path, {("orders", 1): 980, ("orders", 0): 1200})
    assert path.read_text() == "0\n2\norders 0 1200\norders 1 980\n"
    assert checkpoints.read_offset_checkpoint(path) == {("orders", 0): 1200, ("orders", 1): 980}
    assert not list(tmp_path.glob("*.tmp"))
    assert checkpoints.read_offset_checkpoint(tmp_path / "missing") == {}


@pytest.mark.parametrize(
    "text", ["", "1\n0\n", "0\n2\norders 0 1\n", "0\n1\norders zero 1\n", "0\nx\n"]
)
def test_corrupt_checkpoints(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError):
        checkpoints.read_offset_checkpoint(path)


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    assert not checkpoints.consume_clean_shutdown(tmp_path)
    checkpoints.write_clean_shutdown(tmp_path)
    assert (tmp_path / ".kafka_cleanshutdown").read_text() == '{"version":0,"brokerEpoch":0}'
    assert checkpoints.consume_clean_shutdown(tmp_path)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()


def test_partition_metadata(tmp_path: Path) -> None:
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    checkpoints.write_partition_metadata(tmp_path, topic_id)
    text = (tmp_path / "partition.metadata").read_text()
    assert text == "version: 0\ntopic_id: EjRWeBI0VngSNFZ4EjRWeA"
    assert checkpoints.read_partition_metadata(tmp_path) == topic_id


def test_meta_properties(tmp_path: Path) -> None:
    checkpoints.write_meta_properties(tmp_path, 1, "abc", None)
    props = checkpoints.read_meta_properties(tmp_path)
    assert props == {"cluster.id": "abc", "node.id": "1", "version": "1"}


def test_filenames() -> None:
    assert filenames.offset_name(42) == "00000000000000000042"
    assert filenames.parse_base_offset("00000000000000000042.log") == 42
    assert filenames.parse_base_offset("00000000000000000042.timeindex.swap") == 42
    assert filenames.parse_base_offset("42.log") is None
    assert filenames.parse_partition_dir("my-topic-3") == ("my-topic", 3)
    assert filenames.parse_partition_dir("t-0.abc-delete") is None
    assert filenames.parse_partition_dir("nodash") is None
    filenames.validate_topic_name("a.b_c-9")
    for bad in ("", ".", "..", "a/b", "a b", "x" * 250):
        with pytest.raises(InvalidTopicError):
            filenames.validate_topic_name(bad)


def test_atomic_write_replaces(tmp_path: Path) -> None:
    path = tmp_path / "f"
    io.atomic_write_text(path, "one")
    io.atomic_write_text(path, "two")
    assert path.read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
    assert io.unlink_if_exists(path) and not io.unlink_if_exists(path)
