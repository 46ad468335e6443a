"""``seglog find``: over a log directory read in place, and through a real broker's HTTP API."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from seglog.cli.find import parse_time
from seglog.cli.main import cli
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.key_lookup import find_in_log_dir
from seglog.storage.log_dir import LogDir
from tests.broker.conftest import BrokerProcess, free_port

NOW = int(time.time() * 1000) // 1000 * 1000
BINARY = b"\xff\xfe\x00bin"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["find", *args])


def ok(*args: str) -> Result:
    result = run(*args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def one_line_error(result: Result, expected: str) -> None:
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.startswith("seglog: error: "), result.stderr
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr


def write_log_dir(root: Path, *, indexed: bool = True) -> None:
    """``orders``: 2 partitions, keys k0..k2 a second apart, one binary key and value, headers."""
    configs = {"internal.segment.bytes": "600"}
    if indexed:
        configs["key.index.enable"] = "true"
    with LogDir.open(root) as logs:
        logs.create_topic("orders", 2, configs)
        for i in range(30):
            logs.log("orders", i % 2).append(
                build_batch([SimpleRecord(b"v%d" % i, b"k%d" % (i % 3), NOW + 1000 * i)])
            )
        logs.log("orders", 0).append(
            build_batch([SimpleRecord(BINARY, BINARY, NOW + 40_000, [("h", b"x"), ("n", None)])])
        )
        logs.log("orders", 1).append(build_batch([SimpleRecord(None, b"k0", NOW + 41_000)]))
        if indexed:
            logs.run_key_indexer()


def test_times_as_epoch_ms_or_iso() -> None:
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_time("2023-11-14T23:13:20.5+01:00") == 1_700_000_000_500


def test_log_dir_newest_all_and_bounds(tmp_path: Path) -> None:
    write_log_dir(tmp_path)
    newest = lines(ok("orders", "k0", "--log-dir", str(tmp_path), "--format", "json"))
    assert newest == [
        {
            "topic": "orders",
            "partition": 1,
            "offset": 15,
            "timestamp": NOW + 41_000,
            "key": "k0",
            "key_encoding": "utf8",
            "value": None,
            "value_encoding": None,
            "headers": [],
        }
    ]
    every = lines(ok("orders", "k1", "--all", "--log-dir", str(tmp_path), "--format", "json"))
    assert [r["value"] for r in every] == [f"v{i}" for i in range(28, -1, -3)]
    limited = lines(
        ok("orders", "k1", "--limit", "3", "--log-dir", str(tmp_path), "--format", "json")
    )
    assert limited == every[:3]
    one = lines(
        ok(
            "orders",
            "k1",
            "--all",
            "--partition",
            "0",
            "--log-dir",
            str(tmp_path),
            "--format",
            "json",
        )
    )
    assert one == [r for r in every if r["partition"] == 0]
    iso = datetime_text(NOW + 10_000)
    window = lines(
        ok(
            "orders", "k1", "--all", "--from", iso, "--to", str(NOW + 20_000),
            "--log-dir", str(tmp_path), "--format", "json",
        )
    )  # fmt: skip
    assert [r["value"] for r in window] == ["v19", "v16", "v13", "v10"]
    text = ok("orders", "k2", "--log-dir", str(tmp_path)).stdout_bytes
    assert text == b"1\t14\t" + datetime_text(NOW + 29_000).encode() + b"\tk2\tv29\n"
    assert ok("orders", "never", "--all", "--log-dir", str(tmp_path)).stdout == ""


def datetime_text(ms: int) -> str:
    """``ms`` as ISO-8601 in UTC with milliseconds and a Z, as the text output shows times."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def test_log_dir_bytes_headers_and_nulls(tmp_path: Path) -> None:
    write_log_dir(tmp_path)
    key = base64.b64encode(BINARY).decode()
    [record] = lines(
        ok("orders", key, "--key-base64", "--log-dir", str(tmp_path), "--format", "json")
    )
    assert record["key"] == key and record["key_encoding"] == "base64"
    assert record["value"] == key and record["value_encoding"] == "base64"
    assert record["headers"] == [
        {"key": "h", "value": "x", "value_encoding": "utf8"},
        {"key": "n", "value": None, "value_encoding": None},
    ]
    raw = ok("orders", key, "--key-base64", "--log-dir", str(tmp_path)).stdout_bytes
    assert raw.split(b"\t")[3:] == [BINARY, BINARY + b"\n"]
    assert ok("orders", "k0", "--log-dir", str(tmp_path)).stdout.endswith("\tk0\tnull\n")


