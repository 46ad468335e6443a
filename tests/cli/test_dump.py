from __future__ import annotations

import time
from pathlib import Path

from click.testing import CliRunner

from seglog.cli.main import cli
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir


def test_dump_log_of_a_kafka_written_segment(kafka_partition: Path) -> None:
    log = kafka_partition / "00000000000000001000.log"
    result = CliRunner().invoke(cli, ["dump-log", "--print-data", str(log)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "Log starting offset: 1000"
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batches) == 20
    assert batches[0].startswith("baseOffset: 1000 lastOffset: 1002 count: 3")
    assert "compresscodec: none" in batches[0] and "isvalid: true" in batches[0]
    records = [line for line in lines if line.startswith("| offset:")]
    assert len(records) == 60
    assert "key: key1000" in records[0] and "payload: value-0-0" in records[0]
    assert "headerKeys: [h]" in records[0]


def test_dump_and_check_kafka_indexes(kafka_partition: Path) -> None:
    index = kafka_partition / "00000000000000001000.index"
    tindex = kafka_partition / "00000000000000001000.timeindex"
    result = CliRunner().invoke(cli, ["dump-log", str(index), str(tindex)])
    assert result.exit_code == 0, result.output
    assert "offset: " in result.output and "timestamp: " in result.output
    assert "mismatch" not in result.output


def test_index_mismatch_is_reported(kafka_partition: Path) -> None:
    index = kafka_partition / "00000000000000001000.index"
    data = bytearray(index.read_bytes())
    data[7] ^= 0x01  # move the first entry's position off a batch boundary
    index.write_bytes(bytes(data))
    result = CliRunner().invoke(cli, ["dump-log", str(index)])
    assert result.exit_code == 2
    assert "problem" in result.output


def test_corrupt_batch_is_reported_as_invalid(kafka_partition: Path) -> None:
    log = kafka_partition / "00000000000000001000.log"
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF
    log.write_bytes(bytes(data))
    result = CliRunner().invoke(cli, ["dump-log", str(log)])
    assert result.exit_code == 2
    assert "isvalid: false" in result.output


def test_dump_of_legacy_messages(legacy_segment: Path) -> None:
    result = CliRunner().invoke(cli, ["dump-log", "--print-data", str(legacy_segment)])
    assert result.exit_code == 0, result.output
    assert result.output.count("magic: 1") == 5
    assert "payload: legacy-4" in result.output


def test_seglog_reads_a_kafka_partition_directory(kafka_partition: Path) -> None:
    with LogDir.open(kafka_partition.parent) as logs:
        log = logs.log("orders", 0)
        assert log.log_start_offset == 1000 and log.log_end_offset == 1060
        records = list(logs.read_records("orders", 0, 1000, max_bytes=1 << 20))
        assert [r.offset for r in records] == list(range(1000, 1060))
        found = logs.offset_for_time("orders", 0, 1_700_000_000_000 + 1030)
        assert found is not None and found.offset == 1030
        info = log.append(build_batch([SimpleRecord(value=b"new")]))
        assert info.first_offset == 1060


def test_dump_of_what_seglog_writes(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 1)
        logs.append("t", 0, build_batch([SimpleRecord(value=b"x" * 5000, key=b"k")] * 3))
        logs.append("t", 0, build_batch([SimpleRecord(value=b"y", key=b"k")]))
    files = sorted(str(p) for p in (tmp_path / "t-0").iterdir() if p.suffix != ".metadata")
    result = CliRunner().invoke(cli, ["dump-log", *files])
    assert result.exit_code == 0, result.output
    assert "baseOffset: 3 lastOffset: 3" in result.output


def test_not_a_segment_file(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hi")
    result = CliRunner().invoke(cli, ["dump-log", str(other)])
    assert result.exit_code != 0
    assert "not a .log, .index, .timeindex, .txnindex, .keyindex or .snapshot file" in result.output


def test_dump_of_a_producer_snapshot(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 1)
        logs.append(
            "t",
            0,
            build_batch(
                [SimpleRecord(value=b"a", timestamp=now)] * 3,
                producer_id=77,
                producer_epoch=1,
                base_sequence=10,
            ),
        )
    snapshot = tmp_path / "t-0" / "00000000000000000003.snapshot"
    result = CliRunner().invoke(cli, ["dump-log", str(snapshot)])
    assert result.exit_code == 0, result.output
    assert "producerId: 77 producerEpoch: 1" in result.output
    assert "firstSequence: 10 lastSequence: 12 lastOffset: 2 offsetDelta: 2" in result.output
    snapshot.write_bytes(snapshot.read_bytes()[:-1])
    result = CliRunner().invoke(cli, ["dump-log", str(snapshot)])
    assert result.exit_code == 2
    assert "invalid producer snapshot" in result.output


def test_dump_of_transaction_markers_and_the_txnindex(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 1)
        log = logs.log("t", 0)
        log.append(
            build_batch(
                [SimpleRecord(value=b"a", timestamp=now)] * 2,
                producer_id=77,
                producer_epoch=1,
                base_sequence=0,
                is_transactional=True,
            )
        )
        log.append_marker(77, 1, commit=False, coordinator_epoch=4)
    partition = tmp_path / "t-0"
    result = CliRunner().invoke(
        cli, ["dump-log", "--print-data", str(partition / "00000000000000000000.log")]
    )
    assert result.exit_code == 0, result.output
    assert "isTransactional: true isControl: true" in result.output
    assert "endTxnMarker: ABORT coordinatorEpoch: 4" in result.output
    result = CliRunner().invoke(cli, ["dump-log", str(partition / "00000000000000000000.txnindex")])
    assert result.exit_code == 0, result.output
    assert (
        "version: 0 producerId: 77 firstOffset: 0 lastOffset: 2 lastStableOffset: 3"
        in result.output
    )


def test_dump_and_check_a_key_index(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log_dir:
        log_dir.create_topic("t", 1, {"key.index.enable": "true"})
        for n in range(30):
            log_dir.append("t", 0, build_batch([(b"k%d" % (n % 4), b"v" * 40, 1000 + n)]))
            if n % 10 == 9:
                log_dir.log("t", 0).roll()
    partition = tmp_path / "t-0"
    sealed = sorted(partition.glob("*.keyindex"))
    assert sealed, "a clean close writes every segment's key index"
    result = CliRunner().invoke(cli, ["dump-log", *map(str, sealed)])
    assert result.exit_code == 0, result.output
    assert "entry: 1 offset: " in result.output and "keyHash: " in result.output
    # A key index that no longer covers its .log is reported.
    log = sealed[0].with_suffix(".log")
    log.write_bytes(log.read_bytes()[:-5])
    result = CliRunner().invoke(cli, ["dump-log", str(sealed[0])])
    assert result.exit_code == 2
    assert "Found stale key index" in result.output
