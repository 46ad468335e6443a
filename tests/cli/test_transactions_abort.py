"""``seglog transactions find-hanging`` and ``abort`` on hanging transactions of a real broker.

The hanging transactions are written into the log directory before the broker
starts, by producer ids no coordinator ever handed out: their data holds the
partition's last stable offset until an ABORT marker is written for them.
"""

from __future__ import annotations

import time
from pathlib import Path

from click.testing import CliRunner
from confluent_kafka import Producer

from seglog.cli.main import cli
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir
from tests.broker.conftest import BrokerProcess
from tests.broker.test_transactions import _read

HANGING = 7777
OTHER = 8888
EPOCH = 3


def _write_hanging(data: Path, topic: str) -> None:
    """Partition 0: a hanging transaction (0-1), committed-free data (2), another (3)."""
    log_dir = LogDir.open(data)
    try:
        log_dir.create_topic(topic, 2)
        log = log_dir.log(topic, 0)
        old = int(time.time() * 1000) - 30 * 60_000  # idle for half an hour

        def transactional(pid: int, values: list[bytes]) -> bytes:
            records = [SimpleRecord(v, timestamp=old) for v in values]
            return build_batch(
                records, producer_id=pid, producer_epoch=EPOCH, base_sequence=0,
                is_transactional=True,
            )  # fmt: skip

        log.append(transactional(HANGING, [b"h0", b"h1"]), from_client=False)
        log.append(build_batch([SimpleRecord(b"after", timestamp=old)]), from_client=False)
        log.append(transactional(OTHER, [b"o0"]), from_client=False)
    finally:
        log_dir.close()


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["transactions", *args])
    return result.exit_code, result.output


def test_hanging_transactions_are_found_and_aborted(tmp_path: Path, topic: str) -> None:
    broker = BrokerProcess(tmp_path / "data")
    _write_hanging(broker.data, topic)
    broker.start()
    try:
        server = ["--bootstrap-server", broker.bootstrap]
        # A live transaction in partition 1: its coordinator knows it, so it is not hanging.
        live = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
        live.init_transactions(10)
        live.begin_transaction()
        live.produce(topic, b"live", partition=1)
        live.flush(10)
        assert _read(broker.bootstrap, topic) == []  # the LSO of partition 0 is stuck at 0

        code, output = _run(
            "find-hanging", *server, "--topic", topic, "--max-transaction-timeout", "0"
        )
        assert code == 0, output
        header, *rows = [line.split() for line in output.splitlines()]
        assert header == [
            "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
            "StartOffset", "LastTimestamp", "Duration(min)",
        ]  # fmt: skip
        assert [(r[0], r[1], r[2], r[3], r[5]) for r in rows] == [
            (topic, "0", str(HANGING), str(EPOCH), "0"),
            (topic, "0", str(OTHER), str(EPOCH), "3"),
        ]
        assert int(rows[0][7]) >= 29
        # Idle for less than 60 minutes: not yet a candidate.
        code, output = _run("find-hanging", *server, "--topic", topic, "--partition", "0",
                            "--max-transaction-timeout", "60")  # fmt: skip
        assert code == 0 and len(output.splitlines()) == 1, output

        code, output = _run("abort", *server, "--topic", topic, "--partition", "0",
                            "--start-offset", "1")  # fmt: skip
        assert code != 0
        assert "Could not find any open transactions starting at offset 1" in output

        code, output = _run("abort", *server, "--topic", topic, "--partition", "0",
                            "--start-offset", "0")  # fmt: skip
        assert code == 0, output
        # The LSO moved to the other hanging transaction: "after" is readable.
        assert _read(broker.bootstrap, topic) == [b"after"]

        code, output = _run("abort", *server, "--topic", topic, "--partition", "0",
                            "--producer-id", str(OTHER), "--producer-epoch", str(EPOCH - 1),
                            "--coordinator-epoch", "-1")  # fmt: skip
        assert code != 0 and "INVALID_PRODUCER_EPOCH" in output
        code, output = _run("abort", *server, "--topic", topic, "--partition", "0",
                            "--producer-id", str(OTHER), "--producer-epoch", str(EPOCH),
                            "--coordinator-epoch", "-1")  # fmt: skip
        assert code == 0, output
        code, output = _run(
            "find-hanging", *server, "--topic", topic, "--max-transaction-timeout", "0"
        )
        assert code == 0 and len(output.splitlines()) == 1, output

        live.commit_transaction(10)
        assert sorted(_read(broker.bootstrap, topic, 2)) == [b"after", b"live"]
        everything = _read(broker.bootstrap, topic, 2, committed=False)
        assert sorted(everything) == [b"after", b"h0", b"h1", b"live", b"o0"]
    finally:
        broker.stop()


def test_abort_needs_a_transaction_named(broker: BrokerProcess, topic: str) -> None:
    server = ["--bootstrap-server", broker.bootstrap]
    code, output = _run("abort", *server, "--topic", topic, "--partition", "0")
    assert code != 0 and "--start-offset" in output
    code, output = _run("abort", *server, "--topic", topic, "--partition", "0",
                        "--producer-id", "5")  # fmt: skip
    assert code != 0 and "--producer-epoch" in output
    code, output = _run("find-hanging", *server)
    assert code != 0 and "--broker-id" in output