def test_log_dir_unindexed_topics_are_scanned_and_said_so(tmp_path: Path) -> None:
    write_log_dir(tmp_path, indexed=False)
    result = ok("orders", "k1", "--all", "--log-dir", str(tmp_path), "--format", "json")
    assert len(lines(result)) == 10
    assert "keeps no key index" in result.stderr and "scanned" in result.stderr
    indexed = tmp_path / "indexed"
    write_log_dir(indexed)
    assert ok("orders", "k1", "--log-dir", str(indexed)).stderr == ""


def test_log_dir_errors(tmp_path: Path) -> None:
    write_log_dir(tmp_path)
    one_line_error(run("nope", "k", "--log-dir", str(tmp_path)), "has no topic 'nope'")
    one_line_error(run("orders", "k", "--partition", "5", "--log-dir", str(tmp_path)), "orders-5")
    one_line_error(run("orders", "k", "--log-dir", str(tmp_path / "missing")), "log directory")
    usage = run("orders", "k", "--from", "yesterday", "--log-dir", str(tmp_path))
    assert usage.exit_code == 2 and "ISO-8601" in usage.stderr
    usage = run("orders", "k", "--from", "2", "--to", "1", "--log-dir", str(tmp_path))
    assert usage.exit_code == 2 and "--from is after --to" in usage.stderr


# ---------------------------------------------------------------- a broker


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for record in records:
        producer.produce(topic, **record)
    assert producer.flush(30) == 0


def create(bootstrap: str, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, config=config)])[topic].result(30)


def test_through_the_brokers_http_api_equals_the_log_dir_read_in_place(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    """The port comes from DescribeConfigs (console.port=0 takes a free one)."""
    broker = make_broker(**{"console.port": "0"})
    create(broker.bootstrap, topic, 3, **{"key.index.enable": "true"})
    records: list[dict[str, Any]] = []
    for i in range(40):
        records.append(
            {
                "key": b"k%d" % (i % 4),
                "value": b"value-%d" % i,
                "partition": i % 3,
                "timestamp": NOW + 1000 * i,
                "headers": [("i", b"%d" % i)],
            }
        )
    records.append({"key": BINARY, "value": BINARY, "partition": 1, "timestamp": NOW + 50_000})
    produce(broker.bootstrap, topic, records)
    server = ["--bootstrap-server", broker.bootstrap]
    files = ["--log-dir", str(broker.data)]
    for args in (
        ["k1"],
        ["k1", "--all"],
        ["k2", "--limit", "4"],
        ["k3", "--all", "--partition", "2"],
        ["k0", "--all", "--from", str(NOW + 5000), "--to", datetime_text(NOW + 30_000)],
        ["k0", "--all", "--isolation-level", "read_committed"],
        [base64.b64encode(BINARY).decode(), "--key-base64"],
        ["never", "--all"],
    ):
        over_http = lines(ok(topic, *args, *server, "--format", "json"))
        in_place = lines(ok(topic, *args, *files, "--format", "json"))
        assert over_http == in_place, args
        assert ok(topic, *args, *server).stdout == ok(topic, *args, *files).stdout
    every = lines(ok(topic, "k1", "--all", *server, "--format", "json"))
    assert [r["value"] for r in every] == [f"value-{i}" for i in range(37, 0, -4)]
    assert every[0]["headers"] == [{"key": "i", "value": "37", "value_encoding": "utf8"}]
    [binary] = lines(
        ok(topic, base64.b64encode(BINARY).decode(), "--key-base64", *server, "--format", "json")
    )
    assert binary["value_encoding"] == "base64"
    assert base64.b64decode(binary["value"]) == BINARY


def test_broker_errors(make_broker: Callable[..., BrokerProcess], topic: str) -> None:
    broker = make_broker(**{"console.port": "0"})
    server = ["--bootstrap-server", broker.bootstrap]
    create(broker.bootstrap, topic, 1)  # no key index
    one_line_error(run(topic, "k", *server), "keeps no key index")
    one_line_error(run(topic + "-missing", "k", *server), topic + "-missing")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka.admin import ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.BROKER, "1")
    port = admin.describe_configs([resource])[resource].result(30)["console.port"].value
    create(broker.bootstrap, topic + "-indexed", 1, **{"key.index.enable": "true"})
    produce(broker.bootstrap, topic + "-indexed", [{"key": b"k", "value": b"v"}])
    url = ["--console-url", f"http://127.0.0.1:{port}"]
    assert ok(topic + "-indexed", "k", *url).stdout.endswith("\tk\tv\n")
    usage = run(topic, "k", *url, "--log-dir", str(broker.data))
    assert usage.exit_code == 2


