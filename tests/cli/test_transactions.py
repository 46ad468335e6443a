"""``seglog transactions`` against a real broker."""

from __future__ import annotations

from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.cli.main import cli
from tests.broker.conftest import BrokerProcess


def test_list_and_describe(broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(10)
    txn_id = f"cli-{topic}"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"v")
    producer.flush(10)
    server = ["--bootstrap-server", broker.bootstrap]
    result = CliRunner().invoke(cli, ["transactions", "list", *server, "--state", "Ongoing"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split() == [
        "TransactionalId",
        "ProducerId",
        "TransactionState",
    ]
    assert any(line.startswith(txn_id) and "Ongoing" in line for line in result.output.splitlines())
    result = CliRunner().invoke(cli, ["transactions", "describe", *server, txn_id])
    assert result.exit_code == 0, result.output
    row = result.output.splitlines()[1].split()
    assert row[0] == txn_id and row[3] == "Ongoing" and row[-1] == f"{topic}-0"
    producer.commit_transaction(10)
    result = CliRunner().invoke(cli, ["transactions", "describe", *server, txn_id])
    assert result.output.splitlines()[1].split()[3] == "CompleteCommit"
    result = CliRunner().invoke(cli, ["transactions", "describe", *server, "no-such-id"])
    assert result.exit_code != 0
    assert "TRANSACTIONAL_ID_NOT_FOUND" in result.output