def test_a_broker_without_http_api(broker: BrokerProcess, topic: str) -> None:
    one_line_error(run(topic, "k", "--bootstrap-server", broker.bootstrap), "serves no HTTP API")


def test_log_dir_read_while_the_broker_writes(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    """Segments roll and are sealed under the reader: every answer holds what was
    acknowledged before it began, and only the key's records."""
    broker = make_broker(**{"internal.log.segment.bytes": "16384"})
    create(broker.bootstrap, topic, 2, **{"key.index.enable": "true"})
    acked: list[bytes] = []
    failed: list[str] = []
    done = threading.Event()

    def write() -> None:
        config = {"bootstrap.servers": broker.bootstrap, "linger.ms": 1, "batch.size": 2048}
        producer = Producer(config)

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(str(err))
            elif msg.key() == b"k1":
                acked.append(msg.value())

        try:
            for i in range(3000):
                value = b"%d." % i + b"x" * 100
                producer.produce(topic, value, b"k%d" % (i % 7), on_delivery=report)
                producer.poll(0)
            producer.flush(60)
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    rounds = 0
    try:
        while not done.is_set() or rounds < 3:
            before = set(acked)
            found = find_in_log_dir(broker.data, topic, b"k1")
            assert {r.key for r in found} <= {b"k1"}
            values = [r.value for r in found]
            assert before <= set(values), sorted(before - set(values))[:5]
            assert len(values) == len(set(values))
            rounds += 1
    finally:
        writer.join()
    assert not failed, failed[:3]
    assert len(find_in_log_dir(broker.data, topic, b"k1")) == len(acked) == 3000 // 7 + 1
    logs = [p for p in broker.data.iterdir() if p.name.startswith(topic + "-")]
    assert sum(len(list(d.glob("*.log"))) for d in logs) > 6  # rolled under the reader

    # The broker's indexer seals the rolled segments' .keyindex files: read through them.
    def sealed() -> bool:
        return all(len(list(d.glob("*.keyindex"))) == len(list(d.glob("*.log"))) - 1 for d in logs)

    deadline = time.monotonic() + 60
    while not sealed():
        assert time.monotonic() < deadline, "the broker sealed no key index"
        time.sleep(0.1)
    values = [r.value for r in find_in_log_dir(broker.data, topic, b"k1")]
    assert sorted(values) == sorted(acked)


def test_an_http_api_that_does_not_answer() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    one_line_error(run("orders", "k", "--console-url", url), f"cannot reach the HTTP API at {url}")


def test_a_kafka_written_directory_without_key_indexes_is_answered_and_left_alone(
    kafka_partition: Path,
) -> None:
    root = kafka_partition.parent
    before = {p.name: p.read_bytes() for p in kafka_partition.iterdir()}
    result = CliRunner().invoke(
        cli, ["find", "orders", "key1005", "--log-dir", str(root), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("{")]
    record = json.loads(line)
    assert (record["offset"], record["key"]) == (1005, "key1005")
    # Read in place: no key index (nor anything else) written into Kafka's directory.
    assert {p.name: p.read_bytes() for p in kafka_partition.iterdir()} == before
